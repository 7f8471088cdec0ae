import { describe, expect, test } from "bun:test";
import { Loop } from "../../../../../services/vk-sandbox/provider/loop.ts";
import { captureLog, FakeClock, gate } from "./helpers.ts";

describe("provider loop", () => {
  test("ticks once per interval, the next one scheduled only after the previous finished", async () => {
    const clock = new FakeClock();
    const hold = gate();
    let ticks = 0;
    const loop = new Loop("t", clock, 1000, async () => {
      ticks++;
      if (ticks === 1) await hold.promise;
    }, captureLog().log);
    loop.start();
    clock.advance(5000); // one tick starts and blocks: nothing else is scheduled meanwhile
    expect(ticks).toBe(1);
    hold.open();
    await loop.untilTicks(1);
    clock.advance(1000);
    await loop.untilTicks(2);
    expect(ticks).toBe(2);
    await loop.stop();
  });

  test("stop waits for the tick in progress and nothing runs afterwards", async () => {
    const clock = new FakeClock();
    const hold = gate();
    let finished = false;
    const loop = new Loop("t", clock, 1000, async () => {
      await hold.promise;
      finished = true;
    }, captureLog().log);
    loop.start();
    clock.advance(1000);
    const stopped = loop.stop();
    hold.open();
    await stopped;
    expect(finished).toBe(true);
    clock.advance(10_000);
    expect(loop.completed).toBe(1);
  });

  test("a failing tick is logged and the loop goes on", async () => {
    const clock = new FakeClock();
    const { log, lines } = captureLog();
    const loop = new Loop("t", clock, 1000, async () => {
      throw new Error("boom");
    }, log);
    loop.start();
    clock.advance(1000);
    await loop.untilTicks(1);
    clock.advance(1000);
    await loop.untilTicks(2);
    await loop.stop();
    expect(lines.filter((l) => l.msg === "provider loop tick failed")).toHaveLength(2);
  });

  test("a tick that answers true ends the loop; an interval of 0 never starts", async () => {
    const clock = new FakeClock();
    const done = new Loop("t", clock, 1000, async () => true, captureLog().log);
    done.start();
    clock.advance(1000);
    await done.untilTicks(1);
    expect(done.started).toBe(false);
    const off = new Loop("off", clock, 0, async () => {}, captureLog().log);
    off.start();
    expect(off.started).toBe(false);
  });
});
