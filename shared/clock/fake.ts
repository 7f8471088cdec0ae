// A clock whose time moves only when a test says so. Due timers fire in time order (FIFO among equals) with now()
// at each timer's due time. Two ways to move it:
//   - advance(ms): synchronous; every due timer fires inside the call. For code whose timers do synchronous work
//     (the sandboxd simulator's reaper and refill loop).
//   - tick(ms): the same, but lets promise continuations run before each timer and at the end, so an async loop
//     (sleep, then await a request, then sleep again) schedules its next timer before time moves past it.
// A zero-delay one-shot runs at once, inside after(): a step with no latency completes inside the call that
// started it.
import { type Clock, sleepOn, type Timer } from "./clock.ts";

interface FakeTimer {
  due: number;
  period: number; // 0 = one-shot
  fn: () => void;
  seq: number;
  cancelled: boolean;
}

/** The default start: a fixed instant, so timestamps in test output are stable. */
export const FAKE_CLOCK_START = Date.UTC(2026, 6, 6, 0, 0, 0);

export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private timers: FakeTimer[] = [];

  constructor(start = FAKE_CLOCK_START) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  monotonic(): number {
    return this.t;
  }

  after(ms: number, fn: () => void): Timer {
    return this.add(ms, 0, fn);
  }

  every(ms: number, fn: () => void): Timer {
    const period = Math.max(1, ms);
    return this.add(period, period, fn);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Timers not yet fired or cancelled. */
  get pending(): number {
    return this.timers.filter((x) => !x.cancelled).length;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, synchronously and in order. */
  advance(ms: number): void {
    const target = this.t + Math.max(0, ms);
    for (let next = this.nextDue(target); next; next = this.nextDue(target)) this.fire(next);
    this.t = target;
  }

  /** advance(), letting promise continuations settle before each timer fires and once at the end. */
  async tick(ms: number): Promise<void> {
    const target = this.t + Math.max(0, ms);
    for (;;) {
      await settle();
      const next = this.nextDue(target);
      if (!next) break;
      this.fire(next);
    }
    this.t = target;
    await settle();
  }

  private add(ms: number, period: number, fn: () => void): Timer {
    const timer: FakeTimer = { due: this.t + Math.max(0, ms), period, fn, seq: this.seq++, cancelled: false };
    if (ms <= 0 && period === 0) {
      fn();
      timer.cancelled = true;
    } else {
      this.timers.push(timer);
    }
    return { cancel: () => void (timer.cancelled = true) };
  }

  private nextDue(target: number): FakeTimer | undefined {
    this.timers = this.timers.filter((x) => !x.cancelled);
    let next: FakeTimer | undefined;
    for (const x of this.timers) if (x.due <= target && (!next || x.due < next.due || (x.due === next.due && x.seq < next.seq))) next = x;
    return next;
  }

  private fire(timer: FakeTimer): void {
    this.t = Math.max(this.t, timer.due);
    if (timer.period > 0) {
      timer.due += timer.period;
      timer.seq = this.seq++;
    } else timer.cancelled = true;
    timer.fn();
  }
}

/** Lets pending promise continuations (and one macrotask turn) run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await new Promise<void>((r) => setImmediate(r));
}
