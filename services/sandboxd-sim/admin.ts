// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The knobs over HTTP, for a simulator running as its own process (the local stack, other languages):
//   POST /_sim/<knob>   body {"args":[…]} (or a bare JSON array) -> calls handle.<knob>(...args)
//   GET  /_sim/log      the request log;  DELETE /_sim/log clears it
//   GET  /_sim/claims   the claim table as the simulator sees it (tokens included: this is a test surface)
// Root-token protected with the node's own guard (open node: open). Served under /_sim/ on each node's
// listener, and by `--admin-listen` for a whole cluster, where `?node=<index>` picks the node (default 0).
import type { SandboxdSim } from "./sim.ts";
import { bearerOf } from "./auth.ts";
import { guardRequests, uncaughtErrorHandler } from "#shared/http/index.ts";
import { SimError, simErrorResponse } from "./errors.ts";
import { simLog } from "./log.ts";

export const ADMIN_KNOBS = [
  "advance", "reapNow", "refillNow", "idleNow", "slowWake", "memory", "latency", "hang", "fail", "reset", "listFails", "clearFaults",
  "setWarm", "setGolden", "provisionFails", "atCapacity", "setProvisionLatency", "setMaxClaims", "setTenant",
  "removeTenant", "setTokens", "drain", "undrain", "expire", "hibernate", "archive", "failVmm", "vanish", "peers",
  "forceRedirect", "attachGuest", "detachGuest", "attachAgent", "wedgeGuest", "setPreview", "previewOf", "restart", "info",
] as const;

const jsonReply = (status: number, v: unknown) =>
  new Response(v === undefined ? null : JSON.stringify(v), { status: v === undefined ? 204 : status, headers: { "content-type": "application/json" } });

export function createAdminHandler(pick: (req: Request) => SandboxdSim | undefined): (req: Request) => Promise<Response> {
  return async (req) => {
    try {
      const sim = pick(req);
      if (!sim) return jsonReply(404, { error: "unknown node" });
      sim.node.tokens.rootOnly(bearerOf(req.headers.get("authorization")));
      const path = new URL(req.url).pathname.replace(/^\/_sim\//, "");
      if (path === "log") {
        if (req.method === "DELETE") return sim.log.clear(), jsonReply(204, undefined);
        return jsonReply(200, { requests: sim.requests });
      }
      if (path === "claims" && req.method === "GET") return jsonReply(200, { claims: sim.claims() });
      const knob = (ADMIN_KNOBS as readonly string[]).includes(path) ? (path as (typeof ADMIN_KNOBS)[number]) : undefined;
      if (!knob || req.method !== "POST") return jsonReply(404, { error: `unknown admin knob ${JSON.stringify(path)}` });
      const text = await req.text();
      const parsed: unknown = text.trim() ? JSON.parse(text) : [];
      const args = Array.isArray(parsed) ? parsed : ((parsed as { args?: unknown[] }).args ?? []);
      // JSON has no Infinity: a count of -1 means "until cleared".
      const fixed = args.map((a) => (a === -1 ? Infinity : a));
      const fn = sim[knob] as (...a: unknown[]) => unknown;
      const result = await fn(...fixed);
      return jsonReply(200, result === undefined ? { ok: true } : result);
    } catch (err) {
      if (err instanceof SimError) return jsonReply(err.status, { error: err.message });
      return jsonReply(400, { error: (err as Error).message });
    }
  };
}

/** The `--admin-listen` listener: odd request targets get sandboxd's `{error}` body, a throw one log line. */
export function serveAdmin(hostname: string, port: number, handler: (req: Request) => Promise<Response>): ReturnType<typeof Bun.serve> {
  return Bun.serve({
    hostname,
    port,
    development: false,
    error: uncaughtErrorHandler(simLog(), simErrorResponse),
    fetch: guardRequests(simErrorResponse, handler),
  });
}
