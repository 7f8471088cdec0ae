import { describe, expect, test } from "bun:test";
import { FakeClock, realClock } from "#shared/clock/index.ts";

describe("FakeClock", () => {
  test("fires due timers in time order inside advance, with now() at each timer's due time", () => {
    const c = new FakeClock(1_000);
    const seen: [string, number][] = [];
    c.every(2_000, () => seen.push(["tick", c.now()]));
    c.after(3_000, () => seen.push(["once", c.now()]));
    c.advance(4_500);
    expect(seen).toEqual([["tick", 3_000], ["once", 4_000], ["tick", 5_000]]);
    expect(c.now()).toBe(5_500);
    expect(c.monotonic()).toBe(5_500);
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
    expect(c.pending).toBe(0);
  });

  test("timers scheduled while advancing fire within the same advance when due", () => {
    const c = new FakeClock(0);
    const seen: number[] = [];
    c.after(10, () => c.after(10, () => seen.push(c.now())));
    c.advance(25);
    expect(seen).toEqual([20]);
  });

  test("sleep resolves when time reaches it, not before", async () => {
    const c = new FakeClock(0);
    let woke = false;
    const p = c.sleep(100).then(() => (woke = true));
    await c.tick(99);
    expect(woke).toBe(false);
    await c.tick(1);
    await p;
    expect(woke).toBe(true);
    expect(c.pending).toBe(0);
  });

  test("an aborted sleep resolves at once and leaves no timer behind", async () => {
    const c = new FakeClock(0);
    const ac = new AbortController();
    const p = c.sleep(60_000, ac.signal);
    expect(c.pending).toBe(1);
    ac.abort();
    await p;
    expect(c.pending).toBe(0);
    await c.sleep(60_000, ac.signal); // already aborted: returns without waiting
    expect(c.pending).toBe(0);
  });

  test("tick lets an async loop schedule its next sleep before time moves past it", async () => {
    const c = new FakeClock(0);
    const rounds: number[] = [];
    const ac = new AbortController();
    const loop = (async () => {
      while (!ac.signal.aborted) {
        await Promise.resolve(); // a round's own async work
        rounds.push(c.now());
        await c.sleep(10, ac.signal);
      }
    })();
    await c.tick(35);
    ac.abort();
    await loop;
    expect(rounds).toEqual([0, 10, 20, 30]);
  });
});

describe("realClock", () => {
  test("sleep waits on real time and ends early on abort", async () => {
    const t0 = realClock.monotonic();
    await realClock.sleep(20);
    expect(realClock.monotonic() - t0).toBeGreaterThanOrEqual(15);
    const ac = new AbortController();
    const p = realClock.sleep(60_000, ac.signal);
    ac.abort();
    await p; // would time the test out if the abort were ignored
    expect(Math.abs(realClock.now() - Date.now())).toBeLessThan(1_000);
  });
});
