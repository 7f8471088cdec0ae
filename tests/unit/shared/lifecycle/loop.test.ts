import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { LoopRunner, PeriodicLoop } from "#shared/lifecycle/loop.ts";

function gate() {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

function recorder() {
  const lines: Array<{ obj: object; msg: string }> = [];
  return { lines, log: { error: (obj: object, msg: string) => void lines.push({ obj, msg }) } };
}

describe("PeriodicLoop", () => {
  test("ticks once per interval, the next one scheduled only after the previous finished", async () => {
    const clock = new FakeClock();
    const hold = gate();
    let ticks = 0;
    const loop = new PeriodicLoop({
      name: "t",
      clock,
      intervalMs: 1000,
      tick: async () => {
        ticks++;
        if (ticks === 1) await hold.promise;
      },
    });
    loop.start();
    clock.advance(5000); // one tick starts and blocks: nothing else is scheduled meanwhile
    expect(ticks).toBe(1);
    hold.open();
    await loop.untilTicks(1);
    clock.advance(999);
    expect(ticks).toBe(1);
    clock.advance(1);
    await loop.untilTicks(2);
    expect(ticks).toBe(2);
    await loop.stop();
  });

  test("first: now ticks at start, then once per interval", async () => {
    const clock = new FakeClock();
    const at: number[] = [];
    const start = clock.now();
    const loop = new PeriodicLoop({ name: "t", clock, intervalMs: 1000, first: "now", tick: async () => void at.push(clock.now() - start) });
    loop.start();
    loop.start(); // idempotent
    await clock.tick(2500);
    await loop.stop();
    expect(at).toEqual([0, 1000, 2000]);
  });

  test("stop aborts the tick's signal, waits for the tick in progress, and nothing runs afterwards", async () => {
    const clock = new FakeClock();
    const hold = gate();
    let finished = false;
    let sawAbort = false;
    const loop = new PeriodicLoop({
      name: "t",
      clock,
      intervalMs: 1000,
      tick: async (signal) => {
        await hold.promise;
        sawAbort = signal.aborted;
        finished = true;
      },
    });
    loop.start();
    clock.advance(1000);
    const stopped = loop.stop();
    hold.open();
    await stopped;
    expect([finished, sawAbort, loop.active]).toEqual([true, true, false]);
    clock.advance(10_000);
    expect(loop.completed).toBe(1);
    expect(clock.pending).toBe(0);
  });

  test("a failing tick is logged with the loop's name and the loop goes on", async () => {
    const clock = new FakeClock();
    const { log, lines } = recorder();
    const loop = new PeriodicLoop({ name: "t", clock, intervalMs: 1000, log, tick: async () => { throw new Error("boom"); } });
    loop.start();
    clock.advance(1000);
    await loop.untilTicks(1);
    clock.advance(1000);
    await loop.untilTicks(2);
    await loop.stop();
    expect(lines).toEqual([
      { obj: { loop: "t", err: "boom" }, msg: "loop tick failed" },
      { obj: { loop: "t", err: "boom" }, msg: "loop tick failed" },
    ]);
  });

  test("a tick that answers true ends the loop; an interval of 0 never starts; stop before start wins", async () => {
    const clock = new FakeClock();
    const done = new PeriodicLoop({ name: "t", clock, intervalMs: 1000, tick: async () => true });
    done.start();
    expect(done.active).toBe(true);
    clock.advance(1000);
    await done.untilTicks(1);
    expect(done.active).toBe(false);
    expect(clock.pending).toBe(0);
    const off = new PeriodicLoop({ name: "off", clock, intervalMs: 0, tick: async () => {} });
    off.start();
    expect(off.active).toBe(false);
    const early = new PeriodicLoop({ name: "early", clock, intervalMs: 1000, first: "now", tick: async () => {} });
    await early.stop();
    early.start();
    expect([early.active, early.completed]).toEqual([false, 0]);
  });
});

describe("LoopRunner", () => {
  test("start runs the body once; stop aborts its signal and waits for it to return", async () => {
    let runs = 0;
    let returned = false;
    const runner = new LoopRunner(async (signal) => {
      runs++;
      await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
      returned = true;
    });
    runner.start();
    runner.start();
    expect(runs).toBe(1);
    await runner.stop();
    expect([returned, runner.signal.aborted]).toEqual([true, true]);
  });
});
