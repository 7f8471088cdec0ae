import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { limiterFromFlags, rateFromFlags, TokenBucket } from "#shared/kube/rate-limit.ts";

const clock = () => new FakeClock(0);

describe("TokenBucket with an injected clock", () => {
  test("starts full: exactly `burst` requests pass at once, the next does not", () => {
    const c = clock();
    const b = new TokenBucket(20, 5, c);
    const got = Array.from({ length: 7 }, () => b.tryAcquire());
    expect(got).toEqual([true, true, true, true, true, false, false]);
  });

  test("refills at qps and never above burst", () => {
    const c = clock();
    const b = new TokenBucket(10, 3, c);
    for (let i = 0; i < 3; i++) expect(b.tryAcquire()).toBe(true);
    c.advance(99);
    expect(b.tryAcquire()).toBe(false); // 0.99 of a token
    c.advance(1);
    expect(b.tryAcquire()).toBe(true); // 100 ms at 10 qps = 1 token
    c.advance(10_000); // a long idle period refills only up to burst
    const burst = Array.from({ length: 5 }, () => b.tryAcquire()).filter(Boolean).length;
    expect(burst).toBe(3);
  });

  test("over a long run admits qps*seconds + burst requests", () => {
    const c = clock();
    const b = new TokenBucket(20, 5, c);
    let admitted = 0;
    for (let ms = 0; ms <= 10_000; ms++) {
      while (b.tryAcquire()) admitted++;
      c.advance(1);
    }
    expect(admitted).toBe(20 * 10 + 5);
  });

  test("waiters are served in arrival order as tokens appear", async () => {
    const c = clock();
    const b = new TokenBucket(10, 1, c);
    expect(b.tryAcquire()).toBe(true);
    const order: number[] = [];
    const ws = [1, 2, 3].map((i) => b.acquire().then(() => order.push(i)));
    // A newcomer may not jump the queue.
    expect(b.tryAcquire()).toBe(false);
    c.advance(100);
    b.drain();
    await Promise.resolve();
    expect(order).toEqual([1]);
    c.advance(200);
    b.drain();
    await Promise.all(ws);
    expect(order).toEqual([1, 2, 3]);
  });

  test("an aborted waiter rejects with the signal's reason and spends no token", async () => {
    const c = clock();
    const b = new TokenBucket(10, 1, c);
    b.tryAcquire();
    const ac = new AbortController();
    const p = b.acquire(ac.signal);
    ac.abort(new Error("gone"));
    await expect(p).rejects.toThrow("gone");
    c.advance(100);
    expect(b.tryAcquire()).toBe(true);
  });

  test("with the real clock, acquire waits about 1/qps for the next token", async () => {
    const b = new TokenBucket(50, 1);
    await b.acquire();
    const t0 = performance.now();
    await b.acquire();
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(15);
    expect(waited).toBeLessThan(200);
  });
});

describe("TokenBucket.reserve (the work queues' use)", () => {
  test("always takes a token and answers the wait: burst at once, then 1/qps apart; idle time refills", () => {
    const c = clock();
    const b = new TokenBucket(4, 2, c);
    expect([b.reserve(), b.reserve(), b.reserve(), b.reserve()]).toEqual([0, 0, 250, 500]);
    c.advance(10_000);
    expect([b.reserve(), b.reserve(), b.reserve()]).toEqual([0, 0, 250]);
  });

  test("reservations and waiters share one queue of future tokens", async () => {
    const c = clock();
    const b = new TokenBucket(10, 1, c);
    expect(b.reserve()).toBe(0);
    expect(b.reserve()).toBe(100); // the token at 100 ms is spoken for
    let got = false;
    const p = b.acquire().then(() => (got = true));
    c.advance(199);
    await Promise.resolve();
    expect(got).toBe(false);
    c.advance(1);
    await p;
    expect(got).toBe(true);
  });
});

describe("limiterFromFlags follows client-go", () => {
  test("0 means the defaults 5 qps / burst 10", () => {
    const l = limiterFromFlags(0, 0)!;
    expect([l.qps, l.burst]).toEqual([5, 10]);
  });
  test("burst 0 alone means 10", () => {
    const l = limiterFromFlags(50, 0)!;
    expect([l.qps, l.burst]).toEqual([50, 10]);
  });
  test("explicit values are kept", () => {
    const l = limiterFromFlags(20, 5)!;
    expect([l.qps, l.burst]).toEqual([20, 5]);
  });
  test("a negative qps disables the limiter", () => {
    expect(limiterFromFlags(-1, 10)).toBeUndefined();
  });
  test("rateFromFlags, which the work queues' buckets take, reads the flags the same way", () => {
    expect(rateFromFlags(0, 0)).toEqual({ qps: 5, burst: 10 });
    expect(rateFromFlags(50, 0)).toEqual({ qps: 50, burst: 10 });
    expect(rateFromFlags(20, 5)).toEqual({ qps: 20, burst: 5 });
    expect(rateFromFlags(-1, 10)).toBeUndefined();
  });
});
