import { describe, expect, test } from "bun:test";
import { DEFAULT_RETRY_AFTER_SECONDS, MAX_RETRY_AFTER_SECONDS, explainNoCapacity, hiddenByStale } from "#shared/fleet/index.ts";
import type { PoolKey } from "#shared/sandboxd/index.ts";

const KEY: PoolKey = { template: "img:1", net: "none", size: "small" };
const pool = (warm: number, target: number) => ({ ...KEY, warm, target });

describe("explainNoCapacity", () => {
  test("names the key, the nodes considered and stale, the warm/target seen, and retries after the measured refill", () => {
    const a = explainNoCapacity({
      key: KEY,
      fresh: [
        { address: "n1:1", pools: [pool(0, 2)] },
        { address: "n2:1", pools: [] },
      ],
      stale: 1,
      refillMs: 3_200,
    });
    expect(a.message).toBe(
      'no warm sandbox available for pool (template="img:1" net="none" size="small"): 3 node(s) considered, 1 stale (left out), ' +
        "warm/target per fresh node [0/2, -]; a node refills one in about 3.2s (measured); retry after 4s",
    );
    expect(a.retryAfterSeconds).toBe(4);
    expect([a.warm, a.target]).toEqual([0, 2]);
  });

  test("without a measured refill the default Retry-After; without any warm target none at all, and the message says why", () => {
    expect(explainNoCapacity({ key: KEY, fresh: [{ address: "n1:1", pools: [pool(0, 1)] }] }).retryAfterSeconds).toBe(DEFAULT_RETRY_AFTER_SECONDS);
    const empty = explainNoCapacity({ key: KEY, fresh: [], stale: 2 });
    expect(empty.retryAfterSeconds).toBeUndefined();
    expect(empty.message).not.toContain("retry after");
    expect(empty.message).toContain("2 node(s) considered, 2 stale (left out)");
    expect(empty.message).toContain("no fresh node holds a warm target for this pool");
  });

  test("a node without an address is counted apart; a long fleet is summarised, not listed", () => {
    const many = Array.from({ length: 12 }, (_, i) => ({ address: i === 0 ? "" : `n${i}:1`, pools: [pool(0, 1)] }));
    const a = explainNoCapacity({ key: KEY, fresh: many, refillMs: 500 });
    expect(a.message).toContain("1 without an address");
    expect(a.message).toContain("[0/1, 0/1, 0/1, 0/1, 0/1, 0/1, 0/1, 0/1, +4 more]");
    expect(a.retryAfterSeconds).toBe(1); // never 0
    expect(explainNoCapacity({ key: KEY, fresh: many, refillMs: 10 * 60_000 }).retryAfterSeconds).toBe(MAX_RETRY_AFTER_SECONDS);
  });

  test("hiddenByStale counts the sandboxes the stale nodes list", () => {
    const e = { id: "x", name: "ns/x", namespace: "ns", phase: "Running" as const };
    expect(hiddenByStale([{ entries: [e, e] }, { entries: [e] }])).toBe(3);
  });
});
