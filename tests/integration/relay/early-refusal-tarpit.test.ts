// Issue 17 leftover (a): the failed-lookup tarpit (shared/relay/tarpit.ts) held only lookups that reached the owner
// resolver, so a closed loop of the proxy's early refusals (no X-Access-Token: 401; a host naming no sandbox: 400;
// an unparsable target: 400; an envd-internal path: 404) still got hundreds of answers a second from one address.
// Each is now a failed lookup: past the budget its answer waits, and the answer is still the relay's envelope.
// A request the proxy answers itself with success (`/healthz`) is never held.
import { afterAll, beforeAll, expect, test } from "bun:test";
import net from "node:net";
import { serveTarpitRelay } from "#tests/support/tarpit-relay.ts";

const DOMAIN = "early.test";
// A slow refill (1/s), so the held answers of one test do not earn the next request a token of its own.
const TARPIT = { ratePerS: 1, burst: 10, delayMs: 200, maxHeld: 64 };
const SANDBOX_HOST = `49983-sb-0123456789abcdef.${DOMAIN}`;
let proxy: ReturnType<typeof Bun.serve>;

beforeAll(() => {
  proxy = serveTarpitRelay({ domain: DOMAIN, envdSecret: "early-secret", tarpit: TARPIT });
});
afterAll(() => proxy?.stop(true));

const noToken = () => fetch(`http://127.0.0.1:${proxy.port}/health`, { headers: { host: SANDBOX_HOST } });
const noSandbox = () => fetch(`http://127.0.0.1:${proxy.port}/health`, { headers: { host: "elsewhere.example", "x-access-token": "a".repeat(96) } });
const internalPath = () => fetch(`http://127.0.0.1:${proxy.port}/init`, { headers: { host: SANDBOX_HOST, "x-access-token": "a".repeat(96) } });
const healthz = () => fetch(`http://127.0.0.1:${proxy.port}/healthz`, { headers: { host: `127.0.0.1:${proxy.port}` } });

/** One raw request with a target fetch would not send (a malformed percent escape); resolves with the status. */
function rawStatus(target: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(proxy.port!, "127.0.0.1");
    let got = "";
    sock.on("data", (c) => {
      got += c.toString("latin1");
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m) {
        sock.destroy();
        resolve(Number(m[1]));
      }
    });
    sock.on("error", reject);
    sock.write(`GET ${target} HTTP/1.1\r\nHost: ${SANDBOX_HOST}\r\nConnection: close\r\n\r\n`);
  });
}

/** A closed loop of `op` for `ms`: how many answers it got, by status. */
async function loop(op: () => Promise<Response>, ms: number): Promise<{ sent: number; statuses: Record<number, number> }> {
  const statuses: Record<number, number> = {};
  let sent = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const r = await op();
    await r.text();
    statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    sent++;
  }
  return { sent, statuses };
}

test("closed loops of missing-token and no-sandbox refusals from one address get their burst, then a few answers a second", async () => {
  const [a, b] = await Promise.all([loop(noToken, 1_000), loop(noSandbox, 1_000)]);
  expect(a.statuses).toEqual({ 401: a.sent });
  expect(b.statuses).toEqual({ 400: b.sent });
  // One budget for the address: burst 10 + 1/s, plus two held answers every 200 ms: about 20 in the second
  // (without the tarpit: hundreds).
  expect(a.sent + b.sent).toBeGreaterThanOrEqual(10);
  expect(a.sent + b.sent).toBeLessThan(40);
});

/**
 * Whether one of up to three tries of `call` waited the tarpit's delay (each answer checked by `check`). On a loaded
 * machine a token can refill (1/s) between two of the test's requests, so a single try may be answered at once; a
 * refusal the tarpit does not cover is never held, however often it is tried.
 */
async function heldOnce<T>(call: () => Promise<T>, check: (answer: T) => Promise<void>): Promise<boolean> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const t0 = performance.now();
    const answer = await call();
    const ms = performance.now() - t0;
    await check(answer);
    if (ms >= TARPIT.delayMs - 5) return true;
  }
  return false;
}

test("past the budget, an internal path, an unparsable target and a missing token are each answered late with the envelope", async () => {
  for (let i = 0; i < TARPIT.burst + 5; i++) await (await noToken()).text();
  expect(await heldOnce(internalPath, async (r) => expect([r.status, await r.json()]).toEqual([404, { code: 404, message: "not found" }]))).toBe(true);
  expect(await heldOnce(() => rawStatus("/files%zz"), async (status) => expect(status).toBe(400))).toBe(true);
  expect(await heldOnce(noToken, async (m) => expect([m.status, await m.json()]).toEqual([401, { code: 401, message: "missing X-Access-Token" }]))).toBe(true);
});

test("the proxy's own health answer is never held, even from an address past its budget", async () => {
  for (let i = 0; i < TARPIT.burst + 5; i++) await (await noToken()).text();
  const t0 = performance.now();
  for (let i = 0; i < 5; i++) expect((await healthz()).status).toBe(204);
  expect(performance.now() - t0).toBeLessThan(TARPIT.delayMs);
});
