// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The simulator's clock. Every node of one simulated cluster shares one clock, so `advance(ms)` moves the whole
// mesh. Two implementations behind one interface:
//   - RealClock: wall time plus a skew that `advance` grows; timers are real (setInterval / setTimeout).
//   - FakeClock: time moves only through `advance`; due timers fire in time order, synchronously, inside it.
//     Tests use it to step the 5 s reaper and the 2 s refill loop deterministically.

export interface Timer {
  cancel(): void;
}

export interface SimClock {
  readonly fake: boolean;
  now(): number;
  /** Calls fn every `ms` (first call after one period). */
  every(ms: number, fn: () => void): Timer;
  /** Calls fn once after `ms` (0 = as soon as possible; synchronous for a fake clock inside advance). */
  after(ms: number, fn: () => void): Timer;
  /** Moves time forward. A fake clock fires every timer that falls due, in order. */
  advance(ms: number): void;
}

export class RealClock implements SimClock {
  readonly fake = false;
  private skew = 0;
  now(): number {
    return Date.now() + this.skew;
  }
  every(ms: number, fn: () => void): Timer {
    const h = setInterval(fn, ms);
    return { cancel: () => clearInterval(h) };
  }
  after(ms: number, fn: () => void): Timer {
    const h = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(h) };
  }
  advance(ms: number): void {
    this.skew += ms;
  }
}

interface FakeTimer {
  due: number;
  period: number; // 0 = one-shot
  fn: () => void;
  seq: number;
  cancelled: boolean;
}

export class FakeClock implements SimClock {
  readonly fake = true;
  private t: number;
  private seq = 0;
  private timers: FakeTimer[] = [];
  constructor(start = Date.UTC(2026, 6, 6, 0, 0, 0)) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  private add(ms: number, period: number, fn: () => void): Timer {
    const timer: FakeTimer = { due: this.t + ms, period, fn, seq: this.seq++, cancelled: false };
    this.timers.push(timer);
    if (ms <= 0 && period === 0) {
      // A zero-delay one-shot runs at once: a provision with no latency completes inside the call that started it.
      this.timers = this.timers.filter((x) => x !== timer);
      fn();
    }
    return { cancel: () => void (timer.cancelled = true) };
  }
  every(ms: number, fn: () => void): Timer {
    return this.add(ms, ms, fn);
  }
  after(ms: number, fn: () => void): Timer {
    return this.add(ms, 0, fn);
  }
  advance(ms: number): void {
    const target = this.t + Math.max(0, ms);
    for (;;) {
      this.timers = this.timers.filter((x) => !x.cancelled);
      let next: FakeTimer | undefined;
      for (const x of this.timers) if (x.due <= target && (!next || x.due < next.due || (x.due === next.due && x.seq < next.seq))) next = x;
      if (!next) break;
      this.t = Math.max(this.t, next.due);
      if (next.period > 0) {
        next.due += next.period;
        next.seq = this.seq++;
      } else next.cancelled = true;
      next.fn();
    }
    this.t = target;
  }
}
