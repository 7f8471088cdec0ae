// The client-side rate limit measured against a real kube-apiserver: with qps 20 and burst 5, 45 requests fired at
// once finish as 5 at once and then 20 a second (about 2 s in all), while the same 45 without a limiter finish far
// sooner, so the shape comes from our limiter, not from the server.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { KubeClient } from "#shared/kube/client.ts";
import { type KubeConnection, loadKubeConnection } from "#shared/kube/connection.ts";
import { limiterFromFlags, TokenBucket } from "#shared/kube/rate-limit.ts";
import { Namespaces } from "#shared/kube/resources.ts";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";

let cluster: TestCluster;
let conn: KubeConnection;

beforeAll(async () => {
  cluster = await startKubeApiserver();
  conn = await loadKubeConnection({ KUBECONFIG: cluster.kubeconfig() }, { serviceAccountDir: "/nonexistent" });
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
});

/** Fires n GETs at once; returns each completion time in ms from the start, sorted. */
async function fire(client: KubeClient, n: number): Promise<number[]> {
  await client.get(Namespaces, "default"); // warm the TLS connection outside the measurement
  const t0 = performance.now();
  const done = await Promise.all(Array.from({ length: n }, () => client.get(Namespaces, "default").then(() => performance.now() - t0)));
  return done.sort((a, b) => a - b);
}

test("qps 20 burst 5 holds: 5 at once, then 20 per second", async () => {
  const qps = 20;
  const burst = 5;
  const n = 45;
  // Warm up `burst` connections (TLS handshakes are not what we measure), then let the bucket refill.
  const client = new KubeClient(conn, { limiter: new TokenBucket(qps, burst) });
  await Promise.all(Array.from({ length: burst }, () => client.get(Namespaces, "default")));
  await Bun.sleep((burst / qps) * 1000 + 50);
  const t0 = performance.now();
  const times = await Promise.all(Array.from({ length: n }, () => client.get(Namespaces, "default").then(() => performance.now() - t0)));
  times.sort((a, b) => a - b);
  const total = times[n - 1]!;
  const burstDone = times[burst - 1]!;
  // Completions in each 500 ms window after the burst.
  const windows = [0, 1, 2, 3].map((i) => times.filter((t) => t >= 50 + i * 500 && t < 50 + (i + 1) * 500).length);
  const steadyRate = (n - burst) / ((times[n - 1]! - times[burst]!) / 1000 + 1 / qps);
  console.log(
    `rate limit qps=${qps} burst=${burst}: ${n} requests in ${total.toFixed(0)} ms (ideal ${(((n - burst) / qps) * 1000).toFixed(0)} ms); ` +
      `first ${burst} done by ${burstDone.toFixed(0)} ms; in the first 50 ms: ${times.filter((t) => t < 50).length}; ` +
      `per 500 ms window after: ${windows.join(", ")}; steady rate ${steadyRate.toFixed(1)}/s`,
  );
  // The 6th token exists only at 50 ms, so at most `burst` can be done before; the burst itself is not held back.
  expect(times.filter((t) => t < 45).length).toBeLessThanOrEqual(burst);
  expect(burstDone).toBeLessThan(250);
  for (const w of windows) expect(w).toBeGreaterThanOrEqual(9), expect(w).toBeLessThanOrEqual(11);
  expect(total).toBeGreaterThan(((n - burst) / qps) * 1000 - 60);
  expect(total).toBeLessThan(((n - burst) / qps) * 1000 + 400);
  expect(steadyRate).toBeGreaterThan(qps * 0.9);
  expect(steadyRate).toBeLessThan(qps * 1.1);
  expect(client.requestCount()).toBe(n + burst);
});

test("without a limiter (negative qps) the same requests are not held back", async () => {
  expect(limiterFromFlags(-1, 0)).toBeUndefined();
  const times = await fire(new KubeClient(conn), 45);
  console.log(`no limiter: 45 requests in ${times[44]!.toFixed(0)} ms`);
  expect(times[44]!).toBeLessThan(1500);
});

test("the client-go defaults (flags 0/0 -> 5 qps, burst 10) hold too", async () => {
  const client = new KubeClient(conn, { limiter: limiterFromFlags(0, 0) });
  const t0 = performance.now();
  const times = await Promise.all(Array.from({ length: 15 }, () => client.get(Namespaces, "default").then(() => performance.now() - t0)));
  times.sort((a, b) => a - b);
  console.log(`defaults 5/10: 15 requests in ${times[14]!.toFixed(0)} ms (ideal 1000 ms); first 10 by ${times[9]!.toFixed(0)} ms`);
  expect(times[9]!).toBeLessThan(500); // new TLS connections, not the limiter
  expect(times[14]!).toBeGreaterThan(950);
  expect(times[14]!).toBeLessThan(1400);
});
