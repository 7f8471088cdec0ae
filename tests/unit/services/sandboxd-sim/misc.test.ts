// Small pure parts of the simulator: ids, route table, capacity texts, pool specs.
import { describe, expect, test } from "bun:test";
import { createIdSource } from "#services/sandboxd-sim/ids.ts";
import { matchRoute, routerMiss } from "#services/sandboxd-sim/routes/table.ts";
import { capacityProblem } from "#services/sandboxd-sim/capacity.ts";
import { ClaimTable } from "#services/sandboxd-sim/claims.ts";
import { TokenSet } from "#services/sandboxd-sim/auth.ts";
import { poolSpec } from "#services/sandboxd-sim/sim.ts";
import { CHECKPOINT_ID_RE, CONTENT_DIGEST_RE, SANDBOX_ID_RE, SANDBOX_TOKEN_RE } from "#shared/sandboxd/schemas.ts";

describe("sandboxd-sim ids", () => {
  test("ids, tokens, checkpoint ids and digests match the real formats; a seed makes the sequence repeatable", () => {
    const a = createIdSource("s");
    const b = createIdSource("s");
    const seqA = [a.sandboxId(), a.token(), a.checkpointId(), a.digest()];
    expect([b.sandboxId(), b.token(), b.checkpointId(), b.digest()]).toEqual(seqA);
    expect(SANDBOX_ID_RE.test(seqA[0]!)).toBe(true);
    expect(SANDBOX_TOKEN_RE.test(seqA[1]!)).toBe(true);
    expect(CHECKPOINT_ID_RE.test(seqA[2]!)).toBe(true);
    expect(CONTENT_DIGEST_RE.test(seqA[3]!)).toBe(true);
    const r = createIdSource().random();
    expect(r >= 0 && r < 1).toBe(true);
  });
});

describe("sandboxd-sim route table", () => {
  test("matches routes by method and path, and tells a wrong method from an unknown path", () => {
    expect(matchRoute("POST", "/v1/claim")).toEqual({ kind: "route", name: "claim" });
    expect(matchRoute("GET", "/v1/sandboxes/sb_1/ports/80")).toEqual({ kind: "route", name: "ports" });
    expect(matchRoute("HEAD", "/healthz")).toEqual({ kind: "route", name: "healthz" });
    expect(matchRoute("GET", "/v1/checkpoints/ck_1")).toEqual({ kind: "method", allow: ["DELETE"] });
    expect(matchRoute("GET", "/v1/sandboxes/a/b/c")).toEqual({ kind: "none" });
    expect(routerMiss({ kind: "none" }).status).toBe(404);
  });
});

describe("sandboxd-sim capacity", () => {
  test("names draining first, then the node cap, then the tenant cap, counting the whole batch", () => {
    const tokens = new TokenSet("r", { acme: { token: "a", max_claims: 1 } });
    const table = new ClaimTable();
    expect(capacityProblem({ maxClaims: 0, draining: true }, tokens, table, undefined)).toBe("node claim quota reached: node draining");
    expect(capacityProblem({ maxClaims: 2, draining: false }, tokens, table, undefined, 3)).toBe("node claim quota reached: 0 live claims, cap 2");
    expect(capacityProblem({ maxClaims: 0, draining: false }, tokens, table, "acme", 2)).toBe("node claim quota reached: tenant acme at 0 live claims, cap 1");
    expect(capacityProblem({ maxClaims: 0, draining: false }, tokens, table, "acme", 1)).toBeNull();
  });
});

describe("sandboxd-sim pool specs", () => {
  test("`template/net/size=N` parses to a pool entry; warm defaults to 0 without `=N`", () => {
    expect(poolSpec("base:24.04/none/small=5")).toEqual({ template: "base:24.04", net: "none", size: "small", warm: 5 });
    expect(poolSpec("img/egress").warm).toBe(0);
    expect(() => poolSpec("base=-1")).toThrow();
  });
});
