// The state knobs of sandboxd.md §7: reaper on the fake clock, out-of-band node actions, pool shaping, capacity and
// credentials, restart, forced redirects, and the same knobs over the /_sim admin endpoint.
import { describe, expect, test } from "bun:test";
import type { SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { GO_ZERO_TIME } from "#shared/sandboxd/schemas.ts";
import { KEY, call, claim, simsPerTest } from "./helpers.ts";

const sim = simsPerTest();
const listed = async (s: SandboxdSim) => ((await call(s, "GET", "/v1/sandboxes")).json.sandboxes as any[]).map((r) => r.id);

describe("sandboxd-sim state knobs", () => {
  test("the reaper runs on the fake clock: expire(id) takes effect at the next 5 s tick, reapNow at once", async () => {
    const s = await sim();
    const a = (await claim(s)).json;
    const b = (await claim(s)).json;
    s.expire(a.id);
    expect(await listed(s)).toContain(a.id); // expired, not yet reaped
    s.advance(5_000);
    expect(await listed(s)).toEqual([b.id]);
    s.expire(b.id);
    s.advance(1);
    expect(s.reapNow().reaped).toEqual([b.id]);
    expect((await call(s, "GET", "/metrics")).text).toContain("sandboxd_reaps_total 2");
  });

  test("out-of-band hibernate, archive, failVmm and vanish show in the index; wake cold-boots a failed VMM", async () => {
    const s = await sim({ archivedDeadline: "zero" });
    const [a, b, c, d] = [(await claim(s)).json, (await claim(s)).json, (await claim(s)).json, (await claim(s)).json];
    s.hibernate(a.id);
    s.archive(b.id);
    s.failVmm(c.id, "kvm exited");
    s.vanish(d.id);
    const rows = Object.fromEntries(((await call(s, "GET", "/v1/sandboxes")).json.sandboxes as any[]).map((r) => [r.id, r]));
    expect(rows[a.id].hibernated).toBe(true);
    expect([rows[b.id].archived, rows[b.id].deadline]).toEqual([true, GO_ZERO_TIME]);
    expect(rows[c.id].failed).toBe("kvm exited");
    expect(rows[d.id]).toBeUndefined();
    expect((await call(s, "POST", `/v1/sandboxes/${c.id}/wake`)).status).toBe(204);
    const woke = (await call(s, "GET", `/v1/sandboxes/${c.id}`)).json;
    expect([woke.failed, woke.restarts, typeof woke.restarted_at]).toEqual([undefined, 1, "string"]);
  });

  test("pool shaping: setWarm, setGolden, provisionFails (500 provisioning failed, golden retried after 30 s), atCapacity parks refill", async () => {
    const s = await sim({ pools: [`${KEY}=0`] });
    s.provisionFails(KEY);
    expect(await claim(s)).toMatchObject({ status: 500, json: { error: "provisioning failed" } });
    expect(s.claims()).toHaveLength(0);
    s.setWarm(KEY, 1);
    expect((await claim(s)).status).toBe(200); // a warm VM needs no provisioning
    s.provisionFails(KEY, false);

    s.provisionFails("gold:1");
    await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "gold:1", warm: 1 }] } }); // golden build fails
    s.provisionFails("gold:1", false);
    s.advance(28_000);
    expect((await call(s, "GET", "/v1/info")).json.pools[0]).toMatchObject({ golden: false, warm: 0 });
    s.advance(2_000); // 30 s after the failure the next refill tick retries
    expect((await call(s, "GET", "/v1/info")).json.pools[0]).toMatchObject({ golden: true, warm: 1 });

    s.atCapacity("exchange full");
    await claim(s, { template: "gold:1" });
    s.advance(10_000);
    const info = (await call(s, "GET", "/v1/info")).json;
    expect([info.at_capacity, info.at_capacity_reason, info.pools[0].warm]).toEqual([true, "exchange full", 0]);
    s.atCapacity(null);
    expect((await call(s, "GET", "/v1/info")).json.pools[0].warm).toBe(1);
    s.setGolden("gold:1", false);
    expect((await call(s, "GET", "/v1/info")).json.pools[0].golden).toBe(false);
  });

  test("credentials: setTokens rotates the root token and opens the node; a removed tenant gets 401 and its claims cannot extend", async () => {
    const s = await sim();
    s.setTenant("acme", "acme-tok", 0);
    const t = (await claim(s, {}, "acme-tok")).json;
    s.removeTenant("acme");
    expect((await claim(s, {}, "acme-tok")).status).toBe(401);
    expect(await call(s, "POST", `/v1/sandboxes/${t.id}/renew`, { token: t.token })).toMatchObject({ status: 403 });
    expect((await call(s, "POST", `/v1/sandboxes/${t.id}/renew`)).status).toBe(200); // root still renews
    s.setTokens("new-root");
    expect((await call(s, "GET", "/v1/info")).status).toBe(401);
    expect((await call(s, "GET", "/v1/info", { token: "new-root" })).status).toBe(200);
    s.setTokens(null);
    expect((await call(s, "GET", "/v1/info", { token: null })).status).toBe(200);
  });

  test("restart keeps claims and the pool set, clears drain, rebuilds warm VMs and serves again on the same port", async () => {
    const s = await sim({ provisionLatencyMs: 500 });
    await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 2 }] } });
    s.advance(1_000);
    const c = (await claim(s)).json;
    await call(s, "POST", "/v1/drain");
    await s.restart();
    const info = (await call(s, "GET", "/v1/info")).json;
    expect([info.draining, info.claimed, info.pools[0].target, info.pools[0].warm]).toEqual([undefined, 1, 2, 0]);
    expect(await listed(s)).toEqual([c.id]);
    s.advance(500);
    expect((await call(s, "GET", "/v1/info")).json.pools[0].warm).toBe(2);
  });

  test("forceRedirect answers claims with the given targets unless no_redirect is set", async () => {
    const s = await sim();
    s.forceRedirect(["10.0.0.6:7777", "10.0.0.7:7777"], true);
    expect((await claim(s)).json).toEqual({ redirect: ["10.0.0.6:7777", "10.0.0.7:7777"], require_promoted: true });
    expect((await claim(s, { no_redirect: true })).json.id).toBeDefined();
    s.forceRedirect(null);
    expect((await claim(s)).json.id).toBeDefined();
  });

  test("the legacy index switch makes GET /v1/sandboxes root-only with the short row", async () => {
    const s = await sim({ legacyIndex: true, tenants: { acme: { token: "acme-tok", max_claims: 0 } } });
    await claim(s, { claim_ref: "ns/a" });
    expect((await call(s, "GET", "/v1/sandboxes", { token: "acme-tok" })).status).toBe(403);
    const row = (await call(s, "GET", "/v1/sandboxes")).json.sandboxes[0];
    expect(Object.keys(row).sort()).toEqual(["deadline", "hibernated", "id", "key"]);
  });

  test("the admin endpoint exposes the knobs over HTTP behind the root token", async () => {
    const s = await sim();
    expect((await call(s, "POST", "/_sim/setWarm", { token: null, body: { args: [KEY, 3] } })).status).toBe(401);
    expect((await call(s, "POST", "/_sim/setWarm", { body: { args: [KEY, 3] } })).status).toBe(200);
    expect((await call(s, "GET", "/v1/info")).json.pools[0].warm).toBe(3);
    await call(s, "POST", "/_sim/fail", { body: ["claim", 429, { error: "node claim quota reached: node draining" }, 1] });
    expect((await claim(s)).status).toBe(429);
    await call(s, "POST", "/_sim/advance", { body: [1000] });
    const log = (await call(s, "GET", "/_sim/log")).json.requests;
    expect(log.map((e: any) => e.route)).toEqual(["info", "claim"]); // admin calls are not logged
    expect((await call(s, "POST", "/_sim/nope", { body: [] })).status).toBe(404);
  });
});
