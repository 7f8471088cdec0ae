// Tests of shared/sandboxd/schemas.ts, kept beside the simulator's unit tests because this engineer owns the
// schemas but not tests/unit/shared/.
import { describe, expect, test } from "bun:test";
import {
  ClaimRequest,
  ClaimResponse,
  Info,
  PutPoolsRequest,
  SandboxRow,
  WireTime,
  duplicatePoolProblem,
  grantedTtlSeconds,
  isRedirect,
  metadataProblem,
  parseWireTime,
  toWireTime,
  SIZE_TIERS,
  GO_ZERO_TIME,
} from "#shared/sandboxd/schemas.ts";

describe("sandboxd wire schemas", () => {
  test("times: RFC 3339 with optional fractional seconds and Go's zero time; emitted like Go's RFC3339Nano", () => {
    for (const t of ["2026-07-06T00:05:00Z", "2026-07-06T00:05:00.123456789Z", "2026-07-06T02:05:00+02:00", GO_ZERO_TIME]) {
      expect(WireTime.safeParse(t).success).toBe(true);
    }
    expect(WireTime.safeParse("2026-07-06 00:05:00").success).toBe(false);
    expect(parseWireTime("2026-07-06T00:05:00.123456789Z")).toBe(Date.UTC(2026, 6, 6, 0, 5, 0, 123));
    expect(parseWireTime(GO_ZERO_TIME)).toBeNull();
    expect(toWireTime(Date.UTC(2026, 6, 6, 0, 5))).toBe("2026-07-06T00:05:00Z");
    expect(toWireTime(Date.UTC(2026, 6, 6, 0, 5, 0, 120))).toBe("2026-07-06T00:05:00.12Z");
  });

  test("a claim request ignores unknown fields; PUT /v1/pools rejects them and defaults warm to 0, never to config", () => {
    expect(ClaimRequest.parse({ template: "x", future: 1 })).toEqual({ template: "x" });
    expect(ClaimRequest.safeParse({ template: "" }).success).toBe(false);
    expect(ClaimRequest.safeParse({ template: "x", net: "public" }).success).toBe(false);
    expect(PutPoolsRequest.safeParse({ pools: [{ template: "x", extra: 1 }] }).success).toBe(false);
    expect(PutPoolsRequest.safeParse({ pools: [], extra: 1 }).success).toBe(false);
    expect(PutPoolsRequest.parse({ pools: [{ template: "x" }] }).pools[0]).toEqual({ template: "x", net: "none", size: "small", warm: 0 });
    expect(PutPoolsRequest.safeParse({ pools: [{ template: "x", warm: 4, warm_max: 2 }] }).success).toBe(false);
    expect(PutPoolsRequest.safeParse({ pools: [{ template: "x", warm: -1 }] }).success).toBe(false);
  });

  test("duplicate pool keys are named in the node's text", () => {
    const { pools } = PutPoolsRequest.parse({ pools: [{ template: "a" }, { template: "b" }, { template: "a", size: "small" }] });
    expect(duplicatePoolProblem(pools)).toBe('invalid pool key: duplicate pool "a"');
    expect(duplicatePoolProblem(pools.slice(0, 2))).toBeNull();
  });

  test("metadata rules: ≤16 pairs, keys printable ASCII without = or &, values ≤512 bytes", () => {
    expect(metadataProblem({ a: "b" })).toBeNull();
    expect(metadataProblem({ "a=b": "c" })).not.toBeNull();
    expect(metadataProblem({ "a&b": "c" })).not.toBeNull();
    expect(metadataProblem({ "a b": "c" })).not.toBeNull();
    expect(metadataProblem({ a: "x".repeat(513) })).not.toBeNull();
    expect(metadataProblem(Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])))).not.toBeNull();
  });

  test("a claim response is a claim or a redirect; rows and info accept the omissions older nodes make", () => {
    const r = ClaimResponse.parse({ redirect: ["10.0.0.6:7777"], require_promoted: true });
    expect(isRedirect(r)).toBe(true);
    expect(isRedirect(ClaimResponse.parse({ id: "sb_0123456789abcdef", token: "t", deadline: "2026-07-06T00:05:00Z", owner_addr: "a", net_route: "none" }))).toBe(false);
    expect(SandboxRow.safeParse({ id: "sb_x", key: { template: "t", net: "none", size: "small" }, hibernated: false }).success).toBe(true);
    expect(Info.parse({ pools: [], claimed: 0, advertise_addr: "a" }).templates).toEqual([]);
    expect(grantedTtlSeconds(0)).toBe(300);
    expect(SIZE_TIERS["2xlarge"]).toEqual({ cpu_count: 8, mem_total_bytes: 16 * 1024 ** 3 });
  });
});
