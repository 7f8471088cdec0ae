import { describe, expect, test } from "bun:test";
import { FakeClock, settle } from "#shared/clock/index.ts";
import { backoffDelay, WorkQueue } from "#shared/kube/work-queue.ts";
import { TokenBucket } from "#shared/kube/rate-limit.ts";

/** Wait on a condition by letting promise continuations run, never on wall time (tests/support/wait.ts polls the
 * wall clock; this queue runs on a FakeClock). Bounded so a bug fails rather than hangs. */
async function untilSettled(cond: () => boolean, what = "condition"): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (cond()) return;
    await settle();
  }
  throw new Error(`timed out waiting for ${what}`);
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("WorkQueue", () => {
  test("a key added many times while queued runs once", async () => {
    const clock = new FakeClock(0);
    const seen: string[] = [];
    const q = new WorkQueue({ name: "t", clock, handler: async (k) => void seen.push(k) });
    for (let i = 0; i < 5; i++) q.enqueue("a");
    q.enqueue("b");
    expect(q.length).toBe(2);
    q.start();
    await q.idle();
    expect(seen).toEqual(["a", "b"]);
  });

  test("re-adding a key moves it earlier, never later", async () => {
    const clock = new FakeClock(0);
    const seen: string[] = [];
    const q = new WorkQueue({ name: "t", clock, handler: async (k) => void seen.push(k) });
    q.start();
    q.enqueueAfter("late", 100);
    q.enqueueAfter("mid", 50);
    q.enqueueAfter("late", 10); // moves earlier
    q.enqueueAfter("mid", 500); // does not move later
    await clock.tick(10);
    expect(seen).toEqual(["late"]);
    await clock.tick(40);
    expect(seen).toEqual(["late", "mid"]);
  });

  test("re-adding a key that is running schedules exactly one more run", async () => {
    const clock = new FakeClock(0);
    const gate = deferred();
    let runs = 0;
    const q = new WorkQueue({
      name: "t",
      clock,
      workers: 4,
      handler: async () => {
        runs++;
        if (runs === 1) await gate.promise;
      },
    });
    q.start();
    q.enqueue("k");
    await untilSettled(() => runs === 1, "first run");
    for (let i = 0; i < 10; i++) q.enqueue("k");
    await settle();
    expect(runs).toBe(1); // never two workers on one key
    gate.resolve();
    await q.idle();
    expect(runs).toBe(2);
  });

  test("a failing key backs off 5 ms doubling and success resets the count", async () => {
    const clock = new FakeClock(0);
    const times: number[] = [];
    let fail = 3;
    const q = new WorkQueue({
      name: "t",
      clock,
      handler: async () => {
        times.push(clock.now());
        if (fail-- > 0) throw new Error("boom");
      },
    });
    q.start();
    q.enqueue("k");
    await clock.tick(1000);
    expect(times).toEqual([0, 5, 15, 35]);
    expect(q.failuresOf("k")).toBe(0);
  });

  test("a plain enqueue of a failing key waits the queue's own backoff, not the default one", async () => {
    const clock = new FakeClock(0);
    const times: number[] = [];
    let fail = 1;
    const q = new WorkQueue({
      name: "t",
      clock,
      baseDelayMs: 100,
      handler: async () => {
        times.push(clock.now());
        if (fail-- > 0) throw new Error("boom");
      },
    });
    q.start();
    q.enqueue("k");
    await clock.tick(0);
    q.enqueue("k");
    await clock.tick(1000);
    expect(times).toEqual([0, 100]);
  });

  test("backoff is capped at 1000 s", () => {
    expect(backoffDelay(1)).toBe(5);
    expect(backoffDelay(2)).toBe(10);
    expect(backoffDelay(18)).toBe(5 * 2 ** 17);
    expect(backoffDelay(19)).toBe(1_000_000);
    expect(backoffDelay(500)).toBe(1_000_000);
  });

  test("a key failing 20 times is dropped and logged", async () => {
    const clock = new FakeClock(0);
    let runs = 0;
    const warnings: object[] = [];
    const q = new WorkQueue({
      name: "t",
      clock,
      log: { warn: (o) => void warnings.push(o), debug: () => {} },
      handler: async () => {
        runs++;
        throw new Error("permanent");
      },
    });
    q.start();
    q.enqueue("k");
    await clock.tick(3_000_000);
    expect(runs).toBe(20);
    expect(q.has("k")).toBe(false);
    expect(q.stats().dropped).toBe(1);
    expect(warnings).toHaveLength(1);
  });

  test("plain enqueues are paced by the token bucket after the burst", async () => {
    const clock = new FakeClock(0);
    const times: number[] = [];
    const q = new WorkQueue({
      name: "t",
      clock,
      workers: 8,
      rate: { qps: 10, burst: 2 },
      handler: async () => void times.push(clock.now()),
    });
    q.start();
    for (let i = 0; i < 5; i++) q.enqueue(`k${i}`);
    await clock.tick(1000);
    // Two from the burst at once, then one every 100 ms.
    expect(times).toEqual([0, 0, 100, 200, 300]);
  });

  test("the force path bypasses an exhausted bucket", async () => {
    const clock = new FakeClock(0);
    const seen: string[] = [];
    const q = new WorkQueue({
      name: "t",
      clock,
      rate: { qps: 1, burst: 1 },
      handler: async (k) => void seen.push(k),
    });
    q.start();
    q.enqueue("a");
    q.enqueue("b"); // waits a second for a token
    q.enqueueNow("forced");
    await clock.tick(0);
    expect(seen).toEqual(["a", "forced"]);
    await clock.tick(1000);
    expect(seen).toEqual(["a", "forced", "b"]);
  });

  test("no more than W handlers run at once", async () => {
    const clock = new FakeClock(0);
    const gate = deferred();
    let active = 0;
    let peak = 0;
    const q = new WorkQueue({
      name: "t",
      clock,
      workers: 3,
      handler: async () => {
        active++;
        peak = Math.max(peak, active);
        await gate.promise;
        active--;
      },
    });
    q.start();
    for (let i = 0; i < 10; i++) q.enqueue(`k${i}`);
    await untilSettled(() => active === 3, "three running");
    await settle();
    expect(active).toBe(3);
    gate.resolve();
    await q.idle();
    expect(peak).toBe(3);
    expect(q.stats().processed).toBe(10);
  });

  test("nothing runs before start and nothing after stop", async () => {
    const clock = new FakeClock(0);
    let runs = 0;
    const q = new WorkQueue({ name: "t", clock, handler: async () => void runs++ });
    q.enqueue("a");
    await settle();
    expect(runs).toBe(0);
    q.start();
    await q.idle();
    expect(runs).toBe(1);
    await q.stop();
    q.enqueue("b");
    await clock.tick(10);
    expect(runs).toBe(1);
  });

  test("remove cancels a queued key", async () => {
    const clock = new FakeClock(0);
    let runs = 0;
    const q = new WorkQueue({ name: "t", clock, handler: async () => void runs++ });
    q.start();
    q.enqueueAfter("k", 1000);
    q.remove("k");
    await clock.tick(2000);
    expect(runs).toBe(0);
    expect(clock.pending).toBeLessThanOrEqual(1);
  });

  test("whenSettled resolves once the key's work ran, through its retries; at once for an unknown key", async () => {
    const clock = new FakeClock(0);
    let fail = 2;
    let runs = 0;
    const q = new WorkQueue({
      name: "t",
      clock,
      handler: async () => {
        runs++;
        if (fail-- > 0) throw new Error("boom");
      },
    });
    q.start();
    let unknown = false;
    void q.whenSettled("other").then(() => (unknown = true));
    await settle();
    expect(unknown).toBe(true);
    q.enqueueAfter("k", 10);
    let settled = false;
    void q.whenSettled("k").then(() => (settled = true));
    await clock.tick(10);
    expect(runs).toBe(1);
    expect(settled).toBe(false); // failed: queued again for its retry
    await clock.tick(100);
    expect(runs).toBe(3);
    await settle();
    expect(settled).toBe(true);
  });

  test("whenSettled resolves for a removed key and, at stop, for keys that will never run", async () => {
    const clock = new FakeClock(0);
    const q = new WorkQueue({ name: "t", clock, handler: async () => {} });
    q.start();
    q.enqueueAfter("removed", 1000);
    q.enqueueAfter("stranded", 1000);
    const done: string[] = [];
    void q.whenSettled("removed").then(() => done.push("removed"));
    void q.whenSettled("stranded").then(() => done.push("stranded"));
    q.remove("removed");
    await settle();
    expect(done).toEqual(["removed"]);
    await q.stop();
    await settle();
    expect(done).toEqual(["removed", "stranded"]);
    await q.whenSettled("stranded"); // after stop: at once
  });
});

describe("WorkQueue ordering at scale", () => {
  test("thousands of keys run in due order, FIFO among equal times, with moves and removals", async () => {
    const clock = new FakeClock(0);
    const seen: string[] = [];
    const q = new WorkQueue({ name: "t", clock, handler: async (k) => void seen.push(k) });
    const want: Array<[number, number, string]> = [];
    for (let i = 0; i < 3000; i++) {
      const due = (i * 7919) % 500;
      q.enqueueAfter(`k${i}`, due);
      want.push([due, i, `k${i}`]);
    }
    // Move every tenth key to time 0 and drop every hundred-and-first.
    for (let i = 0; i < 3000; i += 10) {
      q.enqueueAfter(`k${i}`, 0);
      want[i]![0] = 0;
    }
    for (let i = 1; i < 3000; i += 101) q.remove(`k${i}`);
    const expected = want
      .filter(([, i]) => (i - 1) % 101 !== 0)
      .sort((a, b) => a[0] - b[0] || a[1] - b[1])
      .map(([, , k]) => k);
    q.start();
    await clock.tick(600);
    await q.idle();
    expect(seen).toEqual(expected);
  });
});

// Issue 13 item 2: the daemon's limits are stacked as client-go's and virtual-kubelet's are: the sync and status
// queues each pace plain enqueues with a token bucket from --kube-api-qps/--kube-api-burst, and the Kubernetes
// client takes a token of its own bucket (the same flags) for every request. Buckets of one rate in series must
// not lose rate to each other: over T seconds the pipeline completes burst + qps x T keys, as one bucket would.
describe("stacked token buckets (sync queue -> status queue -> client limiter)", () => {
  test("at qps 200 / burst 400, 3,000 queued Pods complete at burst + qps x T, no slower than one bucket", async () => {
    const clock = new FakeClock(0);
    const rate = { qps: 200, burst: 400 };
    const client = new TokenBucket(rate.qps, rate.burst, clock);
    const done: number[] = [];
    const status = new WorkQueue({
      name: "status",
      clock,
      workers: 16,
      rate,
      handler: async () => {
        await client.acquire(); // the status PUT's token
        done.push(clock.monotonic());
      },
    });
    const sync = new WorkQueue({ name: "sync", clock, workers: 16, rate, handler: async (k) => status.enqueue(k) });
    status.start();
    sync.start();
    for (let i = 0; i < 3000; i++) sync.enqueue(`ns/p${i}`);
    for (let t = 0; t < 10_000; t += 50) await clock.tick(50);
    const by = (ms: number) => done.filter((d) => d <= ms).length;
    expect(by(0)).toBe(400); // the burst, at once
    for (const s of [1, 5, 10]) expect(Math.abs(by(s * 1000) - (400 + 200 * s))).toBeLessThanOrEqual(1);
    await Promise.all([sync.stop(), status.stop()]);
  });
});
