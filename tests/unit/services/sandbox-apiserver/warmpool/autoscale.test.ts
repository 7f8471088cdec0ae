import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import type { DemandReading } from "#shared/fleet/index.ts";
import type { PoolKey } from "#shared/sandboxd/index.ts";
import {
  ANN_AUTOSCALE_ENABLED,
  ANN_AUTOSCALE_MAX,
  ANN_AUTOSCALE_MIN,
  ANN_AUTOSCALE_STATUS,
  AUTOSCALE_DEFAULTS,
  Autoscaler,
  demandTarget,
  policyOf,
  statusAnnotation,
} from "#services/sandbox-apiserver/warmpool/autoscale.ts";
import type { Resolution, WarmPool } from "#services/sandbox-apiserver/warmpool/plan.ts";

const KEY: PoolKey = { template: "img:1", net: "none", size: "small" };
const pool = (name: string, annotations: Record<string, string> = {}, replicas = 3): WarmPool => ({
  metadata: { name, namespace: "ns", uid: `uid-${name}`, annotations },
  spec: { replicas, sandboxTemplateRef: { name: "t" } },
});
const auto = (extra: Record<string, string> = {}) => ({ [ANN_AUTOSCALE_ENABLED]: "true", ...extra });
const res = (p: WarmPool, key = KEY): Resolution => ({ pool: p, key, replicas: p.spec!.replicas! });

/** A meter whose reading the test sets. */
class Meter {
  reading: DemandReading = { claimsPerSecond: 0, refillMs: undefined, refillSamples: 0 };
  read(): DemandReading {
    return this.reading;
  }
}

const replicasOf = (out: { resolutions: Resolution[] }, i = 0) => (out.resolutions[i] as { replicas: number }).replicas;

describe("autoscaling policy", () => {
  test("off unless enabled; min/max from annotations with defaults; bad values are refused with the annotation named", () => {
    expect(policyOf(pool("p"))).toEqual({ mode: "manual" });
    expect(policyOf(pool("p", { [ANN_AUTOSCALE_ENABLED]: "false", [ANN_AUTOSCALE_MIN]: "3" }))).toEqual({ mode: "manual" });
    expect(policyOf(pool("p", auto()))).toEqual({ mode: "auto", min: AUTOSCALE_DEFAULTS.min, max: AUTOSCALE_DEFAULTS.max });
    expect(policyOf(pool("p", auto({ [ANN_AUTOSCALE_MIN]: "2", [ANN_AUTOSCALE_MAX]: "9" })))).toEqual({ mode: "auto", min: 2, max: 9 });
    expect(policyOf(pool("p", auto({ [ANN_AUTOSCALE_MIN]: "-1" })))).toEqual({
      mode: "invalid",
      reason: `${ANN_AUTOSCALE_MIN}="-1": want a non-negative integer`,
    });
    expect(policyOf(pool("p", auto({ [ANN_AUTOSCALE_MAX]: "99999999" }))).mode).toBe("invalid");
    expect(policyOf(pool("p", { [ANN_AUTOSCALE_ENABLED]: "yes" })).mode).toBe("invalid");
    expect(policyOf(pool("p", auto({ [ANN_AUTOSCALE_MIN]: "5", [ANN_AUTOSCALE_MAX]: "4" })))).toEqual({
      mode: "invalid",
      reason: `${ANN_AUTOSCALE_MIN}=5 is above ${ANN_AUTOSCALE_MAX}=4`,
    });
  });

  test("the queueing rule: per node ceil(m + z·√m) with m = rate × refill × safety / nodes, plus headroom; 0 without claims", () => {
    const p = { safety: 1, z: 2.33, headroom: 2 };
    expect(demandTarget(2, 8_000, p)).toBe(28); // m 16: ceil(16 + 2.33 × 4) + 2
    expect(demandTarget(0.1, 1_000, p)).toBe(3);
    expect(demandTarget(0, 8_000, p)).toBe(0);
  });

  test("split over nodes, each node's share carries its own Poisson margin (the old fleet-wide 26 left each node short)", () => {
    const p = { safety: 1, z: 2.33, headroom: 2 };
    // 3 nodes: m = 16 / 3 per node, ceil(5.33 + 2.33 × 2.31) = 11 each.
    expect(demandTarget(2, 8_000, p, 3)).toBe(35);
    expect(demandTarget(2, 8_000, p, 3)).toBeGreaterThan(demandTarget(2, 8_000, p, 1));
    expect(demandTarget(2, 8_000, p, 0)).toBe(28); // no node known: as one
  });

  test("the autoscaler splits over the node count it is given", () => {
    const meter = new Meter();
    meter.reading = { claimsPerSecond: 2, refillMs: 8_000, refillSamples: 4 };
    const p = pool("p", auto());
    expect(replicasOf(new Autoscaler(meter, new FakeClock(), AUTOSCALE_DEFAULTS).plan([res(p)], 3))).toBe(demandTarget(2, 8_000, AUTOSCALE_DEFAULTS, 3));
  });
});

describe("Autoscaler", () => {
  const params = { ...AUTOSCALE_DEFAULTS, downWindowMs: 60_000 };

  test("a pool without autoscaling keeps spec.replicas (hand-set or an HPA's), whatever the demand", () => {
    const meter = new Meter();
    meter.reading = { claimsPerSecond: 50, refillMs: 10_000, refillSamples: 3 };
    const out = new Autoscaler(meter, new FakeClock(), params).plan([res(pool("manual", {}, 7))]);
    expect(replicasOf(out)).toBe(7);
    expect(out.decisions.size).toBe(0);
  });

  test("up at once, down only after the stabilization window, back at min when load stops", () => {
    const clock = new FakeClock();
    const meter = new Meter();
    const a = new Autoscaler(meter, clock, params);
    const p = pool("p", auto({ [ANN_AUTOSCALE_MIN]: "2", [ANN_AUTOSCALE_MAX]: "40" }));
    expect(replicasOf(a.plan([res(p)]))).toBe(2); // no claims: the minimum
    meter.reading = { claimsPerSecond: 2, refillMs: 5_000, refillSamples: 4 };
    const up = a.plan([res(p)]);
    expect(replicasOf(up)).toBe(20); // ceil(10 + 2.33 × √10) + 2, in the same pass
    expect(up.decisions.get(p)).toMatchObject({ target: 20, demand: 20, claimsPerSecond: 2, refillSeconds: 5, refillMeasured: true });
    meter.reading = { claimsPerSecond: 0, refillMs: 5_000, refillSamples: 4 };
    clock.advance(30_000);
    expect(replicasOf(a.plan([res(p)]))).toBe(20); // inside the window: held
    clock.advance(30_000);
    expect(replicasOf(a.plan([res(p)]))).toBe(2); // the 20 left the window
  });

  test("the max bounds a burst; without a measured refill the default refill time is used", () => {
    const meter = new Meter();
    meter.reading = { claimsPerSecond: 100, refillMs: undefined, refillSamples: 0 };
    const p = pool("p", auto({ [ANN_AUTOSCALE_MAX]: "12" }));
    const out = new Autoscaler(meter, new FakeClock(), params).plan([res(p)]);
    expect(replicasOf(out)).toBe(12);
    expect(out.decisions.get(p)).toMatchObject({ refillSeconds: AUTOSCALE_DEFAULTS.defaultRefillMs / 1000, refillMeasured: false, demand: 1076 });
  });

  test("an invalid annotation keeps spec.replicas and reports why", () => {
    const p = pool("p", auto({ [ANN_AUTOSCALE_MIN]: "x" }), 4);
    const out = new Autoscaler(new Meter(), new FakeClock(), params).plan([res(p)]);
    expect(replicasOf(out)).toBe(4);
    expect(out.invalid.get(p)).toContain(ANN_AUTOSCALE_MIN);
  });

  test("two autoscaled pools of one key: the first carries the demand, the second holds its minimum", () => {
    const meter = new Meter();
    meter.reading = { claimsPerSecond: 1, refillMs: 4_000, refillSamples: 1 };
    const a = new Autoscaler(meter, new FakeClock(), params);
    const out = a.plan([res(pool("a", auto())), res(pool("b", auto({ [ANN_AUTOSCALE_MIN]: "3" })))]);
    expect([replicasOf(out, 0), replicasOf(out, 1)]).toEqual([11, 3]);
  });

  test("a new leader starts from the target the last one wrote, so a hand-over under load does not drop the pool", () => {
    const clock = new FakeClock();
    const decided = statusAnnotation({ target: 20, demand: 20, claimsPerSecond: 2, refillSeconds: 5, refillMeasured: true, min: 1, max: 64 });
    const p = pool("p", auto({ [ANN_AUTOSCALE_STATUS]: decided }));
    const a = new Autoscaler(new Meter(), clock, params);
    expect(replicasOf(a.plan([res(p)]))).toBe(20);
    clock.advance(60_000);
    expect(replicasOf(a.plan([res(p)]))).toBe(1);
  });
});
