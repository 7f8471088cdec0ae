import { describe, expect, test } from "bun:test";
import { TokenSet, bearerOf, bodyTokenAccess, sandboxScoped, safeEqual } from "#services/sandboxd-sim/auth.ts";
import { SimError } from "#services/sandboxd-sim/errors.ts";

const fails = (fn: () => unknown): [number, string] => {
  try {
    fn();
  } catch (e) {
    if (e instanceof SimError) return [e.status, e.message];
    throw e;
  }
  throw new Error("expected a SimError");
};

describe("sandboxd-sim auth (sandboxd.md §2.2)", () => {
  const tokens = new TokenSet("root", { acme: { token: "acme", max_claims: 0 } });
  const box = { id: "sb_1", token: "boxtok" };

  test("a bearer is the remainder after the exact prefix `Bearer `; empty is missing", () => {
    const rows: [string | undefined, string | undefined][] = [
      ["Bearer abc", "abc"],
      ["Bearer ", undefined],
      ["bearer abc", undefined],
      ["Basic abc", undefined],
      [undefined, undefined],
      ["Bearer  two", " two"],
    ];
    for (const [h, want] of rows) expect(bearerOf(h)).toBe(want);
  });

  test("the node-level and root-only guards give 401 for unknown tokens and 403 for tenants on operator surfaces", () => {
    expect(tokens.nodeLevel("root")).toEqual({ kind: "root" });
    expect(tokens.nodeLevel("acme")).toEqual({ kind: "tenant", tenant: "acme" });
    expect(fails(() => tokens.nodeLevel(undefined))).toEqual([401, "invalid api token"]);
    expect(fails(() => tokens.rootOnly("nope"))).toEqual([401, "invalid api token"]);
    expect(fails(() => tokens.rootOnly("acme"))).toEqual([403, "operator token required"]);
    expect(new TokenSet().nodeLevel(undefined)).toEqual({ kind: "root" }); // open node
    expect(fails(() => new TokenSet(undefined, { acme: { token: "a", max_claims: 0 } }).nodeLevel(undefined))[0]).toBe(401);
  });

  test("the sandbox-scoped guard: 401 missing, operator elevation only where allowed, identical 404 for unknown and mismatch", () => {
    expect(fails(() => sandboxScoped(tokens, undefined, box, { operator: true }))).toEqual([401, "missing bearer token"]);
    expect(sandboxScoped(tokens, "root", box, { operator: true }).operator).toBe(true);
    expect(sandboxScoped(tokens, "boxtok", box, { operator: true }).operator).toBe(false);
    expect(fails(() => sandboxScoped(tokens, "root", box, { operator: false }))).toEqual([404, "unknown sandbox"]);
    expect(fails(() => sandboxScoped(tokens, "acme", box, { operator: true }))).toEqual([404, "unknown sandbox"]);
    expect(fails(() => sandboxScoped(tokens, "boxtok", undefined, { operator: true }))).toEqual([404, "unknown sandbox"]);
    expect(fails(() => sandboxScoped(tokens, "x", box, { operator: false, notFound: "not owned here" }))).toEqual([404, "not owned here"]);
    expect(fails(() => sandboxScoped(new TokenSet(), "root", box, { operator: true }))).toEqual([404, "unknown sandbox"]);
  });

  test("body-token verbs: an empty body token is the operator only for root; otherwise the sandbox token must match", () => {
    expect(bodyTokenAccess({ kind: "root" }, "", box).operator).toBe(true);
    expect(fails(() => bodyTokenAccess({ kind: "tenant", tenant: "acme" }, "", box))[0]).toBe(404);
    expect(bodyTokenAccess({ kind: "tenant", tenant: "acme" }, "boxtok", box).operator).toBe(false);
    expect(fails(() => bodyTokenAccess({ kind: "root" }, "wrong", box))[0]).toBe(404);
    expect(fails(() => bodyTokenAccess({ kind: "root" }, "", undefined))[0]).toBe(404);
  });

  test("safeEqual compares content and length", () => {
    expect(safeEqual("abc", "abc")).toBe(true);
    expect(safeEqual("abc", "abd")).toBe(false);
    expect(safeEqual("abc", "abcd")).toBe(false);
  });
});
