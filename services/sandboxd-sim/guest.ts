// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// A fake guest envd for the ports relay (sandboxd.md §7 item 11): an HTTP server a test attaches as a sandbox's
// port 49983 upstream. It checks `X-Access-Token` and signed `/files` URLs the way envd does, and records what it
// received (the relay's tests assert on the untouched request line and headers).
//   GET /health -> 204;  POST /init -> 204;  GET /metrics -> envd-style metrics
//   /files      X-Access-Token, or a valid `signature` (+ optional unexpired `signature_expiration`) -> 200
//   anything else needs X-Access-Token and echoes the request as JSON
// Signature (e2b SDK): "v1_" + base64(sha256("<path>:<read|write>:<user>:<accessToken>[:<exp>]")), no padding.
import { createHmac } from "node:crypto";
import { type Clock, realClock } from "#shared/clock/index.ts";
import { fileSignature as signFile } from "#shared/sandboxd/index.ts";
import { codeMessageEnvelope, guardRequests, uncaughtErrorHandler } from "#shared/http/index.ts";
import { safeEqual } from "./auth.ts";
import { simLog } from "./log.ts";

export interface FakeGuestOptions {
  /** The access token envd expects; when absent it is derived from envdSecret + claimToken, else unchecked. */
  accessToken?: string;
  envdSecret?: string;
  claimToken?: string;
  /** Judges signature expiry; a simulated node passes its own clock, so fake-time tests cover expiry. */
  clock?: Clock;
}

export interface GuestRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface FakeGuest {
  port: number;
  accessToken: string | undefined;
  readonly requests: GuestRequest[];
  stop(): Promise<void>;
}

export function deriveAccessToken(envdSecret: string, claimToken: string): string {
  return createHmac("sha256", envdSecret).update(claimToken).digest("hex");
}

/** The SDK's signature, positionally; the one algorithm lives in shared/sandboxd/urls.ts (the relay's side). */
export function fileSignature(path: string, op: "read" | "write", user: string, accessToken: string, expiration?: number): string {
  return signFile({ path, operation: op, user, accessToken, expiresAtSeconds: expiration });
}

export async function startFakeGuest(o: FakeGuestOptions = {}): Promise<FakeGuest> {
  const accessToken = o.accessToken ?? (o.envdSecret && o.claimToken ? deriveAccessToken(o.envdSecret, o.claimToken) : undefined);
  const clock = o.clock ?? realClock;
  const nowSeconds = () => Math.floor(clock.now() / 1000);
  const files = new Map<string, string>();
  const requests: GuestRequest[] = [];
  const tokenOk = (req: Request) => accessToken === undefined || safeEqual(req.headers.get("x-access-token") ?? "", accessToken);

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    development: false,
    error: uncaughtErrorHandler(simLog(), codeMessageEnvelope),
    fetch: guardRequests(codeMessageEnvelope, async (req: Request) => {
      const url = new URL(req.url);
      const body = req.method === "GET" || req.method === "HEAD" ? "" : await req.text();
      const headers: Record<string, string> = {};
      req.headers.forEach((v, k) => (headers[k] = v));
      requests.push({ method: req.method, url: url.pathname + url.search, headers, body });
      if (url.pathname === "/health") return new Response(null, { status: 204 });
      if (url.pathname === "/files") {
        const path = url.searchParams.get("path") ?? "";
        const op = req.method === "GET" ? "read" : "write";
        if (!tokenOk(req)) {
          const sig = url.searchParams.get("signature");
          const expText = url.searchParams.get("signature_expiration");
          const exp = expText ? Number(expText) : undefined;
          const user = url.searchParams.get("username") ?? "user";
          const good = sig && accessToken !== undefined && safeEqual(sig, fileSignature(path, op, user, accessToken, exp));
          if (!good) return Response.json({ code: 401, message: "invalid signature" }, { status: 401 });
          if (exp !== undefined && exp < nowSeconds()) return Response.json({ code: 401, message: "signature expired" }, { status: 401 });
        }
        if (op === "write") {
          files.set(path, body);
          return Response.json([{ path, name: path.split("/").pop(), type: "file" }]);
        }
        if (!files.has(path)) return Response.json({ code: 404, message: "file not found" }, { status: 404 });
        return new Response(files.get(path));
      }
      if (!tokenOk(req)) return Response.json({ code: 401, message: "missing or invalid X-Access-Token" }, { status: 401 });
      if (url.pathname === "/init" && req.method === "POST") return new Response(null, { status: 204 });
      if (url.pathname === "/metrics") {
        return Response.json({ ts: nowSeconds(), cpu_count: 1, cpu_used_pct: 1.5, mem_total: 536870912, mem_used: 134217728, mem_cache: 0, disk_used: 0, disk_total: 0 });
      }
      return Response.json({ method: req.method, path: url.pathname, query: url.search, headers });
    }),
  });
  return {
    port: server.port!,
    accessToken,
    requests,
    stop: async () => void (await server.stop(true)),
  };
}
