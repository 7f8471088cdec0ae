import { describe, expect, test } from "bun:test";
import { FakeClock } from "#shared/clock/index.ts";
import { createIdSource } from "#services/sandboxd-sim/ids.ts";
import { Pools, parseKeySpec } from "#services/sandboxd-sim/pools.ts";
import { PoolEntry } from "#shared/sandboxd/schemas.ts";

const key = { template: "base:24.04", net: "none", size: "small" } as const;
const mk = (latency = 0, concurrency = 8) => {
  const clock = new FakeClock(0);
  const pools = new Pools({ clock, ids: createIdSource(1), provisionLatencyMs: latency, refillConcurrency: concurrency });
  pools.start();
  return { clock, pools };
};

describe("sandboxd-sim pools", () => {
  test("parseKeySpec reads net and size from the right, so a template may contain `/`", () => {
    const rows: [string, object][] = [
      ["base:24.04", { template: "base:24.04", net: "none", size: "small" }],
      ["base:24.04/egress", { template: "base:24.04", net: "egress", size: "small" }],
      ["base:24.04/none/2xlarge", { template: "base:24.04", net: "none", size: "2xlarge" }],
      ["ghcr.io/org/img:1/egress/large", { template: "ghcr.io/org/img:1", net: "egress", size: "large" }],
      ["ghcr.io/org/img:1", { template: "ghcr.io/org/img:1", net: "none", size: "small" }],
    ];
    for (const [spec, want] of rows) expect(parseKeySpec(spec)).toEqual(want as never);
    expect(() => parseKeySpec("/none/small")).toThrow();
  });

  test("refill builds the golden first, then provisions target − warm − refilling, bounded by concurrency", () => {
    const { clock, pools } = mk(100, 2);
    pools.replace([PoolEntry.parse({ template: "base:24.04", warm: 3 })]);
    expect(pools.status()[0]).toMatchObject({ golden: false, refilling: 0 });
    clock.advance(100);
    expect(pools.status()[0]).toMatchObject({ golden: true, refilling: 2, warm: 0 }); // concurrency 2
    clock.advance(100);
    expect(pools.status()[0]).toMatchObject({ refilling: 0, warm: 2 });
    clock.advance(1_800); // the 2 s tick starts the third
    expect(pools.status()[0]).toMatchObject({ refilling: 1, warm: 2 });
    clock.advance(100);
    expect(pools.status()[0]).toMatchObject({ refilling: 0, warm: 3 });
  });

  test("pop is LIFO; a lowered target trims at once; a VM that finishes above a lowered target is destroyed", () => {
    const { clock, pools } = mk(50);
    pools.setWarm(key, 3);
    const ids = pools.get(key)!.warm.map((v) => v.id);
    expect(pools.pop(key)!.id).toBe(ids[2]!);
    pools.refill(); // one provision in flight
    pools.replace([PoolEntry.parse({ ...key, warm: 1 })]);
    expect(pools.status()[0]).toMatchObject({ warm: 1, target: 1, refilling: 1 });
    clock.advance(50);
    expect(pools.status()[0]).toMatchObject({ warm: 1, refilling: 0 });
  });

  test("drain empties warm and parks refill; undrain refills; restart forgets warm VMs and in-flight provisions", () => {
    const { clock, pools } = mk(10);
    pools.replace([PoolEntry.parse({ ...key, warm: 2 })]);
    clock.advance(20);
    pools.drain();
    expect(pools.pop(key)).toBeUndefined();
    expect(pools.status()[0]).toMatchObject({ warm: 0, target: 2 });
    clock.advance(4_000);
    expect(pools.status()[0]).toMatchObject({ refilling: 0 });
    pools.undrain();
    expect(pools.status()[0]).toMatchObject({ refilling: 2 });
    pools.restart();
    clock.advance(10);
    expect(pools.status()[0]).toMatchObject({ warm: 0, refilling: 0, golden: true });
  });
});
