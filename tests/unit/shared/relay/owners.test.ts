// The owner cache's TTL and overflow rule, and the probe budget (shared/kube's token bucket at 200/s, burst 400), on a FakeClock.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { TokenBucket } from "#shared/kube/index.ts";
import { OwnerCache } from "#shared/relay/index.ts";

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
