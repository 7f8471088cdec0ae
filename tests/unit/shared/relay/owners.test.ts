// The owner cache's TTL and overflow rule, and the probe budget (shared/kube's token bucket at 200/s, burst 400), on a FakeClock.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { TokenBucket } from "#shared/kube/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { OwnerCache, OwnerResolver } from "#shared/relay/index.ts";
import { envdAccessToken } from "#shared/e2b/tokens.ts";
import { POD_UID_METADATA_KEY } from "#shared/sandboxd/metadata.ts";
import type { FleetNode } from "#shared/fleet/index.ts";

const owner = (claimId: string) => ({ claimId, address: "n:1", claimToken: "t", accessToken: "a" });

describe("OwnerCache", () => {
  test("an entry lives for its TTL, then is gone", () => {
    const clock = new FakeClock(0);
    const c = new OwnerCache(60_000, 10, clock);
    c.set(owner("sb_1"));
    clock.advance(59_999);
    expect(c.get("sb_1")?.claimId).toBe("sb_1");
    clock.advance(1); // 60_000
    expect(c.get("sb_1")).toBeUndefined();
  });
  test("when full, expired entries go first; if still full, everything is cleared", () => {
    const clock = new FakeClock(0);
    const c = new OwnerCache(100, 2, clock);
    c.set(owner("a"));
    clock.advance(50);
    c.set(owner("b"));
    clock.advance(70); // 120: a expired, b alive
    c.set(owner("c"));
    expect(c.get("a")).toBeUndefined();
    expect(c.get("b")?.claimId).toBe("b");
    expect(c.size).toBe(2);
    c.set(owner("d")); // full, nothing expired: clear, then insert
    expect(c.size).toBe(1);
    expect(c.get("d")?.claimId).toBe("d");
  });
  test("drop forgets at once", () => {
    const c = new OwnerCache();
    c.set(owner("x"));
    c.drop("x");
    expect(c.get("x")).toBeUndefined();
  });
});

describe("TokenBucket (probe budget, scenario 25)", () => {
  test("a burst of 400 then refusals until the 200/s rate refills", () => {
    const clock = new FakeClock(0);
    const b = new TokenBucket(200, 400, clock);
    let ok = 0;
    for (let i = 0; i < 401; i++) if (b.tryAcquire()) ok++;
    expect(ok).toBe(400);
    expect(b.tryAcquire()).toBe(false);
    clock.advance(5); // 1 token per 5 ms
    expect(b.tryAcquire()).toBe(true);
    expect(b.tryAcquire()).toBe(false);
    clock.advance(9_995); // 10_000
    let refilled = 0;
    while (b.tryAcquire()) refilled++;
    expect(refilled).toBe(400);
  });
});

describe("OwnerResolver and a Pod's microVM (sandbox-envd-proxy on NodeInventory)", () => {
  test("an inventory entry stamped vk-sandbox.pod-uid is unknown, with no node read; the same entry unstamped is read", async () => {
    const node = (metadata?: Record<string, string>): FleetNode => ({
      name: "n1",
      // Nothing listens here: a read of the node fails, which tells "read and failed" from "never read".
      address: "127.0.0.1:1",
      pools: [],
      templates: [],
      entries: [{ id: "sb_0123456789abcdef", name: "default/web-0", namespace: "default", phase: "Running", ...(metadata ? { metadata } : {}) }],
    });
    const resolver = (n: FleetNode) =>
      new OwnerResolver({
        fleet: { nodes: () => [n], ready: () => Promise.resolve(), stop: () => Promise.resolve() },
        envdSecret: "s",
        rootToken: "r",
        namespace: "",
        log: createLogger({ level: "error", name: "test" }),
      });
    const token = envdAccessToken("s", "sb_0123456789abcdef", "claim-token");
    expect(await resolver(node({ [POD_UID_METADATA_KEY]: "uid-1" })).resolve("sb-0123456789abcdef", token)).toEqual({ kind: "unavailable", reason: "unknown" });
    expect(await resolver(node()).resolve("sb-0123456789abcdef", token)).toEqual({ kind: "unavailable", reason: "node-read-failed" });
  });
});
