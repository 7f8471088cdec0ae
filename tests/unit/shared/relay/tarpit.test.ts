// The failed-lookup tarpit (shared/relay/tarpit.ts): within its budget a failure is answered at once, past it the
// answer waits, the budget is per client address, an abort ends the wait, and the number held at once is capped.
import { expect, test } from "bun:test";
import { FakeClock, settle } from "#shared/clock/index.ts";
import { FailedLookupTarpit } from "#shared/relay/tarpit.ts";

const OPTS = { ratePerS: 1, burst: 3, delayMs: 250, maxHeld: 2 };

test("a client's failures past its burst wait delayMs; another client's do not", async () => {
  const clock = new FakeClock();
  const t = new FailedLookupTarpit(OPTS, clock);
  for (let i = 0; i < 3; i++) expect(await t.failed("1.1.1.1")).toBe(false);
  let done = false;
  const held = t.failed("1.1.1.1").then((h) => ((done = true), h));
  await settle();
  expect(done).toBe(false);
  expect(t.held).toBe(1);
  expect(await t.failed("2.2.2.2")).toBe(false);
  await clock.tick(249);
  expect(done).toBe(false);
  await clock.tick(1);
  expect(await held).toBe(true);
  expect(t.held).toBe(0);
});

test("the budget refills at ratePerS", async () => {
  const clock = new FakeClock();
  const t = new FailedLookupTarpit(OPTS, clock);
  for (let i = 0; i < 3; i++) await t.failed("a");
  await clock.tick(1_000);
  expect(await t.failed("a")).toBe(false);
});

test("an abort ends the wait at once; past maxHeld answers are not held", async () => {
  const clock = new FakeClock();
  const t = new FailedLookupTarpit(OPTS, clock);
  for (let i = 0; i < 3; i++) await t.failed("a");
  const ac = new AbortController();
  const first = t.failed("a", ac.signal);
  const second = t.failed("a");
  await settle();
  expect(t.held).toBe(2);
  expect(await t.failed("a")).toBe(false); // the cap: a third is answered at once
  ac.abort();
  expect(await first).toBe(true);
  expect(t.held).toBe(1);
  await clock.tick(250);
  await second;
  expect(t.held).toBe(0);
});
