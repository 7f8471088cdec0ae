// sandboxd-sim guest — development substrate, not product code. See README.md in this folder.
//
// The guest agent's listener: an envd-compatible HTTP server for one sandbox (what the node's ports relay reaches
// as the guest's port 49983). Bun.serve hosts it; hono routes the REST part; the Connect services are
// @connectrpc/connect's universal handlers adapted to fetch (JSON and binary encodings, server streaming).
//
// Credentials, as envd checks them: once /init has set an access token, every request except GET /health needs
// `X-Access-Token` equal to it (401 otherwise); `/files` also accepts a valid signed URL instead (GET = read,
// POST = write; `signature` = "v1_" + base64(sha256("<path>:<op>:<username>:<token>[:<expiration>]")) without
// padding, and an unexpired `signature_expiration` when present). Before /init sets a token nothing is checked.
import { Hono } from "hono";
import { z } from "zod";
import { createConnectRouter } from "@connectrpc/connect";
import { createFetchHandler } from "@connectrpc/connect/protocol";
import { cpus, freemem, totalmem } from "node:os";
import { statfsSync } from "node:fs";
import { Process } from "./gen/process/process_pb.ts";
import { Filesystem } from "./gen/filesystem/filesystem_pb.ts";
import { processService } from "./process-service.ts";
import { filesystemService, type PollingWatcher } from "./filesystem-service.ts";
import { downloadFile, envdError, uploadFiles } from "./files-http.ts";
import { type Clock, realClock } from "#shared/clock/index.ts";
import { fileSignature } from "#shared/sandboxd/index.ts";
import { codeMessageEnvelope, guardRequests, uncaughtErrorHandler } from "#shared/http/index.ts";
import { safeEqual } from "../auth.ts";
import { simLog } from "../log.ts";
import { PathError } from "./paths.ts";
import type { GuestSandbox } from "./sandbox.ts";

/** The envd version this guest implements (the e2b surface reports it as envdVersion; the SDK gates features on it). */
export const GUEST_ENVD_VERSION = "0.8.0";

/** envd's POST /init body (unknown fields ignored, as envd's JSON decoder does). */
const InitBody = z.object({
  accessToken: z.string().optional(),
  envVars: z.record(z.string(), z.string()).optional(),
  defaultUser: z.string().optional(),
  defaultWorkdir: z.string().optional(),
  timestamp: z.string().optional(),
});

export interface GuestServer {
  readonly port: number;
  stop(): Promise<void>;
}

function signedFileOk(sb: GuestSandbox, url: URL, method: string, nowSeconds: number): "ok" | "expired" | "bad" {
  const token = sb.accessToken;
  const sig = url.searchParams.get("signature");
  if (!sig || token === undefined) return "bad";
  const op = method === "GET" ? "read" : method === "POST" ? "write" : undefined;
  if (!op) return "bad";
  const path = url.searchParams.get("path") ?? "";
  const expText = url.searchParams.get("signature_expiration");
  const exp = expText !== null && /^\d+$/.test(expText) ? Number(expText) : undefined;
  if (expText !== null && exp === undefined) return "bad";
  const user = url.searchParams.get("username") ?? "";
  const good = safeEqual(sig, fileSignature({ path, operation: op, user, accessToken: token, expiresAtSeconds: exp }));
  if (!good) return "bad";
  return exp !== undefined && exp < nowSeconds ? "expired" : "ok";
}

/** `clock` judges signed-URL expiry and stamps /metrics: the node's clock, so fake-time tests move the guest too. */
export function createGuestApp(sb: GuestSandbox, clock: Clock = realClock): Hono {
  const watchers = new Map<string, PollingWatcher>();
  const router = createConnectRouter();
  router.service(Process, processService(sb));
  router.service(Filesystem, filesystemService(sb, watchers));
  const rpc = new Map(router.handlers.map((h) => [h.requestPath, createFetchHandler(h)]));

  const app = new Hono();
  app.use("*", async (c, next) => {
    const url = new URL(c.req.url);
    if (url.pathname === "/health" || sb.accessToken === undefined) return next();
    const presented = c.req.header("x-access-token");
    if (presented !== undefined && safeEqual(presented, sb.accessToken)) return next();
    if (url.pathname === "/files" && presented === undefined && url.searchParams.has("signature")) {
      const v = signedFileOk(sb, url, c.req.method, Math.floor(clock.now() / 1000));
      if (v === "ok") return next();
      return envdError(401, v === "expired" ? "signature expired" : "invalid signature");
    }
    // /init has its own rule (a re-init may present the new token in the body, see GuestSandbox.mayReinit).
    if (url.pathname === "/init" && c.req.method === "POST") return next();
    return envdError(401, presented === undefined ? "missing X-Access-Token" : "invalid access token");
  });

  app.get("/health", () => new Response(null, { status: 204 }));

  app.post("/init", async (c) => {
    let body: z.infer<typeof InitBody>;
    try {
      const text = await c.req.text();
      body = InitBody.parse(text.trim() === "" ? {} : JSON.parse(text));
    } catch (e) {
      return envdError(400, `invalid init body: ${e instanceof z.ZodError ? e.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") : (e as Error).message}`);
    }
    if (!sb.mayReinit(c.req.header("x-access-token"), body.accessToken)) return envdError(401, "invalid access token for re-init");
    if (body.accessToken !== undefined && body.accessToken !== "") sb.accessToken = body.accessToken;
    if (body.envVars) sb.envVars = { ...sb.envVars, ...body.envVars };
    if (body.defaultUser) sb.defaultUser = body.defaultUser;
    if (body.defaultWorkdir) {
      try {
        sb.makeDirs(sb.paths.toHost(body.defaultWorkdir), undefined);
      } catch (e) {
        if (e instanceof PathError) return envdError(400, e.message);
        throw e;
      }
      sb.defaultWorkdir = body.defaultWorkdir;
    }
    return new Response(null, { status: 204 });
  });

  app.get("/envs", (c) => c.json(sb.envVars));

  app.get("/metrics", (c) => {
    let disk = { used: 0, total: 0 };
    try {
      const s = statfsSync(sb.paths.root);
      disk = { total: s.blocks * s.bsize, used: (s.blocks - s.bfree) * s.bsize };
    } catch {
      // leave zeros
    }
    const total = totalmem();
    return c.json({
      ts: Math.floor(clock.now() / 1000),
      cpu_count: cpus().length,
      cpu_used_pct: 0,
      mem_total: total,
      mem_used: total - freemem(),
      mem_cache: 0,
      disk_used: disk.used,
      disk_total: disk.total,
    });
  });

  app.get("/files", (c) => downloadFile(sb, c));
  app.post("/files", (c) => uploadFiles(sb, c));

  app.all("*", (c) => {
    const handler = rpc.get(new URL(c.req.url).pathname);
    if (handler) return handler(c.req.raw);
    return envdError(404, "not found");
  });
  app.onError((e) => envdError(500, e.message));
  return app;
}

/** Serve one sandbox's guest agent on 127.0.0.1 and a free port. */
export function startGuestServer(sb: GuestSandbox, host = "127.0.0.1", clock: Clock = realClock): GuestServer {
  const app = createGuestApp(sb, clock);
  const server = Bun.serve({
    hostname: host,
    port: 0,
    // Streams (process output, directory watches) may stay quiet for minutes; uploads may be large.
    idleTimeout: 0,
    maxRequestBodySize: 8 * 1024 * 1024 * 1024,
    // Never Bun's development page: odd request targets get envd's envelope, a throw one log line (shared/http).
    development: false,
    error: uncaughtErrorHandler(simLog(), codeMessageEnvelope),
    fetch: guardRequests(codeMessageEnvelope, async (req: Request) => {
      // A namespaced sandbox answers once its namespaces and root are up (a claim's first request may race them).
      try {
        await sb.ready;
      } catch (e) {
        return envdError(503, `sandbox not started: ${(e as Error).message}`);
      }
      return app.fetch(req);
    }),
  });
  return {
    port: server.port!,
    stop: async () => void (await server.stop(true)),
  };
}
