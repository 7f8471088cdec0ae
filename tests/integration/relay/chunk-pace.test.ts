// The relay's per-namespace decode budget (shared/relay/limits.ts ChunkPacer, docs/envd-relay.md "Bounds"): a guest
// that frames an endless body in 1-byte chunks is read at most chunkRatePerNamespace chunks a second (100,000, one
// second's burst), however fast its client reads; a body of ordinary chunks is not held back. Before the budget,
// the hostile rig measured such a guest taking the proxy's thread from another tenant (files.write p99 12 ms ->
// 132-316 ms under a contended machine); here the bound itself is asserted, upper bounds only, so a busy machine
// cannot fail it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { DOMAIN, sdkOpts, startStack, type Stack } from "../e2b/harness.ts";
import { startHostileGuest, type HostileGuest } from "#tests/support/hostile/guest.ts";
import { DEFAULT_RELAY_LIMITS } from "#shared/relay/limits.ts";

const RATE = DEFAULT_RELAY_LIMITS.chunkRatePerNamespace;
const PORT = 8080;
let s: Stack;
let guest: HostileGuest;
let sbx: Sandbox;

beforeAll(async () => {
  s = await startStack({ proxy: true, extraFlags: ["--metrics-bind-address=127.0.0.1:0"] });
  guest = await startHostileGuest();
  sbx = await Sandbox.create("base", sdkOpts(s));
  s.cluster.nodes[0]!.attachGuest(sbx.sandboxId.replace(/^sb-/, "sb_"), PORT, guest.port);
});
afterAll(async () => {
  guest?.closeAll();
  await guest?.stop();
  await s?.stop();
});

/** Reads `path` on the sandbox's port for `ms`, then aborts: the payload bytes it got, and how long it read. */
async function readFor(path: string, ms: number): Promise<{ bytes: number; seconds: number }> {
  const ac = new AbortController();
  const started = performance.now();
  const r = await fetch(`${s.proxyUrl}${path}`, {
    headers: { host: `${PORT}-${sbx.sandboxId}.${DOMAIN}`, "x-access-token": (sbx as unknown as { envdAccessToken: string }).envdAccessToken },
    signal: ac.signal,
  });
  expect(r.status).toBe(200);
  let bytes = 0;
  const reader = r.body!.getReader();
  const stop = setTimeout(() => ac.abort(), ms);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
    }
  } catch {
    // aborted at the end of the window
  } finally {
    clearTimeout(stop);
  }
  return { bytes, seconds: (performance.now() - started) / 1000 };
}

test("a guest's 1-byte chunks are decoded at most chunkRatePerNamespace a second (a one-second burst, then paced)", async () => {
  const { bytes, seconds } = await readFor("/endless-chunked", 2_000);
  // Each payload byte is one chunk. The burst, the rate over the window, and the reads decoded before a pause takes
  // hold (a 64 KiB read holds ~11,000 such chunks; the margin is about a dozen). Unpaced, the same read got ~24 MB.
  const bound = RATE + RATE * seconds + 128 * 1024;
  console.log(`1-byte chunks: ${bytes} bytes in ${seconds.toFixed(2)} s (bound ${Math.round(bound)})`);
  expect(bytes).toBeGreaterThan(0);
  expect(bytes).toBeLessThanOrEqual(bound);
  // What an operator sees: the pauses are counted.
  const metrics = await (await fetch(`http://127.0.0.1:${s.mesh.metricsPort}/metrics`)).text();
  expect(Number(/^sandbox_envd_proxy_paced_reads_total (\d+)/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(0);
}, 30_000);

test("a body of 64 KiB chunks is not held back by the budget", async () => {
  // The hostile guest's "stall" case: an endless download in 64 KiB chunks; a few chunks a read.
  const { bytes, seconds } = await readFor("/stall", 1_000);
  console.log(`64 KiB chunks: ${bytes} bytes in ${seconds.toFixed(2)} s`);
  expect(bytes).toBeGreaterThan(RATE + RATE * seconds + 64 * 1024);
}, 30_000);
