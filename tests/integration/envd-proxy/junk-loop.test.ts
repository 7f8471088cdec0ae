// Issue 17, claim 2 (docs/hostile-tenants.md "The junk loop"): a closed loop of lookups for sandboxes nobody holds
// (the next sent as soon as the last is answered) used to get ~1,300 answers a second from one address and with
// them most turns of the proxy's one JS thread. Past the failed-lookup budget its answers wait, so the loop gets a
// few a second; the answers are still the 502 envelope.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { serveTarpitRelay } from "#tests/support/tarpit-relay.ts";

const DOMAIN = "junk.test";
const TARPIT = { ratePerS: 5, burst: 10, delayMs: 200, maxHeld: 64 };
let proxy: ReturnType<typeof Bun.serve>;

beforeAll(() => {
  proxy = serveTarpitRelay({ domain: DOMAIN, envdSecret: "junk-secret", tarpit: TARPIT });
});
afterAll(() => proxy?.stop(true));

const junk = () =>
  fetch(`http://127.0.0.1:${proxy.port}/health`, {
    headers: { host: `49983-sb-${randomBytes(8).toString("hex")}.${DOMAIN}`, "x-access-token": randomBytes(32).toString("hex") },
  });

test("two closed loops of junk lookups from one address get their burst, then a few answers a second", async () => {
  const statuses: Record<number, number> = {};
  let sent = 0;
  const end = performance.now() + 1_000;
  const loop = async () => {
    while (performance.now() < end) {
      const r = await junk();
      await r.text();
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      sent++;
    }
  };
  await Promise.all([loop(), loop()]);
  expect(statuses).toEqual({ 502: sent });
  // burst 10 + 5/s, plus two held answers every 200 ms: about 25 in the second (without the tarpit: hundreds).
  expect(sent).toBeGreaterThanOrEqual(10);
  expect(sent).toBeLessThan(40);
});

test("a held answer is the relay's JSON envelope, and comes after the delay", async () => {
  for (let i = 0; i < TARPIT.burst + 5; i++) await (await junk()).text();
  // The budget refills at 5/s while a held answer waits its 200 ms, so one lookup after another alternates held and
  // answered; four at once meet a bucket of at most one token, so at least three of them wait.
  const timed = await Promise.all(
    Array.from({ length: 4 }, async () => {
      const t0 = performance.now();
      const r = await junk();
      const body: unknown = await r.json();
      return { ms: performance.now() - t0, status: r.status, body };
    }),
  );
  expect(timed.filter((t) => t.ms >= TARPIT.delayMs - 5).length).toBeGreaterThanOrEqual(3);
  for (const t of timed) {
    expect(t.status).toBe(502);
    expect(t.body).toEqual({ code: 502, message: "sandbox was not found" });
  }
});
