import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { DemandMeter, type FleetNode } from "#shared/fleet/index.ts";
import { mostCovered } from "#shared/fleet/demand.ts";
import type { PoolKey } from "#shared/sandboxd/index.ts";

const KEY: PoolKey = { template: "img:1", net: "none", size: "small" };

/** One node's snapshot: `warm`/`target` for KEY and claimed entries with the given ids. */
function node(name: string, at: number, warm: number, target: number, ids: string[], template = KEY.template, claimedAt: Record<string, number> = {}): FleetNode {
  return {
    name,
    address: `${name}:1`,
    publishedAt: at,
    pools: [{ ...KEY, warm, target }],
    templates: [],
    entries: ids.map((id) => ({ id, name: `ns/${id}`, namespace: "ns", phase: "Running" as const, template, ...(claimedAt[id] !== undefined ? { claimedAt: claimedAt[id] } : {}) })),
  };
}

describe("DemandMeter", () => {
  test("claims seen as new inventory entries give the rate, spread over the time between publishes", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    const t0 = clock.now();
    m.observe([node("n1", t0, 4, 4, [])]);
    clock.advance(10_000);
    // 4 claims over 10 s; nothing refilled yet.
    m.observe([node("n1", t0 + 10_000, 0, 4, ["sb_0", "sb_1", "sb_2", "sb_3"])]);
    const r = m.read(KEY);
    // Short window holds all 4 over the 10 s since the demand began (not the whole 15 s); long window 4/60.
    expect(r.claimsPerSecond).toBeCloseTo(4 / 10, 5);
    // Half of it lies in the last 5 s of the 10 s the report covers: the rate is not a burst at the publish.
    clock.advance(10_000);
    // 2 of them in the short window, no more than the long rate predicts: the long one, 4 over the 20 s since they began.
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(4 / 20, 5);
    expect(r.refillMs).toBeUndefined();
    // A minute later nothing is left in either window.
    clock.advance(61_000);
    expect(m.read(KEY).claimsPerSecond).toBe(0);
  });

  test("refill time: each VM a node adds closes the oldest open claim; the estimate is the time every sample's bounds contain", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    const t0 = 1_000_000; // the node's own clock, unrelated to ours
    m.observe([node("n1", t0, 2, 2, [])]);
    clock.advance(1_000);
    m.observe([node("n1", t0 + 1_000, 0, 2, ["a", "b"], KEY.template, { a: t0 + 800, b: t0 + 900 })]);
    clock.advance(1_000);
    m.observe([node("n1", t0 + 2_000, 0, 2, ["a", "b"])]); // still booting
    clock.advance(7_000);
    m.observe([node("n1", t0 + 9_000, 1, 2, ["a", "b"])]);
    clock.advance(2_000);
    m.observe([node("n1", t0 + 11_000, 2, 2, ["a", "b"])]);
    const r = m.read(KEY);
    expect(r.refillSamples).toBe(2);
    // a (claimed t0+0.8 s) was up in (t0+2 s, t0+9 s]: 1.2 s..8.2 s; b (t0+0.9 s) in (t0+9 s, t0+11 s]: 8.1 s..10.1 s.
    // Both hold 8.1..8.2 s. (Publish stamps alone said 8 s and 10 s: whole intervals from the report that listed them.)
    expect(r.refillMs).toBe(8_150);
  });

  test("a warm drop with no new entry is a claim (released before the publish); a target cut is not", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 5, 5, [])]);
    clock.advance(5_000);
    m.observe([node("n1", 5_000, 3, 5, [])]);
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 5, 5);
    clock.advance(5_000);
    m.observe([node("n1", 10_000, 1, 1, [])]); // the driver lowered the target: trimmed, not claimed
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 10, 5);
  });

  test("own claims count at once and are not counted again when their id shows up in an inventory", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 3, 3, [])]);
    m.recordClaim(KEY, "sb_own");
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(1 / 5, 5); // the short window's floor: 5 s
    m.recordClaim(KEY, "sb_own"); // a replayed create: the same id
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(1 / 5, 5);
    clock.advance(2_000);
    m.observe([node("n1", 2_000, 1, 3, ["sb_own", "sb_other"])]);
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 5, 5);
  });

  test("a claim refilled before the next report: half the time from its claim to the report (not the whole interval)", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 2, 2, [])]);
    clock.advance(3_000);
    m.observe([node("n1", 3_000, 2, 2, ["a"], KEY.template, { a: 1_000 })]);
    expect(m.read(KEY).refillMs).toBe(1_000);
    // Without claimedAt the claim is placed at the interval's middle: up within (1.5 s, 3 s], 0.75 s.
    m.observe([node("n2", 0, 2, 2, [])]);
    m.observe([node("n2", 3_000, 2, 2, ["b"])]);
    expect(m.read(KEY).refillSamples).toBe(2);
  });

  test("a raised target's provisions close its own deficits without a sample, and so do claims queued behind them; misses count as demand", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    // n1: a claim in the same report as a raise by 4 waits behind the raise's provisions: no sample.
    m.observe([node("n1", 0, 1, 1, []), node("n2", 0, 1, 1, [])]);
    clock.advance(1_000);
    m.observe([node("n1", 1_000, 0, 5, ["a"]), node("n2", 1_000, 1, 5, [])]);
    clock.advance(2_000);
    m.observe([node("n1", 3_000, 4, 5, ["a"]), node("n2", 3_000, 5, 5, [])]); // the raises' VMs, opened first
    expect(m.read(KEY).refillSamples).toBe(0);
    // n2: a claim once its raise is done is a plain replacement.
    clock.advance(1_000);
    m.observe([node("n1", 4_000, 4, 5, ["a"]), node("n2", 4_000, 4, 5, ["b"], KEY.template, { b: 3_500 })]);
    clock.advance(8_000);
    m.observe([node("n1", 12_000, 5, 5, ["a"]), node("n2", 12_000, 5, 5, ["b"])]);
    const r = m.read(KEY);
    expect(r.refillSamples).toBe(1); // b's only: a queued behind n1's raise
    expect(r.refillMs).toBe(4_500); // b: up in (4 s, 12 s], claimed 3.5 s: 0.5..8.5 s, its middle
    const before = r.claimsPerSecond;
    m.recordMiss(KEY);
    expect(m.read(KEY).claimsPerSecond).toBeGreaterThan(before);
  });

  test("an unchanged snapshot is not a new observation; a node that leaves is forgotten", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    const snap = node("n1", 0, 2, 2, []);
    m.observe([snap]);
    clock.advance(1_000);
    m.observe([node("n1", 0, 0, 2, ["x", "y"])]); // same publishedAt: the same report, skipped
    expect(m.read(KEY).claimsPerSecond).toBe(0);
    m.observe([]);
    m.observe([node("n1", 5_000, 0, 2, ["x", "y"])]); // back: a baseline, not two claims
    expect(m.read(KEY).claimsPerSecond).toBe(0);
  });

  test("entries of a template no pool serves (a built template) are not pool claims", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 2, 2, [])]);
    clock.advance(1_000);
    m.observe([node("n1", 1_000, 2, 2, ["b1"], "built/tpl")]);
    expect(m.read(KEY).claimsPerSecond).toBe(0);
  });

  test("a step from idle shows its rate within one publish, not ramped over the 15 s window", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    clock.advance(120_000); // idle
    for (let i = 0; i < 10; i++) {
      clock.advance(500);
      m.recordClaim(KEY, `sb_${i}`);
    }
    // 10 claims in 5 s: 2/s (the old fixed window said 10/15).
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2, 5);
    clock.advance(20_000);
    // Gone from the short window: the long one, over the 24.5 s since the demand began.
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(10 / 24.5, 5);
  });

  test("an own claim released before the next publish is not counted again as an unexplained warm drop", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 4, 4, [])]);
    m.recordClaim(KEY, "sb_own", "n1");
    clock.advance(5_000);
    m.observe([node("n1", 5_000, 2, 4, [])]); // two gone, neither listed: one is ours, one a stranger's
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 5, 5); // ours once + the stranger's, not 3
  });

  test("a canary claim is never demand: neither listed nor released before the publish", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 4, 4, []), node("n2", 0, 4, 4, [])]);
    m.recordCanary(KEY, "sb_canary", "n1");
    m.recordCanary(KEY, "sb_canary2", "n2");
    clock.advance(5_000);
    m.observe([node("n1", 5_000, 3, 4, []), node("n2", 5_000, 3, 4, ["sb_canary2"])]);
    expect(m.read(KEY).claimsPerSecond).toBe(0);
    // Its replacement still is a refill sample (the canary proves the node refills).
    expect(m.read(KEY).refillSamples).toBe(0);
    clock.advance(5_000);
    m.observe([node("n1", 10_000, 4, 4, []), node("n2", 10_000, 4, 4, ["sb_canary2"])]);
    expect(m.read(KEY).refillSamples).toBe(2);
    // A drop on another node is not explained by n1's canary.
    m.recordCanary(KEY, "sb_canary3", "n1");
    clock.advance(5_000);
    m.observe([node("n1", 15_000, 4, 4, []), node("n2", 15_000, 3, 4, ["sb_canary2"])]);
    expect(m.read(KEY).claimsPerSecond).toBeGreaterThan(0);
  });

  test("a burst no larger than the long rate predicts is noise, not a step: the long rate holds", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    // 2/s for 60 s, then 6 claims in 1.5 s: the short window's count is within 3 standard deviations of the long rate.
    for (let i = 0; i < 120; i++) {
      clock.advance(500);
      m.recordClaim(KEY, `a${i}`);
    }
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2, 1);
    for (let i = 0; i < 6; i++) {
      clock.advance(250);
      m.recordClaim(KEY, `b${i}`);
    }
    const noisy = m.read(KEY).claimsPerSecond;
    expect(noisy).toBeLessThan(2.2); // the long window's, not the short window's ~2.3
    // A real step (6/s) shows within the short window (the long one alone would say ~2.7 for a minute).
    for (let i = 0; i < 60; i++) {
      clock.advance(166);
      m.recordClaim(KEY, `c${i}`);
    }
    expect(m.read(KEY).claimsPerSecond).toBeGreaterThan(3);
  });

  test("mostCovered: the middle of the span most refill intervals share; undefined without samples", () => {
    expect(mostCovered([])).toBeUndefined();
    expect(mostCovered([{ lo: 0, hi: 20 }, { lo: 6, hi: 35 }, { lo: 7, hi: 9 }])).toBe(8);
    // An outlier (a claim that queued) leaves the agreed span alone.
    expect(mostCovered([{ lo: 0, hi: 10 }, { lo: 7, hi: 12 }, { lo: 5, hi: 9 }, { lo: 25, hi: 40 }])).toBe(8);
  });
});
