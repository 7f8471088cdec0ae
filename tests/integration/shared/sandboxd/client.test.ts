// shared/sandboxd/client.ts against the sandboxd simulator (services/sandboxd-sim), a real HTTP server: every
// endpoint the client covers, its typed errors, the reply bounds, and the claim rules (redirects and a lost reply).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import pino from "pino";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import {
  SandboxdAmbiguousClaim,
  SandboxdBadRequest,
  SandboxdCapacity,
  SandboxdConflict,
  SandboxdForbidden,
  SandboxdNotFound,
  SandboxdProtocol,
  SandboxdRouteNotFound,
  SandboxdServerError,
  SandboxdTransport,
  SandboxdUnauthorized,
  isCapacity,
  provablyUndelivered,
} from "#shared/sandboxd/errors.ts";
import { CHECKPOINT_ID_RE, SANDBOX_ID_RE, SANDBOX_TOKEN_RE, parseWireTime } from "#shared/sandboxd/schemas.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";

const ROOT = "root-token-0123";
const TENANT = "tenant-token-acme";
const KEY = "base:24.04/none/small";
const fast = { baseDelayMs: 1, maxDelayMs: 5 };

let sim: SandboxdSim;
let root: SandboxdClient;
let tenant: SandboxdClient;

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, tenants: { acme: { token: TENANT, max_claims: 0 } }, seed: 7 });
  sim.setWarm(KEY, 8);
  root = new SandboxdClient({ baseUrl: sim.url, token: ROOT, retry: fast });
  tenant = new SandboxdClient({ baseUrl: sim.url, token: TENANT, retry: fast });
});
afterAll(async () => {
  await sim.stop();
});
afterEach(async () => {
  sim.clearFaults();
  sim.setMaxClaims(0);
  sim.undrain();
  for (const c of sim.claims()) await root.release(c.id);
  sim.setWarm(KEY, 8);
});

const claimReq = (ref: string) => ({ template: "base:24.04", claim_ref: ref, ttl_seconds: 600 });
const claimPosts = (s: SandboxdSim) => s.log.find("claim").length;

describe("claiming and the lifecycle verbs", () => {
  test("a claim returns the node's reply in the wire format and is listed under its claim_ref", async () => {
    const r = await root.claim({ ...claimReq("ns/a"), metadata: { app: "x" } });
    expect(r.id).toMatch(SANDBOX_ID_RE);
    expect(r.token).toMatch(SANDBOX_TOKEN_RE);
    expect(r.owner_addr).toBe(sim.addr);
    expect(r.adopted).toBeUndefined();
    const rows = await root.list({ claimRef: "ns/a" });
    expect(rows.map((x) => x.id)).toEqual([r.id]);
    expect(rows[0]?.metadata).toEqual({ app: "x" });
    expect(sim.log.find("claim")[0]?.auth).toBe("root");
  });

  test("release destroys the sandbox, and a second release reads 404 as already gone", async () => {
    const r = await root.claim(claimReq("ns/rel"));
    expect(await root.release(r.id)).toBe("released");
    expect(await root.list({ claimRef: "ns/rel" })).toEqual([]);
    expect(await root.release(r.id)).toBe("already-gone");
  });

  test("release with the claim's own token works; a tenant token lands on 'already gone' by the 404 rule", async () => {
    const r = await root.claim(claimReq("ns/own"));
    expect(await tenant.release(r.id)).toBe("already-gone");
    expect(sim.claims().some((c) => c.id === r.id)).toBe(true);
    expect(await tenant.release(r.id, { token: r.token })).toBe("released");
  });

  test("renew moves the deadline to now + the granted TTL (0 means 300 s)", async () => {
    const r = await root.claim(claimReq("ns/renew"));
    const d1 = await root.renew(r.id, 3600);
    const d0 = await root.renew(r.id, 0);
    const now = sim.clock.now();
    expect(parseWireTime(d1.deadline)! - now).toBeGreaterThan(3500_000);
    expect(Math.abs(parseWireTime(d0.deadline)! - now - 300_000)).toBeLessThan(5_000);
  });

  test("hibernate and wake flip the row and are idempotent", async () => {
    const r = await root.claim(claimReq("ns/hib"));
    await root.hibernate(r.id);
    await root.hibernate(r.id);
    expect((await root.get(r.id)).hibernated).toBe(true);
    await root.wake(r.id);
    await root.wake(r.id);
    expect((await root.get(r.id)).hibernated).toBe(false);
  });

  test("fork returns fresh children whose claim_ref is prefix + child id", async () => {
    const r = await root.claim(claimReq("ns/parent"));
    const kids = await root.fork(r.id, { count: 2, claim_ref_prefix: "ns/" });
    expect(kids.length).toBe(2);
    for (const k of kids) {
      expect(k.id).toMatch(SANDBOX_ID_RE);
      expect((await root.get(k.id)).claim_ref).toBe(`ns/${k.id}`);
    }
  });

  test("promote, template labels and template delete (404 on the second delete means done)", async () => {
    const r = await root.claim(claimReq("ns/promo"));
    const p = await root.promote(r.id, { template: "proj:v1" });
    expect(p.key).toEqual({ template: "proj:v1", net: "none", size: "small" });
    expect(p.content_digest).toMatch(/^sha256:/);
    await root.putTemplateLabels({ template: "proj:v1" }, { stable: p.content_digest });
    const t = (await root.info()).templates.find((x) => x.key.template === "proj:v1");
    expect(t?.labels).toEqual({ stable: p.content_digest });
    expect(await root.deleteTemplate({ template: "proj:v1" }, { noRedirect: true })).toBe("deleted");
    expect(await root.deleteTemplate({ template: "proj:v1" }, { noRedirect: true })).toBe("already-gone");
  });

  test("checkpoint create, list, branch claim and delete", async () => {
    const r = await root.claim(claimReq("ns/ck"));
    const ck = await root.checkpoint(r.id, { name: "ns/snap" });
    expect(ck.id).toMatch(CHECKPOINT_ID_RE);
    expect(ck.sandbox_id).toBe(r.id);
    expect((await root.listCheckpoints()).map((c) => c.id)).toContain(ck.id);
    const branch = await root.claimCheckpoint(ck.id, { ttl_seconds: 60 });
    expect(branch.from_checkpoint).toBe(ck.id);
    expect(await root.deleteCheckpoint(ck.id)).toBe("deleted");
    expect(await root.deleteCheckpoint(ck.id)).toBe("already-gone");
  });

  test("instance metadata is accepted by id", async () => {
    const r = await root.claim(claimReq("ns/imd"));
    await root.putInstanceMetadata(r.id, { accessTokenHash: "abc" });
    expect(sim.log.find("instance-metadata")[0]?.body).toEqual({ accessTokenHash: "abc" });
  });
});

describe("reads and node operations", () => {
  test("list filters by claim_ref, metadata and tenant", async () => {
    const a = await root.claim({ ...claimReq("ns/f1"), metadata: { team: "red" } });
    const b = await tenant.claim({ ...claimReq("ns/f2"), metadata: { team: "blue" } });
    expect((await root.list({ metadata: { team: "red" } })).map((x) => x.id)).toEqual([a.id]);
    expect((await root.list({ tenant: "acme" })).map((x) => x.id)).toEqual([b.id]);
    expect((await root.list()).map((x) => x.id).sort()).toEqual([a.id, b.id].sort());
  });

  test("get with the root token reads the claim token back; the tenant token is refused 403", async () => {
    const r = await root.claim(claimReq("ns/get"));
    const d = await root.get(r.id);
    expect(d.token).toBe(r.token);
    expect(d.key).toEqual({ template: "base:24.04", net: "none", size: "small" });
    expect(await tenant.get(r.id).catch((e) => e)).toBeInstanceOf(SandboxdForbidden);
  });

  test("stats and owner", async () => {
    const r = await root.claim(claimReq("ns/stats"));
    const s = await root.stats(r.id);
    expect(s.id).toBe(r.id);
    expect(s.cpu_count).toBe(1);
    expect((await root.owner(r.id, r.token)).owner_addr).toBe(sim.addr);
  });

  test("info, PUT pools, drain and undrain all answer the info payload", async () => {
    const i = await root.info();
    expect(i.advertise_addr).toBe(sim.addr);
    const put = await root.putPools({ pools: [{ template: "base:24.04", warm: 8 }, { template: "other", net: "none", size: "medium", warm: 0 }] });
    expect(put.pools.map((p) => p.key.template).sort()).toEqual(["base:24.04", "other"]);
    expect((await root.drain()).draining).toBe(true);
    expect((await root.undrain()).draining).toBeUndefined();
  });

  test("peers, metrics and healthz", async () => {
    expect(await root.peers()).toEqual([]);
    expect(await root.metrics()).toContain("sandboxd_claimed");
    await root.healthz();
  });

  test("the port relay URL names the node's relay route", () => {
    expect(root.portRelayUrl("sb_0123456789abcdef", 49983)).toBe(`${sim.url}/v1/sandboxes/sb_0123456789abcdef/ports/49983`);
    expect(() => root.portRelayUrl("sb_0123456789abcdef", 0)).toThrow(RangeError);
  });
});

describe("typed errors", () => {
  test("a wrong token is 401; no token at all on a secured node is 401 too", async () => {
    const bad = new SandboxdClient({ baseUrl: sim.url, token: "nope", retry: fast });
    expect(await bad.claim(claimReq("ns/401")).catch((e) => e)).toBeInstanceOf(SandboxdUnauthorized);
    const none = new SandboxdClient({ baseUrl: sim.url, retry: fast });
    expect(await none.info().catch((e) => e)).toBeInstanceOf(SandboxdUnauthorized);
    expect(sim.log.find("info").at(-1)?.auth).toBe("none");
  });

  test("a tenant on an operator surface is 403", async () => {
    const e = (await tenant.info().catch((x) => x)) as SandboxdForbidden;
    expect(e).toBeInstanceOf(SandboxdForbidden);
    expect(e.serverMessage).toBe("operator token required");
  });

  test("an unknown sandbox is a handled 404 with its id in the context", async () => {
    const e = (await root.get("sb_00000000000000ff").catch((x) => x)) as SandboxdNotFound;
    expect(e).toBeInstanceOf(SandboxdNotFound);
    expect(e.context.sandboxId).toBe("sb_00000000000000ff");
    expect(e.serverMessage).toBe("unknown sandbox");
  });

  test("renewing an archived claim is a 409 conflict", async () => {
    const r = await root.claim(claimReq("ns/409"));
    sim.archive(r.id);
    expect(await root.renew(r.id, 60).catch((e) => e)).toBeInstanceOf(SandboxdConflict);
  });

  test("a claim over the node cap is a 429 capacity miss carrying the node's text", async () => {
    await root.claim(claimReq("ns/cap1"));
    sim.setMaxClaims(1);
    const e = (await root.claim(claimReq("ns/cap2")).catch((x) => x)) as SandboxdCapacity;
    expect(e).toBeInstanceOf(SandboxdCapacity);
    expect(e.serverMessage).toBe("node claim quota reached: 1 live claims, cap 1");
    expect(provablyUndelivered(e)).toBe(true);
  });

  test("a bad claim body is a 400", async () => {
    expect(await root.claim({ template: "base:24.04", size: "huge" as never, claim_ref: "ns/400" }).catch((e) => e)).toBeInstanceOf(SandboxdBadRequest);
  });

  test("a 500 on a safe read is retried; a persistent one surfaces with the node's text", async () => {
    sim.fail("info", 500, { error: "flaky" }, 1);
    expect((await root.info()).advertise_addr).toBe(sim.addr);
    sim.fail("info", 500, { error: "still broken" }, 10);
    const e = (await root.info().catch((x) => x)) as SandboxdServerError;
    expect(e).toBeInstanceOf(SandboxdServerError);
    expect(e.serverMessage).toBe("still broken");
  });

  test("the mux's plain-text 404 is a route miss, not a missing sandbox", async () => {
    const wrongBase = new SandboxdClient({ baseUrl: `${sim.url}/not-sandboxd`, token: ROOT, retry: fast });
    const e = (await wrongBase.release("sb_0123456789abcdef").catch((x) => x)) as SandboxdRouteNotFound;
    expect(e).toBeInstanceOf(SandboxdRouteNotFound);
    expect(e.serverMessage).toBe("404 page not found");
  });

  test("a 200 that is not JSON is a protocol error", async () => {
    sim.fail("info", 200, "<html>proxy login</html>", 1);
    const e = (await root.info().catch((x) => x)) as SandboxdProtocol;
    expect(e).toBeInstanceOf(SandboxdProtocol);
    expect(e.problem).toBe("bad_json");
  });
});

describe("a failed list is never an empty list", () => {
  test.each([
    ["500", SandboxdServerError],
    ["truncated", SandboxdProtocol],
    ["oversize", SandboxdProtocol],
  ] as const)("listing mode %s throws", async (mode, cls) => {
    await root.claim(claimReq("ns/listed"));
    sim.listFails(mode);
    const e = await root.list().catch((x) => x);
    expect(e).toBeInstanceOf(cls);
    if (mode === "oversize") expect((e as SandboxdProtocol).problem).toBe("oversize");
  });

  test("a hanging listing times out as a transport error", async () => {
    sim.listFails("hang");
    const e = (await root.list({}, { timeoutMs: 300 }).catch((x) => x)) as SandboxdTransport;
    expect(e).toBeInstanceOf(SandboxdTransport);
    expect(e.timedOut).toBe(true);
  });
});

describe("a lost claim reply", () => {
  test("a claim whose reply was lost is not retried into a second VM", async () => {
    const before = claimPosts(sim);
    sim.reset("claim", "after");
    const r = await root.claim(claimReq("ns/lost"));
    // Exactly one VM on the node, exactly one claim sent, and the client returned that VM, adopted.
    const live = sim.claims();
    expect(live.length).toBe(1);
    expect(claimPosts(sim) - before).toBe(1);
    expect(r.adopted).toBe(true);
    expect(r.id).toBe(live[0]!.id);
    expect(r.token).toBe(live[0]!.token);
    expect(r.owner_addr).toBe(sim.addr);
    // The adopted credential works: the VM can be released with it.
    expect(await tenant.release(r.id, { token: r.token })).toBe("released");
  });

  test("a connection reset before the node committed is ambiguous with no candidate, and nothing is claimed", async () => {
    sim.reset("claim", "before");
    const e = (await root.claim(claimReq("ns/reset-before")).catch((x) => x)) as SandboxdAmbiguousClaim;
    expect(e).toBeInstanceOf(SandboxdAmbiguousClaim);
    expect(e.candidates).toEqual([]);
    expect(e.cause).toBeInstanceOf(SandboxdTransport);
    expect(sim.claims().length).toBe(0);
  });

  test("a lost reply next to a known claim of the same claim_ref adopts only the unknown one", async () => {
    const first = await root.claim(claimReq("ns/twice"));
    sim.reset("claim", "after");
    const r = await root.claim(claimReq("ns/twice"), { knownIds: [first.id] });
    expect(r.adopted).toBe(true);
    expect(r.id).not.toBe(first.id);
    expect(sim.claims().length).toBe(2);
  });

  test("the same situation without knownIds is ambiguous: two unknown rows, none released", async () => {
    await root.claim(claimReq("ns/twice-b"));
    sim.reset("claim", "after");
    const e = (await root.claim(claimReq("ns/twice-b")).catch((x) => x)) as SandboxdAmbiguousClaim;
    expect(e.candidates.length).toBe(2);
    expect(sim.claims().length).toBe(2);
  });

  test("a claim that times out before the node commits is ambiguous and never repeated", async () => {
    sim.latency("claim", 400);
    const e = (await root.claim(claimReq("ns/slow"), { timeoutMs: 100 }).catch((x) => x)) as SandboxdAmbiguousClaim;
    expect(e).toBeInstanceOf(SandboxdAmbiguousClaim);
    expect((e.cause as SandboxdTransport).timedOut).toBe(true);
    await Bun.sleep(600);
    // The node finished the one claim it received; the client sent no second one.
    expect(sim.log.find((x) => x.route === "claim" && x.body !== undefined && (x.body as { claim_ref?: string }).claim_ref === "ns/slow").length).toBe(1);
    expect(sim.claims().filter((c) => c.claimRef === "ns/slow").length).toBe(1);
  });

  test("a refused connection is provably undelivered", async () => {
    const gone = await startSandboxdSim({ rootToken: ROOT });
    const url = gone.url;
    await gone.stop();
    const e = await new SandboxdClient({ baseUrl: url, token: ROOT }).claim(claimReq("ns/refused")).catch((x) => x);
    expect(e).toBeInstanceOf(SandboxdTransport);
    expect(provablyUndelivered(e)).toBe(true);
    expect(isCapacity(e)).toBe(false);
  });
});

describe("logging", () => {
  test("no token ever reaches the log, even on the reconciliation path at debug level", async () => {
    const lines: string[] = [];
    const log = pino({ level: "debug" }, { write: (l: string) => void lines.push(l) });
    const c = new SandboxdClient({ baseUrl: sim.url, token: ROOT, log, retry: fast });
    sim.reset("claim", "after");
    const r = await c.claim(claimReq("ns/logged"));
    await c.get(r.id);
    await c.release(r.id);
    expect(lines.length).toBeGreaterThan(3);
    const all = lines.join("");
    expect(all).toContain("reconciling");
    expect(all).not.toContain(ROOT);
    expect(all).not.toContain(r.token);
  });
});

describe("create-like verbs after a transport error that may have delivered them (issue 7 safety net)", () => {
  // fork, promote and checkpoint create something: a reset after the node committed, or a timeout once the request
  // was sent, must surface as an error after exactly one request. A retry would fork twice, re-promote (replacing
  // the template's labels) or cut a second checkpoint. Safe calls on the same client are retried (the contrast).
  const verbs = {
    fork: (id: string) => root.fork(id, { count: 1 }),
    promote: (id: string) => root.promote(id, { template: "retry-check:v1" }),
    checkpoint: (id: string) => root.checkpoint(id, { name: "ns/retry-check" }),
  } as const;

  test.each(["fork", "promote", "checkpoint"] as const)("%s: a reset after commit is not retried", async (verb) => {
    const source = await root.claim(claimReq(`ns/${verb}-src`));
    const before = sim.log.find(verb).length;
    sim.reset(verb, "after", 3); // enough resets for every attempt a retry could make
    await expect(verbs[verb](source.id)).rejects.toThrow();
    expect(sim.log.find(verb).length - before).toBe(1);
  });

  test.each(["fork", "promote", "checkpoint"] as const)("%s: a timeout once sent is not retried", async (verb) => {
    const source = await root.claim(claimReq(`ns/${verb}-slow`));
    const slow = new SandboxdClient({ baseUrl: sim.url, token: ROOT, timeoutMs: 200, retry: fast });
    const before = sim.log.find(verb).length;
    sim.hang(verb, 3);
    const call = verb === "fork" ? slow.fork(source.id, { count: 1 }) : verb === "promote" ? slow.promote(source.id, { template: "retry-slow:v1" }) : slow.checkpoint(source.id, {});
    await expect(call).rejects.toThrow();
    expect(sim.log.find(verb).length - before).toBe(1);
  });

  test("the contrast: a safe call (release) reset after commit is repeated", async () => {
    const c = await root.claim(claimReq("ns/safe-retry"));
    const before = sim.log.find("release").length;
    sim.reset("release", "after", 1);
    expect(await root.release(c.id)).toBe("already-gone"); // the retry finds it released by the first attempt
    expect(sim.log.find("release").length - before).toBe(2);
  });
});
