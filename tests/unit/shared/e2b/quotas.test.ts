// Per-namespace quotas (shared/e2b/quotas.ts) on a FakeClock: counts with in-flight reservations, the rate with its
// one-second burst, fork counts, resume (rate only), defaults vs a namespace's own line, and the 429's shape.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { E2bError } from "#shared/e2b/errors.ts";
import { NamespaceQuotas } from "#shared/e2b/quotas.ts";

function quotas(o: { limits?: [string, { maxSandboxes?: number; createsPerSecond?: number }][]; max?: number; rate?: number; live?: Record<string, number> } = {}) {
  const clock = new FakeClock(0);
  const live = { ...(o.live ?? {}) };
  const q = new NamespaceQuotas({
    limits: new Map(o.limits ?? []),
    defaults: { maxSandboxes: o.max ?? 0, createsPerSecond: o.rate ?? 0 },
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
    expect(q.limitsOf("a")).toEqual({ maxSandboxes: 0, createsPerSecond: 1 });
    expect(q.limitsOf("b")).toEqual({ maxSandboxes: 1, createsPerSecond: 1 });
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
});
