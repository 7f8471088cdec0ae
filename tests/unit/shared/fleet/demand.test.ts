import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { DemandMeter, type FleetNode } from "#shared/fleet/index.ts";
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
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 15, 5); // 2 of them in the short window, above 4/60
    expect(r.refillMs).toBeUndefined();
    // A minute later nothing is left in either window.
    clock.advance(61_000);
    expect(m.read(KEY).claimsPerSecond).toBe(0);
  });

  test("refill time: each VM a node adds closes the oldest open claim, from its claimedAt to the middle of the interval it came up in", () => {
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
    // a: up in (t0+2 s, t0+9 s] → t0+5.5 s − 0.8 s = 4.7 s; b: up in (t0+9 s, t0+11 s] → t0+10 s − 0.9 s = 9.1 s.
    // (Publish-stamp quantization said 8 s and 10 s: whole intervals, from the report that first listed them.)
    expect(r.refillMs).toBe(6_900);
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

  test("a raised target's provisions close its own deficits, not the claims': they give no sample; misses count as demand", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 1, 1, [])]);
    clock.advance(1_000);
    m.observe([node("n1", 1_000, 0, 5, ["a"])]); // one claim, target raised by 4
    clock.advance(2_000);
    m.observe([node("n1", 3_000, 4, 5, ["a"])]); // 4 booted: the raise's, opened first
    expect(m.read(KEY).refillSamples).toBe(0);
    clock.advance(6_000);
    m.observe([node("n1", 9_000, 5, 5, ["a"])]); // the claim's replacement
    expect(m.read(KEY).refillMs).toBe(5_500); // claimed ~0.5 s (the middle of its interval), up in (3 s, 9 s]
    const before = m.read(KEY).claimsPerSecond;
    m.recordMiss(KEY);
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(before + 1 / 9, 5); // demand began 9 s ago
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
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(10 / 60, 5); // gone from the short window: the long one
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
});
