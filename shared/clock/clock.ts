// The one shape of time every loop, queue, bucket and timeout takes. Production passes `realClock`; tests pass a
// FakeClock (./fake.ts) and move time themselves, so no test waits on the machine's speed.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Wall time, ms since the epoch: what is stamped into objects, files and logs. */
  now(): number;
  /**
   * Monotonic ms for measuring intervals (rate limits, queue delays): never jumps when the wall clock is set.
   * A fake clock answers the same as now().
   */
  monotonic(): number;
  /** Calls fn once after `ms`. */
  after(ms: number, fn: () => void): Timer;
  /** Calls fn every `ms` (first call after one period). */
  every(ms: number, fn: () => void): Timer;
  /**
   * Resolves after `ms`, or at once (never throwing) when the signal aborts, and leaves no timer or listener behind
   * either way. Callers that must stop on abort check the signal afterwards (`signal.throwIfAborted()`).
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Wall time and real timers. */
export class RealClock implements Clock {
  now(): number {
    return Date.now();
  }
  monotonic(): number {
    return performance.now();
  }
  after(ms: number, fn: () => void): Timer {
    const h = setTimeout(fn, Math.max(0, ms));
    return { cancel: () => clearTimeout(h) };
  }
  every(ms: number, fn: () => void): Timer {
    const h = setInterval(fn, Math.max(1, ms));
    return { cancel: () => clearInterval(h) };
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }
}

export const realClock: Clock = new RealClock();

/** Clock.sleep on any clock's `after`: the abort listener and the timer each remove the other. */
export function sleepOn(clock: Pick<Clock, "after">, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    let timer: Timer | undefined;
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      timer?.cancel();
      signal?.removeEventListener("abort", done);
      resolve();
    };
    signal?.addEventListener("abort", done, { once: true });
    timer = clock.after(Math.max(0, ms), done);
    if (settled) timer.cancel(); // a fake clock may run a zero-delay timer inside after()
  });
}
