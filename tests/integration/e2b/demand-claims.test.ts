// The e2b surface's own claims are demand at once (issue 21.1): a pool sized from polls alone would learn of a claim
// only at the next poll. Slow polls here (60 s), so nothing but the create itself can have counted it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { sdkOpts, startStack, type Stack } from "./harness.ts";

let s: Stack;

beforeAll(async () => {
  s = await startStack({ pools: ["img:1/none/small=2"], extraFlags: ["--inventory-poll=60s"] });
});
afterAll(() => s.stop());

describe("e2b claims in the demand meter", () => {
  test("a create through the stock SDK counts before any poll lists it, once", async () => {
    const key = { template: "img:1", net: "none", size: "small" } as const;
    expect(s.mesh.fleet.demand.read(key).claimsPerSecond).toBe(0);
    const sbx = await Sandbox.create("base", sdkOpts(s));
    expect(s.mesh.fleet.nodes()[0]!.entries.length).toBe(0); // no poll since: the view has not seen it
    // One claim in the short window (its floor span, 5 s).
    expect(s.mesh.fleet.demand.read(key).claimsPerSecond).toBeCloseTo(1 / 5, 5);
    await sbx.kill();
  });
});
