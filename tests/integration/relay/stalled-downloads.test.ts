// Issue 17 case 4: 200 stalled downloads from one client cannot take the proxy's memory. Past the per-sandbox cap
// the proxy answers 429 with its JSON envelope; what the open ones buffer is bounded by the global budget; a
// second client's requests to another sandbox still succeed; once the stalled clients leave every gauge is idle.
// sandbox-e2b runs as its own process, with the default bounds, so its RSS is its own.
import { afterAll, beforeAll, expect, test } from "bun:test";
import net from "node:net";
import { DEFAULT_RELAY_LIMITS } from "#shared/relay/limits.ts";
import { countedBytes } from "../e2b/guest.ts";
import { currentRss, e2bProcessFixture, spawnE2b, type Child, type E2bProcessFixture } from "../e2b/process.ts";
import { waitFor } from "#tests/support/wait.ts";
import { createSandbox, gauge, e2bListeners } from "./hostile.ts";

const ROOT = "root-stl";
const DOMAIN = "stl.test";
const KEY = "e2b_stlstlstlstlstl";
const MiB = 1024 * 1024;
/** The stated bound: 200 stalled downloads add less than this to the proxy's resident set. */
const RSS_BOUND_MB = 200;
/** Every default relay stalled adds less than this (docs/envd-relay.md "Bounds": the HTTP share of the worst case). */
const ALL_STALLED_BOUND_MB = 160;
let fixture: E2bProcessFixture;
let child: Child;
let api = "";
let proxyPort = 0;
let proxyUrl = "";
/** The process's metrics listener: the proxy's gauges are served there only. */
let metricsUrl = "";

beforeAll(async () => {
  fixture = await e2bProcessFixture({ rootToken: ROOT, apiKey: KEY, domain: DOMAIN });
  // The per-sandbox and global caps are under test here, with one tenant's sandbox: its namespace cap is off
  // (namespace-cap.test.ts covers that one).
  child = spawnE2b([...fixture.args, "--metrics-bind-address=127.0.0.1:0", "--envd-proxy-max-relays-per-namespace=0"]);
  ({ api, proxyPort, proxyUrl, metricsUrl } = await e2bListeners(child));
});
// Guests first: their sockets close the tunnels, so the proxy has no open stream to drain on SIGTERM.
afterAll(async () => {
  await child?.stop();
  await fixture?.stop();
}, 30_000);

interface Stalled {
  sock: net.Socket;
  status: Promise<number>;
  /** The whole first read (head and the start of the body). */
  first: Promise<string>;
}

/** A download whose client reads its first chunk (to learn the status) and then never reads again. */
function stalledDownload(head: string): Stalled {
  const sock = net.connect({ host: "127.0.0.1", port: proxyPort });
  sock.on("error", () => undefined);
  let firstText = "";
  const first = new Promise<string>((resolve) => {
    sock.once("data", (c: Buffer) => {
      sock.pause();
      firstText = c.toString("latin1");
      resolve(firstText);
    });
    sock.once("close", () => resolve(firstText));
  });
  sock.write(head);
  return { sock, first, status: first.then((t) => Number(/^HTTP\/1\.1 (\d{3})/.exec(t)?.[1] ?? 0)) };
}

test("200 stalled downloads from one client: RSS bounded, 429 with a JSON body past the per-sandbox cap, a second client still served, gauges idle afterwards", async () => {
  const a = await createSandbox(api, KEY);
  const b = await createSandbox(api, KEY);
  const bHeaders = { host: `49983-${b.id}.${DOMAIN}`, "x-access-token": b.token };
  // Warm the path (JIT, one-off allocations) so they are not counted as growth.
  expect(await countedBytes(await fetch(`${proxyUrl}/download?size=${8 * MiB}`, { headers: bHeaders }))).toBe(8 * MiB);
  const before = await currentRss(child.proc.pid);

  const head = `GET /download?size=${4096 * MiB} HTTP/1.1\r\nHost: 49983-${a.id}.${DOMAIN}\r\nX-Access-Token: ${a.token}\r\n\r\n`;
  const stalled = Array.from({ length: 200 }, () => stalledDownload(head));
  const statuses = await Promise.all(stalled.map((s) => s.status));
  const ok = statuses.filter((s) => s === 200).length;
  const refused = statuses.filter((s) => s === 429).length;
  const cap = DEFAULT_RELAY_LIMITS.maxRelaysPerSandbox;
  expect(ok).toBe(cap);
  expect(refused).toBe(200 - cap);
  const refusal = await stalled[statuses.indexOf(429)]!.first;
  expect(refusal.toLowerCase()).toContain("content-type: application/json");
  expect(JSON.parse(refusal.slice(refusal.indexOf("\r\n\r\n") + 4).trim().split("\n")[0]!)).toEqual({ code: 429, message: `too many concurrent requests to this sandbox (limit ${cap})` });

  // Let every buffer on the way fill: the proxy's resident set stops growing (two steady samples 500 ms apart).
  let last = 0;
  let steady = 0;
  for (let i = 0; i < 60 && steady < 2; i++) {
    await Bun.sleep(500);
    const now = await currentRss(child.proc.pid);
    steady = Math.abs(now - last) < MiB ? steady + 1 : 0;
    last = now;
  }
  const rss = await currentRss(child.proc.pid);
  const grewMb = (rss - before) / MiB;
  const buffered = await gauge(metricsUrl, "sandbox_envd_proxy_buffered_bytes");
  console.log(`${ok} stalled downloads open, ${refused} refused 429: proxy RSS +${grewMb.toFixed(1)} MB, buffered ${(buffered / MiB).toFixed(1)} MiB (budget ${DEFAULT_RELAY_LIMITS.bufferBytes / MiB} MiB)`);
  expect(grewMb).toBeLessThan(RSS_BOUND_MB);
  // Over the budget every stream stops at its next read; what was in flight when it crossed (one socket read each,
  // up to about half a MiB) is the overshoot.
  expect(buffered).toBeLessThanOrEqual(DEFAULT_RELAY_LIMITS.bufferBytes + cap * 512 * 1024);
  expect(await gauge(metricsUrl, "sandbox_envd_proxy_active_relays")).toBe(cap);

  // Another client, another sandbox: served, quickly, whole.
  const t0 = performance.now();
  const health = await fetch(`${proxyUrl}/health`, { headers: bHeaders });
  expect(health.status).toBe(204);
  const t1 = performance.now();
  expect(await countedBytes(await fetch(`${proxyUrl}/download?size=${16 * MiB}`, { headers: bHeaders }))).toBe(16 * MiB);
  console.log(`second client: /health in ${(t1 - t0).toFixed(0)} ms, a 16 MiB download in ${(performance.now() - t1).toFixed(0)} ms`);

  // Every relay the defaults allow, stalled: more sandboxes, each at its own cap, up to --max-relays.
  const more: Stalled[] = [];
  for (let i = 0; i < DEFAULT_RELAY_LIMITS.maxRelays / cap - 1; i++) {
    const x = await createSandbox(api, KEY);
    const h = `GET /download?size=${4096 * MiB} HTTP/1.1\r\nHost: 49983-${x.id}.${DOMAIN}\r\nX-Access-Token: ${x.token}\r\n\r\n`;
    for (let j = 0; j < cap; j++) more.push(stalledDownload(h));
  }
  expect((await Promise.all(more.map((s) => s.status))).filter((st) => st === 200).length).toBe(DEFAULT_RELAY_LIMITS.maxRelays - cap);
  const e = await createSandbox(api, KEY);
  const over = stalledDownload(`GET /health HTTP/1.1\r\nHost: 49983-${e.id}.${DOMAIN}\r\nX-Access-Token: ${e.token}\r\n\r\n`);
  expect(await over.status).toBe(503);
  const text = await over.first;
  expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4).trim())).toEqual({ code: 503, message: "the proxy is at its relay capacity; retry later" });
  last = 0;
  steady = 0;
  for (let i = 0; i < 60 && steady < 2; i++) {
    await Bun.sleep(500);
    const now = await currentRss(child.proc.pid);
    steady = Math.abs(now - last) < MiB ? steady + 1 : 0;
    last = now;
  }
  const full = await currentRss(child.proc.pid);
  console.log(`all ${DEFAULT_RELAY_LIMITS.maxRelays} relays stalled: proxy RSS ${(full / MiB).toFixed(1)} MB (+${((full - before) / MiB).toFixed(1)} MB), buffered ${((await gauge(metricsUrl, "sandbox_envd_proxy_buffered_bytes")) / MiB).toFixed(1)} MiB`);
  // The chart's limit is 512 Mi: the defaults keep a process with every relay stalled well inside it, and inside
  // the HTTP share of the worst case docs/envd-relay.md "Bounds" states (128 x 1.25 MiB; before the 256 KiB
  // queue: +240 MB here).
  expect(full / MiB).toBeLessThan(448);
  expect((full - before) / MiB).toBeLessThan(ALL_STALLED_BOUND_MB);

  for (const s of [...stalled, ...more, over]) s.sock.destroy();
  await waitFor(
    "every gauge back at idle",
    async () =>
      (await gauge(metricsUrl, "sandbox_envd_proxy_open_tunnels")) === 0 &&
      (await gauge(metricsUrl, "sandbox_envd_proxy_active_relays")) === 0 &&
      (await gauge(metricsUrl, "sandbox_envd_proxy_buffered_bytes")) === 0,
    20_000,
    100,
  );
}, 240_000);
