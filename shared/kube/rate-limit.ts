// Client-side rate limit, as client-go's flowcontrol token bucket: `burst` tokens to start with, refilled at `qps`
// per second, one token per request. Waiters are served in arrival order so a burst of callers cannot starve one.

/** client-go's `DefaultQPS` and `DefaultBurst` (rest/config.go): what a zero flag means. */
export const DEFAULT_QPS = 5;
export const DEFAULT_BURST = 10;

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  // Goes negative while callers wait: each waiter reserves the moment its token will exist (as golang.org/x/time/rate
  // reservations do), so a late timer never loses throughput and arrival order is kept.
  private tokens: number;
  private last: number;
  private readonly now: () => number;
  private readonly waiters: { due: number; resolve: () => void; cleanup: () => void }[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;

  /** `now` returns milliseconds; tests inject a clock and call drain() after moving it. */
  constructor(qps: number, burst: number, now: () => number = () => performance.now()) {
    if (!(qps > 0)) throw new RangeError(`token bucket qps must be positive, got ${qps}`);
    if (!(burst >= 1)) throw new RangeError(`token bucket burst must be at least 1, got ${burst}`);
    this.qps = qps;
    this.burst = Math.floor(burst);
    this.tokens = this.burst;
    this.now = now;
    this.last = now();
  }

  private refill(): number {
    const t = this.now();
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

  /** Resolves once the caller's token exists. If the signal aborts first it rejects and the token is given back. */
  acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.tryAcquire()) return Promise.resolve();
    const t = this.refill();
    this.tokens -= 1;
    const due = t + (-this.tokens * 1000) / this.qps;
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

  /** Releases every waiter whose moment has come. Real timers call it; tests with an injected clock call it too. */
  drain(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
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
    const waitMs = Math.max(0, this.waiters[0]!.due - this.now());
    this.timer = setTimeout(() => this.drain(), Math.ceil(waitMs));
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
