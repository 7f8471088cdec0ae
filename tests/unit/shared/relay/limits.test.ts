// The relay's bounds (limits.ts): slots per sandbox, per client and in all; the buffer budget and each stream's
// share of it, with the WebSocket overdraft that lets one frame finish over the budget at a time.
import { expect, test } from "bun:test";
import { BufferBudget, BufferShare, RelaySlots, SHARE_FLOOR_BYTES } from "#shared/relay/limits.ts";

test("slots: the per-sandbox cap answers 429, the global cap 503, and a release gives the slot back once", () => {
  const slots = new RelaySlots({ maxRelays: 3, maxRelaysPerSandbox: 2, maxRelaysPerClient: 0 });
  const a1 = slots.acquire("a", "1.1.1.1");
  const a2 = slots.acquire("a", "1.1.1.1");
  expect(slots.acquire("a", "2.2.2.2")).toEqual({ status: 429, cap: "sandbox", message: "too many concurrent requests to this sandbox (limit 2)" });
  const b1 = slots.acquire("b", undefined);
  expect("release" in b1).toBe(true);
  expect(slots.acquire("c", undefined)).toEqual({ status: 503, cap: "global", message: "the proxy is at its relay capacity; retry later" });
  expect(slots.active).toBe(3);
  if (!("release" in a1) || !("release" in a2)) throw new Error("expected slots");
  a1.release();
  a1.release(); // twice is once
  expect(slots.active).toBe(2);
  expect("release" in slots.acquire("a", undefined)).toBe(true);
  expect(slots.acquire("a", undefined)).toMatchObject({ status: 503 });
});

test("slots: the per-client cap (when set) answers 429 naming the client, and other clients are unaffected", () => {
  const slots = new RelaySlots({ maxRelays: 10, maxRelaysPerSandbox: 10, maxRelaysPerClient: 1 });
  expect("release" in slots.acquire("a", "1.1.1.1")).toBe(true);
  expect(slots.acquire("b", "1.1.1.1")).toEqual({ status: 429, cap: "client", message: "too many concurrent requests from this client (limit 1)" });
  expect("release" in slots.acquire("b", "2.2.2.2")).toBe(true);
  // No address known: no per-client count.
  expect("release" in slots.acquire("c", undefined)).toBe(true);
});

test("budget: a share over the floor may not read while the total is over; under the floor it always may", () => {
  const budget = new BufferBudget(1024 * 1024);
  const slow = new BufferShare(budget);
  const fast = new BufferShare(budget);
  expect(slow.set(1024 * 1024)).toBe(false);
  expect(budget.over()).toBe(true);
  expect(fast.set(SHARE_FLOOR_BYTES - 1)).toBe(true); // a client that keeps up is never held back
  expect(fast.set(SHARE_FLOOR_BYTES)).toBe(false);
  slow.release();
  expect(budget.bytes).toBe(SHARE_FLOOR_BYTES);
  expect(fast.mayRead()).toBe(true);
});

test("budget: waiters wake once it has room, and the overdraft is one stream's at a time", () => {
  const budget = new BufferBudget(100);
  const a = new BufferShare(budget);
  const b = new BufferShare(budget);
  a.set(150);
  let woken = 0;
  b.whenUnder(() => woken++);
  b.whenUnder(() => woken++); // one pending call per share
  expect(a.takeOverdraft()).toBe(true);
  expect(b.takeOverdraft()).toBe(false);
  expect(a.takeOverdraft()).toBe(true);
  a.releaseOverdraft();
  expect(woken).toBe(1); // the overdraft's release wakes the waiters to try again
  expect(b.takeOverdraft()).toBe(true);
  b.whenUnder(() => woken++);
  a.release();
  expect(woken).toBe(2);
  expect(budget.bytes).toBe(0);
});
