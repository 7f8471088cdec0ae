import { describe, expect, test } from "bun:test";
import { ClaimTable, newLease, toRow, wakeClaim, type Claim } from "#services/sandboxd-sim/claims.ts";
import { GO_ZERO_TIME } from "#shared/sandboxd/schemas.ts";

const mk = (over: Partial<Claim> = {}): Claim => ({
  id: "sb_0000000000000001",
  token: "t".repeat(32),
  key: { template: "base", net: "none", size: "medium" },
  onExpire: "destroy",
  onExpireSet: false,
  grantedTtlSeconds: 10,
  deadline: 10_000,
  claimedAt: 0,
  state: "running",
  restarts: 0,
  lastActivity: 0,
  ...over,
});

describe("sandboxd-sim claim table", () => {
  test("a lease grants 300 s for ttl ≤ 0 and clamps at 86400 s", () => {
    expect(newLease(0, 0)).toEqual({ granted: 300, deadline: 300_000 });
    expect(newLease(0, -1).granted).toBe(300);
    expect(newLease(0, 90_000).granted).toBe(86_400);
    expect(newLease(5, 7)).toEqual({ granted: 7, deadline: 7_005 });
  });

  test("reaping is strict: at now == deadline nothing happens; past it destroy or archive", () => {
    const t = new ClaimTable();
    t.add(mk());
    t.add(mk({ id: "sb_2", onExpire: "archive" }));
    expect(t.reap(10_000)).toEqual({ reaped: [], archived: [], deleted: [] });
    expect(t.reap(10_001)).toEqual({ reaped: ["sb_0000000000000001"], archived: ["sb_2"], deleted: [] });
    expect(t.get("sb_2")!.state).toBe("archived");
    expect(t.reap(1e12)).toEqual({ reaped: [], archived: [], deleted: [] }); // an archive stays
  });

  test("wake: archived gets a fresh lease of its granted length; failed cold-boots with restarts + 1", () => {
    const a = mk({ state: "archived", deadline: null });
    wakeClaim(a, 50_000);
    expect([a.state, a.deadline]).toEqual(["running", 60_000]);
    const f = mk({ state: "failed", failedReason: "x" });
    wakeClaim(f, 1);
    expect([f.state, f.restarts, f.restartedAt, f.failedReason]).toEqual(["running", 1, 1, undefined]);
  });

  test("rows follow the omission rules: no token, no tenant for root, archived only when true, echoes only when set", () => {
    const row = toRow(mk());
    expect(Object.keys(row).sort()).toEqual(["claimed_at", "cpu_count", "deadline", "hibernated", "id", "key", "mem_total_bytes"]);
    expect([row.cpu_count, row.mem_total_bytes]).toEqual([2, 1024 ** 3]);
    const full = toRow(mk({ tenant: "acme", claimRef: "ns/a", metadata: { a: "b" }, onExpire: "archive", onExpireSet: true, state: "archived", deadline: null, restarts: 2, restartedAt: 5 }));
    expect(full).toMatchObject({ tenant: "acme", claim_ref: "ns/a", metadata: { a: "b" }, on_expire: "archive", archived: true, restarts: 2 });
    expect(full.deadline).toBeUndefined();
    expect(toRow(mk({ state: "archived", deadline: null }), { archivedDeadline: "zero" }).deadline).toBe(GO_ZERO_TIME);
    expect(toRow(mk({ state: "failed" })).failed).toBe("vmm exited");
  });
});
