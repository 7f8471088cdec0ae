// Behaviours added after auditing the simulator against sandboxd.md §2.1, §5.4–5.5, §6 and §7 (one test per gap
// found): creations stamped with the calling tenant, the egress-pool idle rule, the archiving-pool reaper rule,
// and the per-tenant and mesh gauges of /metrics.
import { describe, expect, test } from "bun:test";
import { startSimCluster } from "#services/sandboxd-sim/sim.ts";
import { KEY, ROOT, call, claim, simsPerTest } from "./helpers.ts";

const ACME = "tenant-token-acme";
const BETA = "tenant-token-beta";
const tenants = { acme: { token: ACME, max_claims: 0 }, beta: { token: BETA, max_claims: 0 } };
const sim = simsPerTest({ tenants, pools: [`${KEY}=4`] });

describe("sandboxd-sim audit fixes", () => {
  test("a checkpoint records the calling tenant and none for root, whoever owns the source", async () => {
    const s = await sim();
    const c = (await claim(s, {}, ACME)).json;
    const byRoot = await call(s, "POST", `/v1/sandboxes/${c.id}/checkpoint`, { body: { name: "by-root" } });
    expect(byRoot.status).toBe(200);
    expect(byRoot.json.checkpoint.tenant).toBeUndefined();
    const byAcme = await call(s, "POST", `/v1/sandboxes/${c.id}/checkpoint`, { token: ACME, body: { token: c.token, name: "by-acme" } });
    expect(byAcme.json.checkpoint.tenant).toBe("acme");
    const seen = (await call(s, "GET", "/v1/checkpoints", { token: ACME })).json.checkpoints.map((x: { name: string }) => x.name);
    expect(seen).toEqual(["by-acme"]);
  });

  test("a promoted template is owned by the calling tenant; root's promotion is unowned; another tenant's name is 409", async () => {
    const s = await sim();
    const c = (await claim(s, {}, ACME)).json;
    expect((await call(s, "POST", `/v1/sandboxes/${c.id}/promote`, { body: { template: "root:v1" } })).status).toBe(200);
    expect((await call(s, "POST", `/v1/sandboxes/${c.id}/promote`, { token: ACME, body: { token: c.token, template: "acme:v1" } })).status).toBe(200);
    const owners = Object.fromEntries(s.info().templates!.map((t) => [t.key.template, t.tenant]));
    expect(owners).toEqual({ "root:v1": undefined, "acme:v1": "acme" });
    const b = (await claim(s, {}, BETA)).json;
    const clash = await call(s, "POST", `/v1/sandboxes/${b.id}/promote`, { token: BETA, body: { token: b.token, template: "acme:v1" } });
    expect([clash.status, clash.json]).toEqual([409, { error: "template owned by another tenant" }]);
  });

  test("PUT /v1/pools refuses idle_hibernate_seconds on an egress pool with 400 and keeps the old set", async () => {
    const s = await sim();
    const egress = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", net: "egress", warm: 1, idle_hibernate_seconds: 60 }] } });
    expect(egress.status).toBe(400);
    expect(egress.json.error).toContain("idle_hibernate_seconds is not allowed on an egress pool");
    expect(s.info().pools.map((p) => p.key.net)).toEqual(["none"]);
    const none = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 1, idle_hibernate_seconds: 60 }] } });
    expect(none.status).toBe(200);
  });

  test("at its deadline a hibernated claim of an archiving pool is archived and stays listed; a running one is destroyed", async () => {
    const s = await sim();
    const put = await call(s, "PUT", "/v1/pools", { body: { pools: [{ template: "base:24.04", warm: 2, archive_after_seconds: 600 }] } });
    expect(put.status).toBe(200);
    const asleep = (await claim(s, { ttl_seconds: 60 })).json;
    const awake = (await claim(s, { ttl_seconds: 60 })).json;
    expect((await call(s, "POST", `/v1/sandboxes/${asleep.id}/hibernate`)).status).toBe(204);
    s.advance(65_000); // past both deadlines, and across reap ticks
    const rows = (await call(s, "GET", "/v1/sandboxes")).json.sandboxes as { id: string; archived?: boolean }[];
    expect(rows.map((r) => [r.id, r.archived])).toEqual([[asleep.id, true]]);
    expect(rows.some((r) => r.id === awake.id)).toBe(false);
    expect((await call(s, "GET", "/metrics")).text).toContain("sandboxd_archives_total 1");
  });

  test("/metrics reports tenant_claims for every configured tenant, zero included, and config_digest_mismatch only on a mesh", async () => {
    const s = await sim();
    await claim(s, {}, ACME);
    const text = (await call(s, "GET", "/metrics")).text;
    expect(text).toContain('sandboxd_tenant_claims{tenant="acme"} 1');
    expect(text).toContain('sandboxd_tenant_claims{tenant="beta"} 0');
    expect(text).not.toContain("sandboxd_config_digest_mismatch");
    const mesh = await startSimCluster(2, { rootToken: ROOT, clock: "fake" });
    try {
      expect((await call(mesh.nodes[0]!, "GET", "/metrics")).text).toContain("sandboxd_config_digest_mismatch 0");
    } finally {
      await mesh.stop();
    }
  });
});
