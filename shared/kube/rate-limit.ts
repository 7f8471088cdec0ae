// Client-side rate limit, as client-go's flowcontrol token bucket: `burst` tokens to start with, refilled at `qps`
// per second, one token per request. Waiters are served in arrival order so a burst of callers cannot starve one.
// The one token bucket: the Kubernetes client waits on it (acquire), the work queues reserve from it (reserve).
import { type Clock, realClock, type Timer } from "../clock/index.ts";

/** client-go's `DefaultQPS` and `DefaultBurst` (rest/config.go): what a zero flag means. */
export const DEFAULT_QPS = 5;
export const DEFAULT_BURST = 10;

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  // Goes negative while reservations are outstanding: each reservation owns the moment its token will exist (as
  // golang.org/x/time/rate reservations do), so a late timer never loses throughput and arrival order is kept.
  private tokens: number;
  private last: number;
  private readonly clock: Pick<Clock, "monotonic" | "after">;
  private readonly waiters: { due: number; resolve: () => void; cleanup: () => void }[] = [];
  private timer: Timer | undefined;

  /** Intervals are read from `clock.monotonic()`; tests pass a FakeClock and move it. */
  constructor(qps: number, burst: number, clock: Pick<Clock, "monotonic" | "after"> = realClock) {
    if (!(qps > 0)) throw new RangeError(`token bucket qps must be positive, got ${qps}`);
    if (!(burst >= 1)) throw new RangeError(`token bucket burst must be at least 1, got ${burst}`);
    this.qps = qps;
    this.burst = Math.floor(burst);
    this.tokens = this.burst;
    this.clock = clock;
    this.last = clock.monotonic();
  }

  private refill(): number {
    const t = this.clock.monotonic();
    if (t > this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) * this.qps) / 1000);
      this.last = t;
    }
    return t;
  }

  /** Takes a token if one is there now; never waits, never jumps the queue. */
  tryAcquire(): boolean {
    this.refill();
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    return false;
  }

  /**
   * Takes the next `n` tokens (default one), always, and answers how many ms until the last exists (0: now). For a caller that schedules
   * the wait itself (the work queue puts the key on its own timer heap); client-go's rate.Limiter.Reserve.
   */
  reserve(n = 1): number {
    this.refill();
    this.tokens -= n;
    return this.tokens >= 0 ? 0 : (-this.tokens * 1000) / this.qps;
  }

  /** Resolves once the caller's token exists. If the signal aborts first it rejects and the token is given back. */
  acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const wait = this.reserve();
    if (wait === 0) return Promise.resolve();
    const due = this.last + wait;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiters.indexOf(w);
        if (i < 0) return;
        this.waiters.splice(i, 1);
        this.tokens += 1;
        reject(signal?.reason);
      };
      const w = { due, resolve, cleanup: () => signal?.removeEventListener("abort", onAbort) };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(w);
      this.schedule();
    });
  }

  /** Releases every waiter whose moment has come. The clock's timer calls it; a test may call it after moving time. */
  drain(): void {
    this.timer?.cancel();
    this.timer = undefined;
    const t = this.refill();
    while (this.waiters.length > 0 && this.waiters[0]!.due <= t) {
      const w = this.waiters.shift()!;
      w.cleanup();
      w.resolve();
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer !== undefined || this.waiters.length === 0) return;
    const waitMs = Math.max(0, this.waiters[0]!.due - this.clock.monotonic());
    let fired = false; // a fake clock runs a zero-delay timer inside after()
    const timer = this.clock.after(Math.ceil(waitMs), () => {
      fired = true;
      this.timer = undefined;
      this.drain();
    });
    if (!fired) this.timer = timer;
  }
}

/**
 * `--kube-api-qps` / `--kube-api-burst` with client-go's meaning: qps 0 → 5 qps, burst 0 → 10, a negative qps → no
 * client-side limit at all (undefined). The client's limiter and the work queues' buckets both start from this.
 */
export function rateFromFlags(qps: number, burst: number): { qps: number; burst: number } | undefined {
  if (qps < 0) return undefined;
  return { qps: qps === 0 ? DEFAULT_QPS : qps, burst: burst <= 0 ? DEFAULT_BURST : burst };
}

/** The client-side limiter for those flags (undefined: no limit). */
export function limiterFromFlags(qps: number, burst: number): TokenBucket | undefined {
  const rate = rateFromFlags(qps, burst);
  return rate && new TokenBucket(rate.qps, rate.burst);
}
