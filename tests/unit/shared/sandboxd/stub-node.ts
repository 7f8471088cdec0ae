// Scripted Bun.serve stand-ins for a sandboxd node, shared by the client's unit tests: each test sets `handle`;
// every request is recorded. The same client runs against the real simulator in tests/integration/shared/sandboxd/.
import { afterAll, beforeAll, beforeEach } from "bun:test";
import { SandboxdClient } from "#shared/sandboxd/client.ts";

export interface Seen {
  method: string;
  path: string;
  query: string;
  auth: string | null;
  body: unknown;
}
export type Handler = (req: Request, url: URL, body: unknown) => Response | Promise<Response>;

/** A scripted node: each test sets `handle`; every request is recorded. */
export class StubNode {
  seen: Seen[] = [];
  handle: Handler = () => Response.json({ error: "unscripted" }, { status: 500 });
  server = Bun.serve({
    port: 0,
    fetch: async (req) => {
      const url = new URL(req.url);
      const text = await req.text();
      const body = text ? JSON.parse(text) : undefined;
      this.seen.push({ method: req.method, path: url.pathname, query: url.search, auth: req.headers.get("authorization"), body });
      return this.handle(req, url, body);
    },
  });
  get addr() {
    return `127.0.0.1:${this.server.port}`;
  }
  claims() {
    return this.seen.filter((s) => s.path === "/v1/claim");
  }
}

export const okClaim = (id: string, owner: string) =>
  Response.json({ id, token: "a".repeat(32), deadline: "2026-07-06T00:05:00Z", owner_addr: owner, net_route: "none" });
export const row = (id: string, ref: string, extra: Record<string, unknown> = {}) => ({
  id,
  key: { template: "base", net: "none", size: "small" },
  deadline: "2026-07-06T00:05:00Z",
  hibernated: false,
  claim_ref: ref,
  ...extra,
});
export const info = (addr: string) => ({ pools: [], templates: [], claimed: 1, advertise_addr: addr });

/**
 * Three scripted nodes for the calling test file: started before its tests, stopped after, and reset (log cleared,
 * unscripted) before each test. The returned object's `a`, `b`, `c` are set once the file's first hook has run.
 */
export function stubNodes(): { a: StubNode; b: StubNode; c: StubNode } {
  const nodes = {} as { a: StubNode; b: StubNode; c: StubNode };
  beforeAll(() => {
    nodes.a = new StubNode();
    nodes.b = new StubNode();
    nodes.c = new StubNode();
  });
  afterAll(() => {
    for (const n of Object.values(nodes)) n.server.stop(true);
  });
  beforeEach(() => {
    for (const n of Object.values(nodes)) {
      n.seen = [];
      n.handle = () => Response.json({ error: "unscripted" }, { status: 500 });
    }
  });
  return nodes;
}

export const client = (n: StubNode, token = "root") =>
  new SandboxdClient({ baseUrl: SandboxdClient.baseUrlFor(n.addr), token, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
export const req = { template: "base", claim_ref: "ns/pod-a", ttl_seconds: 60 };
