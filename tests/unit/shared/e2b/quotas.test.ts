// Per-namespace quotas (shared/e2b/quotas.ts) on a FakeClock: counts with in-flight reservations, the rate with its
// one-second burst, fork counts, resume (rate only), defaults vs a namespace's own line, and the 429's shape; the
// snapshot count (the nodes' list plus this replica's checkpoints in flight or finished since) and rate.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { E2bError } from "#shared/e2b/errors.ts";
import type { QuotaLimits } from "#shared/e2b/keys.ts";
import { NamespaceQuotas } from "#shared/e2b/quotas.ts";

function quotas(o: { limits?: [string, Partial<QuotaLimits>][]; max?: number; rate?: number; snapshots?: number; snapshotRate?: number; live?: Record<string, number> } = {}) {
  const clock = new FakeClock(0);
  const live = { ...(o.live ?? {}) };
  const q = new NamespaceQuotas({
    limits: new Map(o.limits ?? []),
    defaults: { maxSandboxes: o.max ?? 0, createsPerSecond: o.rate ?? 0, maxSnapshots: o.snapshots ?? 0, snapshotsPerSecond: o.snapshotRate ?? 0 },
    namespaces: ["a", "b"],
    live: (ns) => live[ns] ?? 0,
    clock,
  });
  return { q, clock, live };
}

const refusal = (f: () => unknown): E2bError => {
  try {
    f();
  } catch (e) {
    if (e instanceof E2bError) return e;
    throw e;
  }
  throw new Error("admitted");
};

describe("NamespaceQuotas", () => {
  test("max-sandboxes counts what the namespace holds plus starts in flight; settling frees the reservation", () => {
    const { q, live } = quotas({ max: 2 });
    live.a = 1;
    const settle = q.admit("a", "create");
    const e = refusal(() => q.admit("a", "create"));
    expect(e.status).toBe(429);
    expect(e.headers).toEqual({ "retry-after": "5" });
    expect(e.message).toContain("max-sandboxes");
    settle();
    settle(); // idempotent
    q.admit("a", "create")();
    // A fork of 2 needs 2 free slots; namespaces are independent.
    expect(refusal(() => q.admit("a", "fork", 2)).status).toBe(429);
    q.admit("b", "fork", 2)();
    // A resume adds no sandbox: never refused by the count.
    live.a = 5;
    q.admit("a", "resume")();
  });

  test("creates-per-second: a burst of one second's worth, then 429 with Retry-After until the rate refills", () => {
    const { q, clock } = quotas({ rate: 2 });
    q.admit("a", "create")();
    q.admit("a", "resume")();
    const e = refusal(() => q.admit("a", "create"));
    expect(e.headers).toEqual({ "retry-after": "1" });
    expect(e.message).toContain("creates-per-second");
    clock.advance(500);
    q.admit("a", "create")();
    // A fork larger than the burst takes at most the burst, so it is admissible at all.
    clock.advance(1000);
    q.admit("a", "fork", 10)();
    expect(refusal(() => q.admit("a", "create")).status).toBe(429);
  });

  test("a rate below 1/s still allows one start, and says how long to wait", () => {
    const { q } = quotas({ rate: 0.25 });
    q.admit("a", "create")();
    expect(refusal(() => q.admit("a", "create")).headers).toEqual({ "retry-after": "4" });
  });

  test("a namespace's own line wins field by field over the defaults; 0 means no limit", () => {
    const { q, live } = quotas({ max: 1, rate: 1, limits: [["a", { maxSandboxes: 0 }]] });
    expect(q.limitsOf("a")).toEqual({ maxSandboxes: 0, createsPerSecond: 1, maxSnapshots: 0, snapshotsPerSecond: 0 });
    expect(q.limitsOf("b")).toEqual({ maxSandboxes: 1, createsPerSecond: 1, maxSnapshots: 0, snapshotsPerSecond: 0 });
    live.a = 100;
    q.admit("a", "create")();
  });

  test("/metrics: held counts (in flight included), limits and refusals by namespace", async () => {
    const { q, live } = quotas({ max: 1, limits: [["b", { maxSandboxes: 3, createsPerSecond: 0.5 }]] });
    live.b = 1;
    q.admit("a", "create");
    refusal(() => q.admit("a", "create"));
    const text = await q.registry.metrics();
    expect(text).toContain('e2b_namespace_sandboxes{namespace="a"} 1');
    expect(text).toContain('e2b_namespace_sandboxes{namespace="b"} 1');
    expect(text).toContain('e2b_namespace_quota_max_sandboxes{namespace="b"} 3');
    expect(text).toContain('e2b_namespace_quota_creates_per_second{namespace="b"} 0.5');
    expect(text).toContain('e2b_quota_rejections_total{namespace="a",quota="max-sandboxes"} 1');
    expect(text).toContain('e2b_quota_admitted_total{namespace="a",kind="create"} 1');
  });

  test("max-snapshots: the nodes' count plus checkpoints in flight; a burst of concurrent snapshots passes one at a time", async () => {
    const { q, clock } = quotas({ snapshots: 2 });
    let listed = 1;
    let reads = 0;
    const held = async () => (reads++, listed);
    // Two at once over one stale count (1 listed): only one fits the last slot.
    const outcomes = await Promise.allSettled([q.admitSnapshot("a", held), q.admitSnapshot("a", held)]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(["fulfilled", "rejected"]);
    const refused = (outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult).reason as E2bError;
    expect(refused.status).toBe(429);
    expect(refused.headers).toEqual({ "retry-after": "5" });
    expect(refused.message).toBe("namespace quota exceeded: 2 of 2 snapshots kept (max-snapshots); delete one (Sandbox.deleteSnapshot) or retry later");
    const settle = (outcomes.find((o) => o.status === "fulfilled") as PromiseFulfilledResult<(made: boolean) => void>).value;
    // Finished, but a count read before it finished (the fan-out started earlier) does not list it yet: still counted.
    let release!: () => void;
    const slow = () => new Promise<number>((r) => (release = () => r(listed)));
    const pending = q.admitSnapshot("a", slow);
    await Bun.sleep(0);
    settle(true);
    release();
    expect(((await pending.catch((e: unknown) => e)) as E2bError).status).toBe(429);
    // A count read after it finished lists it (2 of 2): refused; a delete frees a slot.
    clock.advance(1);
    listed = 2;
    expect(((await q.admitSnapshot("a", held).catch((e: unknown) => e)) as E2bError).status).toBe(429);
    listed = 1;
    (await q.admitSnapshot("a", held))(true);
    // Other namespaces are independent; a failed checkpoint frees its reservation.
    (await q.admitSnapshot("b", async () => 0))(false);
    (await q.admitSnapshot("b", async () => 1))(false);
    expect(reads).toBeGreaterThan(0);
  });

  test("max-snapshots 0 never reads the nodes' count; snapshots-per-second refuses with Retry-After before any count", async () => {
    const { q, clock } = quotas({ snapshotRate: 0.5, limits: [["b", { maxSnapshots: 1 }]] });
    const never = async (): Promise<number> => {
      throw new Error("the count was read");
    };
    (await q.admitSnapshot("a", never))(true);
    const e = (await q.admitSnapshot("a", never).catch((err: unknown) => err)) as E2bError;
    expect(e.status).toBe(429);
    expect(e.headers).toEqual({ "retry-after": "2" });
    expect(e.message).toContain("snapshots-per-second");
    clock.advance(2000);
    (await q.admitSnapshot("a", never))(true);
    const text = await q.registry.metrics();
    expect(text).toContain('e2b_quota_rejections_total{namespace="a",quota="snapshots-per-second"} 1');
    expect(text).toContain('e2b_namespace_quota_max_snapshots{namespace="b"} 1');
    expect(text).toContain('e2b_namespace_quota_snapshots_per_second{namespace="a"} 0.5');
  });
});
