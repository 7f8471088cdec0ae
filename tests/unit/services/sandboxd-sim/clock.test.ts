import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../../../services/sandboxd-sim/clock.ts";

describe("FakeClock", () => {
  test("fires due timers in time order inside advance, with now() at each timer's due time", () => {
    const c = new FakeClock(1_000);
    const seen: [string, number][] = [];
    c.every(2_000, () => seen.push(["tick", c.now()]));
    c.after(3_000, () => seen.push(["once", c.now()]));
    c.advance(4_500);
    expect(seen).toEqual([["tick", 3_000], ["once", 4_000], ["tick", 5_000]]);
    expect(c.now()).toBe(5_500);
  });

  test("a zero-delay one-shot runs synchronously, and a cancelled timer never fires", () => {
    const c = new FakeClock(0);
    let ran = 0;
    c.after(0, () => ran++);
    expect(ran).toBe(1);
    const t = c.every(10, () => ran++);
    t.cancel();
    c.advance(100);
    expect(ran).toBe(1);
  });

  test("timers scheduled while advancing fire within the same advance when due", () => {
    const c = new FakeClock(0);
    const seen: number[] = [];
    c.after(10, () => c.after(10, () => seen.push(c.now())));
    c.advance(25);
    expect(seen).toEqual([20]);
  });
});
