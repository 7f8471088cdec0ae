// The relay's bounds (limits.ts): slots per sandbox, per client and in all; the buffer budget and each stream's
// share of it, with the WebSocket overdraft that lets one frame finish over the budget at a time.
import { expect, test } from "bun:test";
import { BufferBudget, BufferShare, RelaySlots, SHARE_FLOOR_BYTES } from "#shared/relay/limits.ts";

test("slots: the per-sandbox cap answers 429, the global cap 503, and a release gives the slot back once", () => {
  const slots = new RelaySlots({ maxRelays: 3, maxRelaysPerSandbox: 2, maxRelaysPerClient: 0, maxRelaysPerNamespace: 0 });
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
  const slots = new RelaySlots({ maxRelays: 10, maxRelaysPerSandbox: 10, maxRelaysPerClient: 1, maxRelaysPerNamespace: 0 });
  expect("release" in slots.acquire("a", "1.1.1.1")).toBe(true);
  expect(slots.acquire("b", "1.1.1.1")).toEqual({ status: 429, cap: "client", message: "too many concurrent requests from this client (limit 1)" });
  expect("release" in slots.acquire("b", "2.2.2.2")).toBe(true);
  // No address known: no per-client count.
  expect("release" in slots.acquire("c", undefined)).toBe(true);
});

test("slots: the per-namespace cap answers 429 naming the tenant, so one tenant cannot take every slot; other tenants and claims with no namespace are unaffected", () => {
  const slots = new RelaySlots({ maxRelays: 10, maxRelaysPerSandbox: 10, maxRelaysPerClient: 0, maxRelaysPerNamespace: 2 });
  const a1 = slots.acquire("sb_a1", undefined, "team-a");
  expect("release" in a1).toBe(true);
  expect("release" in slots.acquire("sb_a2", undefined, "team-a")).toBe(true);
  // A third sandbox of the same tenant: refused, although the process and that sandbox have room.
  expect(slots.acquire("sb_a3", undefined, "team-a")).toEqual({ status: 429, cap: "namespace", message: "too many concurrent requests to this tenant's sandboxes (limit 2)" });
  expect("release" in slots.acquire("sb_b1", undefined, "team-b")).toBe(true);
  expect("release" in slots.acquire("sb_x", undefined, "")).toBe(true);
  if ("release" in a1) a1.release();
  expect("release" in slots.acquire("sb_a3", undefined, "team-a")).toBe(true);
});

test("slots (issue 27): relays with no credential count in public buckets only, never in the owner's namespace or sandbox caps, and never fill the process", () => {
  const slots = new RelaySlots({ maxRelays: 10, maxRelaysPerSandbox: 2, maxRelaysPerClient: 0, maxRelaysPerNamespace: 2, maxPublicRelays: 20, maxPublicRelaysPerSandbox: 3, maxPublicRelaysPerClient: 2 });
  const pub = (sandbox: string, client: string) => slots.acquire(sandbox, client, "team-a", true);
  expect("release" in pub("sb_a1", "9.0.0.1")).toBe(true);
  expect("release" in pub("sb_a1", "9.0.0.1")).toBe(true);
  expect(pub("sb_a1", "9.0.0.1")).toEqual({ status: 429, cap: "public_client", message: "too many concurrent requests without a token from this client (limit 2)" });
  expect("release" in pub("sb_a1", "9.0.0.2")).toBe(true);
  expect(pub("sb_a1", "9.0.0.3")).toEqual({ status: 429, cap: "public_sandbox", message: "too many concurrent requests without a token to this sandbox (limit 3)" });
  // The owner's token holders still have their whole sandbox and namespace caps.
  expect("release" in slots.acquire("sb_a1", "9.0.0.1", "team-a")).toBe(true);
  expect("release" in slots.acquire("sb_a1", "9.0.0.1", "team-a")).toBe(true);
  expect(slots.acquire("sb_a1", "9.0.0.1", "team-a")).toMatchObject({ cap: "sandbox" });
  expect(slots.activePublic).toBe(3);
  expect(slots.active).toBe(5);
  // --max-public-relays is taken as at most --max-relays - 1: public relays alone leave a slot for a token holder.
  const all = new RelaySlots({ maxRelays: 4, maxRelaysPerSandbox: 4, maxRelaysPerClient: 0, maxRelaysPerNamespace: 4, maxPublicRelays: 100, maxPublicRelaysPerSandbox: 100, maxPublicRelaysPerClient: 0 });
  for (let i = 0; i < 3; i++) expect("release" in all.acquire(`sb_${i}`, `9.0.0.${i}`, "team-a", true)).toBe(true);
  expect(all.acquire("sb_9", "9.0.0.9", "team-a", true)).toEqual({ status: 503, cap: "public_global", message: "the proxy is at its capacity for requests without a token; retry later" });
  const owner = all.acquire("sb_0", "1.1.1.1", "team-a");
  expect("release" in owner).toBe(true);
  if ("release" in owner) owner.release();
  expect(all.activePublic).toBe(3);
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
