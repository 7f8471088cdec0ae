// shared/sandboxd/claim.ts against scripted stub nodes: the claim rules where the exact sequence of node answers
// matters (nothing handed out, redirect replay, 401 fallback, reconciliation outcomes).
import { beforeAll, describe, expect, test } from "bun:test";
import {
  SandboxdAmbiguousClaim,
  SandboxdCapacity,
  SandboxdConflict,
  SandboxdRedirect,
  SandboxdTransport,
  isCapacity,
  provablyUndelivered,
} from "#shared/sandboxd/errors.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { type StubNode, client, info, okClaim, req, row, stubNodes } from "./stub-node.ts";

const stubs = stubNodes();
let a!: StubNode, b!: StubNode, c!: StubNode;
beforeAll(() => void ({ a, b, c } = stubs));

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
