// shared/sandboxd/client.ts against scripted Bun.serve stubs: the claim rules where the exact sequence of node
// answers matters (redirect replay, 401 fallback, reconciliation outcomes) and request shapes. The same client
// runs against the real simulator in tests/integration/shared/sandboxd/.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { SandboxdClient, fileSignature, signedFileUrl } from "../../../../shared/sandboxd/client.ts";
import {
  SandboxdAmbiguousClaim,
  SandboxdCapacity,
  SandboxdConflict,
  SandboxdRedirect,
  SandboxdRouteNotFound,
  SandboxdTransport,
  isCapacity,
  provablyUndelivered,
} from "../../../../shared/sandboxd/errors.ts";

interface Seen {
  method: string;
  path: string;
  query: string;
  auth: string | null;
  body: unknown;
}
type Handler = (req: Request, url: URL, body: unknown) => Response | Promise<Response>;

/** A scripted node: each test sets `handle`; every request is recorded. */
class StubNode {
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

const okClaim = (id: string, owner: string) =>
  Response.json({ id, token: "a".repeat(32), deadline: "2026-07-06T00:05:00Z", owner_addr: owner, net_route: "none" });
const row = (id: string, ref: string, extra: Record<string, unknown> = {}) => ({
  id,
  key: { template: "base", net: "none", size: "small" },
  deadline: "2026-07-06T00:05:00Z",
  hibernated: false,
  claim_ref: ref,
  ...extra,
});
const info = (addr: string) => ({ pools: [], templates: [], claimed: 1, advertise_addr: addr });

let a: StubNode, b: StubNode, c: StubNode;
beforeAll(() => {
  a = new StubNode();
  b = new StubNode();
  c = new StubNode();
});
afterAll(() => {
  for (const n of [a, b, c]) n.server.stop(true);
});
beforeEach(() => {
  for (const n of [a, b, c]) {
    n.seen = [];
    n.handle = () => Response.json({ error: "unscripted" }, { status: 500 });
  }
});

const client = (n: StubNode, token = "root") =>
  new SandboxdClient({ baseUrl: SandboxdClient.baseUrlFor(n.addr), token, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
const req = { template: "base", claim_ref: "ns/pod-a", ttl_seconds: 60 };

describe("addressing and auth", () => {
  test("baseUrlFor prefixes http:// only when the address has no scheme", () => {
    expect(SandboxdClient.baseUrlFor("10.0.0.5:7777")).toBe("http://10.0.0.5:7777");
    expect(SandboxdClient.baseUrlFor("https://node-a.example.com/")).toBe("https://node-a.example.com");
  });

  test("an empty token sends no Authorization header; a release can carry the claim's own token", async () => {
    a.handle = () => new Response(null, { status: 204 });
    await client(a, "").hibernate("sb_0123456789abcdef");
    await client(a).release("sb_0123456789abcdef", { token: "claimtok" });
    expect(a.seen.map((s) => s.auth)).toEqual([null, "Bearer claimtok"]);
  });

  test("lifecycle verbs that take a body token send an empty one (operator path)", async () => {
    a.handle = () => Response.json({ children: [] });
    await client(a).fork("sb_0123456789abcdef", { count: 2, claim_ref_prefix: "ns/" });
    expect(a.seen[0]?.body).toEqual({ count: 2, claim_ref_prefix: "ns/", token: "" });
  });

  test("list encodes claim_ref, repeated metadata pairs and tenant", async () => {
    a.handle = () => Response.json({ sandboxes: [] });
    await client(a).list({ claimRef: "ns/x", metadata: { b: "2", a: "1" }, tenant: "acme" });
    expect(a.seen[0]?.query).toBe("?claim_ref=ns%2Fx&metadata=a%3D1&metadata=b%3D2&tenant=acme");
  });
});

describe("safe retries", () => {
  test("an idempotent verb is retried after a 503 and succeeds", async () => {
    let n = 0;
    a.handle = () => (++n === 1 ? Response.json({ error: "tenant db down" }, { status: 503 }) : new Response(null, { status: 204 }));
    await client(a).wake("sb_0123456789abcdef");
    expect(n).toBe(2);
  });

  test("a 409 is not retried", async () => {
    a.handle = () => Response.json({ error: "sandbox is archived" }, { status: 409 });
    expect(await client(a).renew("sb_0123456789abcdef", 60).catch((e) => e)).toBeInstanceOf(SandboxdConflict);
    expect(a.seen.length).toBe(1);
  });

  test("a fork is never repeated after a 502 (it may have created children)", async () => {
    a.handle = () => new Response("bad gateway", { status: 502 });
    await client(a).fork("sb_0123456789abcdef", { count: 1 }).catch(() => {});
    expect(a.seen.length).toBe(1);
  });

  test("a router 404 on release is not 'already gone'", async () => {
    a.handle = () => new Response("404 page not found\n", { status: 404 });
    expect(await client(a).release("sb_0123456789abcdef").catch((e) => e)).toBeInstanceOf(SandboxdRouteNotFound);
  });
});

describe("claim replies that hand out nothing", () => {
  test("a 200 without an id is a capacity miss and is not repeated", async () => {
    a.handle = () => Response.json({});
    const e = await client(a).claim(req).catch((x) => x);
    expect(e).toBeInstanceOf(SandboxdCapacity);
    expect(provablyUndelivered(e)).toBe(true);
    expect(a.claims().length).toBe(1);
  });

  test("429 carries the node's text and Retry-After and is not repeated here", async () => {
    a.handle = () => Response.json({ error: "node claim quota reached: node draining" }, { status: 429, headers: { "retry-after": "3" } });
    const e = (await client(a).claim(req).catch((x) => x)) as SandboxdCapacity;
    expect(e).toBeInstanceOf(SandboxdCapacity);
    expect(e.serverMessage).toBe("node claim quota reached: node draining");
    expect(e.retryAfterMs).toBe(3000);
    expect(a.seen.length).toBe(1);
  });

  test("500 provisioning failed is undelivered and needs no reconciliation", async () => {
    a.handle = () => Response.json({ error: "provisioning failed" }, { status: 500 });
    const e = await client(a).claim(req).catch((x) => x);
    expect(provablyUndelivered(e)).toBe(true);
    expect(a.seen.map((s) => s.path)).toEqual(["/v1/claim"]);
  });
});

describe("redirects", () => {
  test("the identical body is replayed with no_redirect and the carried require_promoted, targets in order", async () => {
    a.handle = () => Response.json({ redirect: [b.addr, c.addr], require_promoted: true });
    b.handle = () => Response.json({ error: "node claim quota reached: 3 live claims, cap 3" }, { status: 429 });
    c.handle = () => okClaim("sb_00000000000000cc", c.addr);
    const r = await client(a).claim({ ...req, metadata: { k: "v" } });
    expect(r.id).toBe("sb_00000000000000cc");
    const sent = { ...req, metadata: { k: "v" }, no_redirect: true, require_promoted: true };
    expect(b.claims()[0]?.body).toEqual(sent);
    expect(c.claims()[0]?.body).toEqual(sent);
    expect(a.claims().length).toBe(1);
  });

  test("unknown targets are skipped and exhausting the targets is a capacity miss", async () => {
    a.handle = () => Response.json({ redirect: ["10.9.9.9:7777", b.addr] });
    b.handle = () => Response.json({});
    const e = (await client(a)
      .claim(req, { resolveTarget: (t) => (t === b.addr ? client(b) : undefined) })
      .catch((x) => x)) as SandboxdRedirect;
    expect(e).toBeInstanceOf(SandboxdRedirect);
    expect(e.exhausted).toBe(true);
    expect(isCapacity(e)).toBe(true);
    expect(e.attempts.map((x) => (x.outcome === "skipped" ? "skipped" : x.outcome.code))).toEqual(["skipped", "capacity"]);
  });

  test("a target that refuses our token sends us back to the origin with no_redirect", async () => {
    let first = true;
    a.handle = () => {
      if (first) {
        first = false;
        return Response.json({ redirect: [b.addr, c.addr] });
      }
      return okClaim("sb_00000000000000aa", a.addr);
    };
    b.handle = () => Response.json({ error: "invalid api token" }, { status: 401 });
    const r = await client(a).claim(req);
    expect(r.id).toBe("sb_00000000000000aa");
    expect(a.claims()[1]?.body).toEqual({ ...req, no_redirect: true });
    expect(c.seen.length).toBe(0);
  });

  test("any other error at a target stops the walk", async () => {
    a.handle = () => Response.json({ redirect: [b.addr, c.addr] });
    b.handle = () => Response.json({ error: "egress not attached" }, { status: 409 });
    expect(await client(a).claim(req).catch((x) => x)).toBeInstanceOf(SandboxdConflict);
    expect(c.seen.length).toBe(0);
  });

  test("redirects are one hop: a target's own redirect counts as undelivered", async () => {
    a.handle = () => Response.json({ redirect: [b.addr] });
    b.handle = () => Response.json({ redirect: [c.addr] });
    const e = (await client(a).claim(req).catch((x) => x)) as SandboxdRedirect;
    expect(e.exhausted).toBe(true);
    expect(c.seen.length).toBe(0);
  });

  test("followRedirects:false hands the targets to the caller", async () => {
    a.handle = () => Response.json({ redirect: [b.addr], require_promoted: true });
    const e = (await client(a).claim(req, { followRedirects: false }).catch((x) => x)) as SandboxdRedirect;
    expect(e.exhausted).toBe(false);
    expect(e.targets).toEqual([b.addr]);
    expect(e.requirePromoted).toBe(true);
    expect(b.seen.length).toBe(0);
  });
});

describe("a possibly-delivered claim is reconciled, never repeated", () => {
  test("exactly one unknown row is adopted with its token read back by id", async () => {
    a.handle = (_r, url) => {
      if (url.pathname === "/v1/claim") return new Response("upstream reset", { status: 502 });
      if (url.pathname === "/v1/sandboxes") return Response.json({ sandboxes: [row("sb_000000000000000a", "ns/pod-a"), row("sb_000000000000000b", "ns/pod-a")] });
      if (url.pathname === "/v1/sandboxes/sb_000000000000000b") return Response.json({ ...row("sb_000000000000000b", "ns/pod-a"), token: "b".repeat(32) });
      if (url.pathname === "/v1/info") return Response.json(info("10.0.0.5:7777"));
      return new Response("404 page not found\n", { status: 404 });
    };
    const r = await client(a).claim(req, { knownIds: ["sb_000000000000000a"] });
    expect(r).toMatchObject({ id: "sb_000000000000000b", token: "b".repeat(32), owner_addr: "10.0.0.5:7777", adopted: true });
    expect(a.claims().length).toBe(1);
    expect(a.seen.find((s) => s.path === "/v1/sandboxes")?.query).toBe("?claim_ref=ns%2Fpod-a");
  });

  test("rows of another key do not count", async () => {
    a.handle = (_r, url) => {
      if (url.pathname === "/v1/claim") return new Response("", { status: 504 });
      return Response.json({ sandboxes: [row("sb_000000000000000c", "ns/pod-a", { key: { template: "other", net: "none", size: "small" } })] });
    };
    const e = (await client(a).claim(req).catch((x) => x)) as SandboxdAmbiguousClaim;
    expect(e).toBeInstanceOf(SandboxdAmbiguousClaim);
    expect(e.candidates).toEqual([]);
  });

  test("two unknown rows are ambiguous and nothing is released", async () => {
    a.handle = (_r, url) => {
      if (url.pathname === "/v1/claim") return new Response("{", { status: 200 });
      return Response.json({ sandboxes: [row("sb_000000000000000a", "ns/pod-a"), row("sb_000000000000000b", "ns/pod-a")] });
    };
    const e = (await client(a).claim(req).catch((x) => x)) as SandboxdAmbiguousClaim;
    expect(e.candidates.sort()).toEqual(["sb_000000000000000a", "sb_000000000000000b"]);
    expect(a.seen.some((s) => s.path.endsWith("/release"))).toBe(false);
    expect(provablyUndelivered(e)).toBe(false);
  });

  test("a claim without claim_ref cannot be reconciled and says so", async () => {
    a.handle = () => new Response("", { status: 502 });
    const e = (await client(a).claim({ template: "base" }).catch((x) => x)) as SandboxdAmbiguousClaim;
    expect(e).toBeInstanceOf(SandboxdAmbiguousClaim);
    expect(e.message).toContain("no claim_ref");
    expect(a.seen.length).toBe(1);
  });

  test("a failed reconciliation listing is ambiguous, never read as 'nothing there'", async () => {
    a.handle = (_r, url) => (url.pathname === "/v1/claim" ? new Response("", { status: 502 }) : Response.json({ error: "boom" }, { status: 500 }));
    const e = (await client(a).claim(req).catch((x) => x)) as SandboxdAmbiguousClaim;
    expect(e).toBeInstanceOf(SandboxdAmbiguousClaim);
    expect(e.message).toContain("could not be listed");
    expect(a.claims().length).toBe(1);
  });

  test("without the root token the adopted row's token is unreadable: ambiguous, with the candidate named", async () => {
    a.handle = (_r, url) => {
      if (url.pathname === "/v1/claim") return new Response("", { status: 502 });
      if (url.pathname === "/v1/sandboxes") return Response.json({ sandboxes: [row("sb_000000000000000d", "ns/pod-a")] });
      return Response.json({ error: "operator token required" }, { status: 403 });
    };
    const e = (await client(a, "tenant-tok").claim(req).catch((x) => x)) as SandboxdAmbiguousClaim;
    expect(e.candidates).toEqual(["sb_000000000000000d"]);
  });

  test("a refused connection is undelivered and no listing is attempted", async () => {
    const gone = Bun.serve({ port: 0, fetch: () => new Response("") });
    const port = gone.port;
    gone.stop(true);
    const e = await new SandboxdClient({ baseUrl: `http://127.0.0.1:${port}`, token: "root" }).claim(req).catch((x) => x);
    expect(e).toBeInstanceOf(SandboxdTransport);
    expect(provablyUndelivered(e)).toBe(true);
  });
});

describe("data-plane URLs", () => {
  test("a signed file URL carries the SDK's v1 signature without padding, and the expiry when given", () => {
    const o = { path: "/home/user/a.txt", operation: "read" as const, user: "user", accessToken: "t0k", expiresAtSeconds: 1_800_000_000 };
    const digest = createHash("sha256").update("/home/user/a.txt:read:user:t0k:1800000000").digest("base64");
    expect(fileSignature(o)).toBe(`v1_${digest.replace(/=+$/, "")}`);
    expect(fileSignature(o)).not.toContain("=");
    const u = new URL(signedFileUrl("https://49983-sb-0123456789abcdef.example.com/", o));
    expect(u.pathname).toBe("/files");
    expect(u.searchParams.get("path")).toBe("/home/user/a.txt");
    expect(u.searchParams.get("username")).toBe("user");
    expect(u.searchParams.get("signature")).toBe(fileSignature(o));
    expect(u.searchParams.get("signature_expiration")).toBe("1800000000");
    expect(new URL(signedFileUrl("https://e", { ...o, expiresAtSeconds: undefined })).searchParams.has("signature_expiration")).toBe(false);
  });

  test("relay URLs are built on the node's base URL and reject a bad port", () => {
    const c = new SandboxdClient({ baseUrl: "http://10.0.0.5:7777/" });
    expect(c.portRelayUrl("sb_0123456789abcdef", 8080)).toBe("http://10.0.0.5:7777/v1/sandboxes/sb_0123456789abcdef/ports/8080");
    expect(c.agentUrl("sb_0123456789abcdef")).toBe("http://10.0.0.5:7777/v1/sandboxes/sb_0123456789abcdef/agent");
    expect(() => c.portRelayUrl("sb_0123456789abcdef", 70000)).toThrow(RangeError);
  });
});
