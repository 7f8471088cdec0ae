// sandboxd.md §7 "Simulator requirements", items 6–13: one named test per item (items 1–5 are in
// checklist-1-5.test.ts). Time-dependent items run on the fake clock.
import { afterEach, describe, expect, test } from "bun:test";
import { startSimCluster, type SandboxdSim, type SimCluster } from "#services/sandboxd-sim/sim.ts";
import { deriveAccessToken, fileSignature } from "#services/sandboxd-sim/guest.ts";
import { toWireTime } from "#shared/sandboxd/schemas.ts";
import { KEY, ROOT, call, claim, rawRequest, simsPerTest, upgradeHead, until } from "./helpers.ts";

const sim = simsPerTest();
let clusters: SimCluster[] = [];
afterEach(async () => {
  await Promise.all(clusters.map((c) => c.stop()));
  clusters = [];
});
const ids = async (s: SandboxdSim, q = "", token: string | null = ROOT) =>
  ((await call(s, "GET", `/v1/sandboxes${q}`, { token })).json.sandboxes as { id: string }[]).map((r) => r.id);
const pool = async (s: SandboxdSim) => (await call(s, "GET", "/v1/info")).json.pools[0];

describe("sandboxd.md §7 simulator requirements (6–13)", () => {
  test("6. keeps a claim table with TTL default and clamp, strict now > deadline expiry on the 5 s reap tick, archive on expire and instant release", async () => {
    const s = await sim();
    const t0 = s.clock.now();
    expect((await claim(s)).json.deadline).toBe(toWireTime(t0 + 300_000));
    expect((await claim(s, { ttl_seconds: -5 })).json.deadline).toBe(toWireTime(t0 + 300_000));
    expect((await claim(s, { ttl_seconds: 100_000 })).json.deadline).toBe(toWireTime(t0 + 86_400_000));
    const short = (await claim(s, { ttl_seconds: 10 })).json;
    const arch = (await claim(s, { ttl_seconds: 10, on_expire: "archive" })).json;

    s.advance(10_000); // reap ticks at +5 s and +10 s; at +10 s now == deadline: not expired
    expect(await ids(s)).toContain(short.id);
    s.advance(1); // past the deadline, but no tick yet: still live, still answers verbs
    expect(await ids(s)).toContain(short.id);
    expect((await call(s, "POST", `/v1/sandboxes/${short.id}/hibernate`)).status).toBe(204);
    s.advance(4_999); // the +15 s tick
    expect(await ids(s)).not.toContain(short.id);
    const row = (await call(s, "GET", `/v1/sandboxes/${arch.id}`)).json;
    expect([row.archived, row.deadline, row.hibernated]).toEqual([true, undefined, false]);
    expect((await call(s, "POST", `/v1/sandboxes/${arch.id}/renew`)).status).toBe(409);
    expect((await call(s, "POST", `/v1/sandboxes/${arch.id}/wake`)).status).toBe(204);
    expect((await call(s, "GET", `/v1/sandboxes/${arch.id}`)).json.deadline).toBe(toWireTime(s.clock.now() + 10_000));

    const gone = (await claim(s)).json;
    expect((await call(s, "POST", `/v1/sandboxes/${gone.id}/release`)).status).toBe(204);
    expect(await ids(s)).not.toContain(gone.id);
    expect((await call(s, "GET", `/v1/sandboxes/${gone.id}`)).status).toBe(404);
  });

  test("7. models pools: golden, refilling, 2 s refill with provision latency, LIFO pop, trim on a lowered target, drain, whole-set replacement", async () => {
    const s = await sim({ provisionLatencyMs: 1_000 });
    const put = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 3 }] } });
    expect(put.json.pools[0]).toEqual({ key: { template: "base:24.04", net: "none", size: "small" }, warm: 0, refilling: 0, target: 3, golden: false });
    s.advance(1_000); // golden built first, then three provisions start
    expect(await pool(s)).toMatchObject({ golden: true, refilling: 3, warm: 0 });
    s.advance(1_000);
    expect(await pool(s)).toMatchObject({ refilling: 0, warm: 3 });

    const stack = s.node.pools.get({ template: "base:24.04", net: "none", size: "small" })!.warm.map((v) => v.id);
    expect((await claim(s)).json.id).toBe(stack[2]!); // newest first
    expect(await pool(s)).toMatchObject({ warm: 2, refilling: 1 }); // every claim kicks the refill loop
    s.advance(1_000); // now +3 s
    expect((await pool(s)).warm).toBe(3);

    s.setWarm(KEY, 1); // two warm VMs lost out of band; the 2 s loop (next tick at +4 s) restores them
    s.advance(999);
    expect(await pool(s)).toMatchObject({ warm: 1, refilling: 0 });
    s.advance(1);
    expect(await pool(s)).toMatchObject({ warm: 1, refilling: 2 });
    s.advance(1_000);
    expect((await pool(s)).warm).toBe(3);

    const lowered = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 1 }] } });
    expect(lowered.json.pools[0]).toMatchObject({ warm: 1, target: 1 });

    const dup = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "a" }, { template: "a", net: "none", size: "small", warm: 1 }] } });
    expect([dup.status, dup.json.error]).toEqual([400, 'invalid pool key: duplicate pool "a"']);

    await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 2 }] } });
    s.advance(1_000);
    const drained = (await call(s, "POST", "/v1/drain")).json;
    expect([drained.draining, drained.pools[0].warm, drained.pools[0].target]).toEqual([true, 0, 2]);
    expect(await claim(s)).toMatchObject({ status: 429, json: { error: "node claim quota reached: node draining" } });
    s.advance(4_000);
    expect((await pool(s)).refilling).toBe(0); // refill is off while draining
    expect((await call(s, "DELETE", "/v1/drain")).json.pools[0].refilling).toBe(2); // uncordon refills at once

    const replaced = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "other:1" }] } });
    expect(replaced.json.pools).toEqual([{ key: { template: "other:1", net: "none", size: "small" }, warm: 0, refilling: 0, target: 0, golden: false }]);
    expect((await call(s, "PUT", "/v1/pools", { body: { pools: [] } })).json.pools).toEqual([]);
  });

  test("8. enforces node and tenant max_claims with the real 429 texts; a fork batch is all-or-nothing", async () => {
    const s = await sim({ maxClaims: 4, tenants: { acme: { token: "acme-tok", max_claims: 2 } } });
    const root = (await claim(s)).json;
    const a = (await claim(s, {}, "acme-tok")).json;
    await claim(s, {}, "acme-tok");
    expect(await claim(s, {}, "acme-tok")).toMatchObject({ status: 429, json: { error: "node claim quota reached: tenant acme at 2 live claims, cap 2" } });
    expect((await claim(s)).status).toBe(200);
    expect(await claim(s)).toMatchObject({ status: 429, json: { error: "node claim quota reached: 4 live claims, cap 4" } });

    s.setMaxClaims(6);
    const tooMany = await call(s, "POST", `/v1/sandboxes/${root.id}/fork`, { body: { count: 3 } });
    expect([tooMany.status, tooMany.json.error]).toEqual([429, "node claim quota reached: 4 live claims, cap 6"]);
    expect(await ids(s)).toHaveLength(4); // nothing of the batch was created
    expect((await call(s, "POST", `/v1/sandboxes/${root.id}/fork`, { body: { count: 2 } })).json.children).toHaveLength(2);

    s.setMaxClaims(0);
    const tenantFork = await call(s, "POST", `/v1/sandboxes/${a.id}/fork`, { body: { count: 1 } }); // root calls, acme pays
    expect(tenantFork.json.error).toBe("node claim quota reached: tenant acme at 2 live claims, cap 2");
    expect((await call(s, "POST", `/v1/sandboxes/${root.id}/fork`, { body: { count: 17 } })).status).toBe(400);
    s.setMaxClaims(1); // lowering a cap evicts nothing
    expect(await ids(s)).toHaveLength(6);
  });

  test("9. builds /v1/info and the PUT reply from live state, consistent with the index", async () => {
    const s = await sim({ pools: [`${KEY}=2`] });
    const [a, b, c] = [(await claim(s)).json, (await claim(s)).json, (await claim(s)).json];
    await claim(s);
    await call(s, "POST", `/v1/sandboxes/${a.id}/hibernate`);
    s.archive(b.id);
    s.failVmm(c.id, "vmm crashed");
    const info = (await call(s, "GET", "/v1/info")).json;
    const rows = (await call(s, "GET", "/v1/sandboxes")).json.sandboxes;
    expect(info).toMatchObject({ claimed: rows.length, hibernated: 1, archived: 1, failed: 1, advertise_addr: s.addr });
    expect(rows.filter((r: any) => r.hibernated)).toHaveLength(1);
    expect(rows.filter((r: any) => r.archived)).toHaveLength(1);
    expect(rows.find((r: any) => r.id === c.id).failed).toBe("vmm crashed");
    const put = (await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 2 }] } })).json;
    expect([put.claimed, put.hibernated, put.archived]).toEqual([4, 1, 1]);
    await call(s, "POST", `/v1/sandboxes/${a.id}/release`);
    const after = (await call(s, "GET", "/v1/info")).json;
    expect([after.claimed, after.hibernated, after.draining, after.at_capacity]).toEqual([3, undefined, undefined, undefined]);
  });

  test("10. never deduplicates on claim_ref and filters the index by claim_ref, metadata and tenant", async () => {
    const s = await sim({ tenants: { acme: { token: "acme-tok", max_claims: 0 }, beta: { token: "beta-tok", max_claims: 0 } } });
    const one = (await claim(s, { claim_ref: "ns/a", metadata: { app: "x", tier: "web" } })).json;
    const two = (await claim(s, { claim_ref: "ns/a", metadata: { app: "x" } })).json;
    expect(one.id).not.toBe(two.id);
    const acme = (await claim(s, { claim_ref: "ns/b" }, "acme-tok")).json;
    const beta = (await claim(s, {}, "beta-tok")).json;
    expect((await ids(s, "?claim_ref=ns/a")).sort()).toEqual([one.id, two.id].sort());
    expect(await ids(s, "?claim_ref=")).toHaveLength(4);
    expect(await ids(s, "?metadata=app=x&metadata=tier=web")).toEqual([one.id]);
    for (const bad of ["?metadata=novalue", "?metadata==v", "?metadata=a=1&metadata=a=2"]) {
      expect((await call(s, "GET", `/v1/sandboxes${bad}`)).status).toBe(400);
    }
    expect(await ids(s, "?tenant=acme")).toEqual([acme.id]);
    expect(await ids(s, "?tenant=beta", "acme-tok")).toEqual([acme.id]); // ignored for tenant callers
    expect(await ids(s, "", "beta-tok")).toEqual([beta.id]);
  });

  test("11. relays ports: Upgrade -> 101 -> byte splice to a per-sandbox fake envd guest, with the passive root rule", async () => {
    const s = await sim({ seed: "relay" });
    const c = (await claim(s)).json;
    const guest = await s.attachFakeGuest(c.id, { envdSecret: "envd-secret" });
    const access = deriveAccessToken("envd-secret", c.token);
    const path = `/v1/sandboxes/${c.id}/ports/49983`;

    const conn = await rawRequest(s.url, upgradeHead(path, c.token));
    expect(conn.data()).toStartWith("HTTP/1.1 101 Switching Protocols\r\n");
    const put = "hello guest";
    conn.sock.write(`POST /files?path=/a HTTP/1.1\r\nHost: envd\r\nX-Access-Token: ${access}\r\nContent-Length: ${put.length}\r\n\r\n${put}`);
    await until(() => conn.data().split("HTTP/1.1 200").length > 1, "the first 200");
    conn.sock.write("GET /health HTTP/1.1\r\nHost: envd\r\n\r\n");
    await until(() => conn.data().includes("HTTP/1.1 204"), "a 204");
    conn.sock.write("GET /metrics HTTP/1.1\r\nHost: envd\r\nConnection: close\r\n\r\n"); // no token: envd refuses
    await until(() => conn.data().includes("HTTP/1.1 401"), "a 401");
    conn.sock.destroy();
    expect(guest.requests.map((r) => r.url)).toEqual(["/files?path=/a", "/health", "/metrics"]);

    // A signed /files URL through the passive (root) relay: envd checks the signature, not a header.
    const sig = fileSignature("/a", "read", "user", access);
    const signed = await rawRequest(s.url, upgradeHead(path, ROOT));
    signed.sock.write(`GET /files?path=/a&username=user&signature=${encodeURIComponent(sig)} HTTP/1.1\r\nHost: envd\r\n\r\n`);
    await until(() => signed.data().includes(put), "the signed PUT");
    signed.sock.destroy();

    await call(s, "POST", `/v1/sandboxes/${c.id}/hibernate`);
    const passive = await rawRequest(s.url, upgradeHead(path, ROOT), (d) => d.includes("}"));
    expect(passive.data()).toStartWith("HTTP/1.1 409");
    expect(passive.data()).toContain('{"error":"sandbox is paused"}');
    expect(s.node.table.get(c.id)!.state).toBe("hibernated"); // root never wakes
    const active = await rawRequest(s.url, upgradeHead(path, c.token));
    expect(active.data()).toStartWith("HTTP/1.1 101");
    active.sock.destroy();
    expect(s.node.table.get(c.id)!.state).toBe("running"); // the sandbox token wakes transparently
  });

  test("12. runs several nodes as a mesh that emits claim, template and checkpoint redirects honouring no_redirect and require_promoted", async () => {
    const cl = await startSimCluster(3, { rootToken: ROOT, clock: "fake", seed: 12 });
    clusters.push(cl);
    const [n0, n1, n2] = cl.nodes as [SandboxdSim, SandboxdSim, SandboxdSim];
    n1.setWarm(KEY, 2);
    expect((await claim(n0)).json).toEqual({ redirect: [n1.addr] });
    const local = await claim(n0, { no_redirect: true });
    expect(local.json.owner_addr).toBe(n0.addr);

    const src = (await claim(n2, { no_redirect: true })).json;
    const promoted = (await call(n2, "POST", `/v1/sandboxes/${src.id}/promote`, { body: { template: "proj:v1" } })).json;
    expect((await claim(n0, { template: "proj:v1" })).json).toEqual({ redirect: [n2.addr], require_promoted: true });
    const retry = await claim(n2, { template: "proj:v1", no_redirect: true, require_promoted: true });
    expect(retry.json.template_digest).toBe(promoted.content_digest);
    expect(await claim(n0, { template: "proj:v1", no_redirect: true, require_promoted: true })).toMatchObject({ status: 404, json: { error: "unknown template" } });
    expect((await call(n0, "DELETE", "/v1/templates?template=proj:v1")).json).toEqual({ redirect: [n2.addr] });
    expect((await call(n0, "DELETE", "/v1/templates?template=proj:v1&no_redirect=1")).status).toBe(404);

    const ck = (await call(n2, "POST", `/v1/sandboxes/${src.id}/checkpoint`, { body: {} })).json.checkpoint;
    expect((await call(n0, "POST", `/v1/checkpoints/${ck.id}/claim`, { body: {} })).json).toEqual({ redirect: [n2.addr] });
    expect((await call(n0, "POST", `/v1/checkpoints/${ck.id}/claim`, { body: { no_redirect: true } })).status).toBe(404);

    n0.setWarm(KEY, 1);
    n0.drain(); // a draining node sends claims to a warm peer first, then refuses
    expect((await claim(n0)).json).toEqual({ redirect: [n1.addr] });
    expect((await claim(n0, { no_redirect: true })).status).toBe(429);

    const single = await sim();
    expect((await claim(single)).json.id).toBeDefined(); // a single node never redirects
  });

  test("13. logs every request with method, path, query, auth kind and body", async () => {
    const s = await sim({ tenants: { acme: { token: "acme-tok", max_claims: 0 } } });
    const c = (await claim(s, { claim_ref: "ns/a" }, "acme-tok")).json;
    await call(s, "GET", "/v1/sandboxes?claim_ref=ns/a&metadata=a=1");
    await call(s, "POST", `/v1/sandboxes/${c.id}/renew`, { token: c.token, body: { ttl_seconds: 30 } });
    await call(s, "GET", "/v1/info", { token: "bogus" });
    await call(s, "GET", "/healthz", { token: null });
    const log = s.requests.map(({ method, path, query, auth, tenant, body, route, outcome }) => ({ method, path, query, auth, tenant, body, route, outcome }));
    expect(log).toEqual([
      { method: "POST", path: "/v1/claim", query: {}, auth: "tenant", tenant: "acme", body: { template: "base:24.04", claim_ref: "ns/a" }, route: "claim", outcome: 200 },
      { method: "GET", path: "/v1/sandboxes", query: { claim_ref: ["ns/a"], metadata: ["a=1"] }, auth: "root", tenant: undefined, body: undefined, route: "list", outcome: 200 },
      { method: "POST", path: `/v1/sandboxes/${c.id}/renew`, query: {}, auth: "sandbox", tenant: undefined, body: { ttl_seconds: 30 }, route: "renew", outcome: 200 },
      { method: "GET", path: "/v1/info", query: {}, auth: "unknown", tenant: undefined, body: undefined, route: "info", outcome: 401 },
      { method: "GET", path: "/healthz", query: {}, auth: "none", tenant: undefined, body: undefined, route: "healthz", outcome: 200 },
    ]);
  });
});
