// sandboxd-sim — development substrate standing in for sandboxd (which needs KVM). Not product code.
//
// The simulator's clock: the project's one Clock (shared/clock) plus `advance(ms)`. Every node of one simulated
// cluster shares one clock, so `advance` moves the whole mesh. Two implementations:
//   - FakeClock (shared/clock, used as is): time moves only through `advance`; due timers fire in time order,
//     synchronously, inside it. Tests use it to step the 5 s reaper and the 2 s refill loop deterministically.
//   - SkewedRealClock: wall time plus a skew that `advance` grows; timers are real.
import { type Clock, FakeClock, RealClock, type Timer } from "#shared/clock/index.ts";

export { FakeClock, type Timer };

export interface SimClock extends Clock {
  /** Moves time forward. A fake clock fires every timer that falls due, in order. */
  advance(ms: number): void;
}

export class SkewedRealClock extends RealClock implements SimClock {
  private skew = 0;
  override now(): number {
    return super.now() + this.skew;
  }
  advance(ms: number): void {
    this.skew += ms;
  }
}
