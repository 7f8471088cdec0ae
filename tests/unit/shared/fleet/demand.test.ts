import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { DemandMeter, type FleetNode } from "#shared/fleet/index.ts";
import type { PoolKey } from "#shared/sandboxd/index.ts";

const KEY: PoolKey = { template: "img:1", net: "none", size: "small" };

/** One node's snapshot: `warm`/`target` for KEY and claimed entries with the given ids. */
function node(name: string, at: number, warm: number, target: number, ids: string[], template = KEY.template): FleetNode {
  return {
    name,
    address: `${name}:1`,
    publishedAt: at,
    pools: [{ ...KEY, warm, target }],
    templates: [],
    entries: ids.map((id) => ({ id, name: `ns/${id}`, namespace: "ns", phase: "Running" as const, template })),
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
    // Short window (15 s) holds all 4: 4/15; long window 4/60. The max wins.
    expect(r.claimsPerSecond).toBeCloseTo(4 / 15, 5);
    // Half of it lies in the last 5 s of the 10 s the report covers: the rate is not a burst at the publish.
    clock.advance(10_000);
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 15, 5); // 2 of them in the short window, above 4/60
    expect(r.refillMs).toBeUndefined();
    // A minute later nothing is left in either window.
    clock.advance(61_000);
    expect(m.read(KEY).claimsPerSecond).toBe(0);
  });

  test("refill time: each VM a node adds closes the oldest open claim, stamped with the node's publishedAt", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    const t0 = 1_000_000; // the node's own clock, unrelated to ours
    m.observe([node("n1", t0, 2, 2, [])]);
    clock.advance(1_000);
    m.observe([node("n1", t0 + 1_000, 0, 2, ["a", "b"])]);
    clock.advance(1_000);
    m.observe([node("n1", t0 + 2_000, 0, 2, ["a", "b"])]); // still booting
    clock.advance(7_000);
    m.observe([node("n1", t0 + 9_000, 1, 2, ["a", "b"])]);
    clock.advance(2_000);
    m.observe([node("n1", t0 + 11_000, 2, 2, ["a", "b"])]);
    const r = m.read(KEY);
    expect(r.refillSamples).toBe(2);
    expect(r.refillMs).toBe(9_000); // the median of [8 s, 10 s]
  });

  test("a warm drop with no new entry is a claim (released before the publish); a target cut is not", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 5, 5, [])]);
    clock.advance(5_000);
    m.observe([node("n1", 5_000, 3, 5, [])]);
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 15, 5);
    clock.advance(5_000);
    m.observe([node("n1", 10_000, 1, 1, [])]); // the driver lowered the target: trimmed, not claimed
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 15, 5);
  });

  test("own claims count at once and are not counted again when their id shows up in an inventory", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 3, 3, [])]);
    m.recordClaim(KEY, "sb_own");
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(1 / 15, 5);
    clock.advance(2_000);
    m.observe([node("n1", 2_000, 1, 3, ["sb_own", "sb_other"])]);
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(2 / 15, 5);
  });

  test("a claim refilled before the next report is a sample of the whole interval (an upper bound)", () => {
    const clock = new FakeClock();
    const m = new DemandMeter(clock);
    m.observe([node("n1", 0, 2, 2, [])]);
    clock.advance(3_000);
    m.observe([node("n1", 3_000, 2, 2, ["a"])]);
    expect(m.read(KEY).refillMs).toBe(3_000);
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
    expect(m.read(KEY).refillMs).toBe(8_000);
    const before = m.read(KEY).claimsPerSecond;
    m.recordMiss(KEY);
    expect(m.read(KEY).claimsPerSecond).toBeCloseTo(before + 1 / 15, 5);
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
});
