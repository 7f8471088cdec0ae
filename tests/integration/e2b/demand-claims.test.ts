// The e2b surface's own claims are demand at once (issue 21.1): a pool sized from polls alone would learn of a claim
// only at the next poll. Slow polls here (60 s), and the node's list fails while the create runs, so nothing but the
// create itself can have counted it; once the list answers again and the view lists the claim, it is not counted
// twice.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { Started } from "#tests/support/started.ts";
import { waitFor } from "#tests/support/wait.ts";
import { sdkOpts, startStack, type Stack } from "./harness.ts";

const started = new Started();
let s: Stack;

// The bound is the harness's own wait (the view seeing warm pools), not the 5 s default sized for an idle machine.
beforeAll(async () => {
  s = await started.track(startStack({ pools: ["img:1/none/small=2"], extraFlags: ["--inventory-poll=60s"] }));
}, 60_000);
// Also when beforeAll gave up waiting: the stack it started is stopped once it is up (startStack stops a half-started one).
afterAll(() => started.stopAll());

describe("e2b claims in the demand meter", () => {
  test("a create through the stock SDK counts before any poll lists it, once", async () => {
    const key = { template: "img:1", net: "none", size: "small" } as const;
    const node = s.cluster.nodes[0]!;
    expect(s.mesh.fleet.demand.read(key).claimsPerSecond).toBe(0);
    node.listFails("500");
    const sbx = await Sandbox.create("base", sdkOpts(s));
    expect(s.mesh.fleet.nodes()[0]!.entries.length).toBe(0); // the list fails: the view cannot have seen it
    // One claim in the short window (its floor span, 5 s).
    expect(s.mesh.fleet.demand.read(key).claimsPerSecond).toBeCloseTo(1 / 5, 5);
    node.listFails(false);
    await waitFor("the view to list the claim", () => s.mesh.fleet.nodes()[0]!.entries.length === 1 || (s.mesh.fleet.changed?.(), false), 30_000, 25);
    // Counted once: the listed claim is the one the create recorded (the window can only have widened since).
    const rate = s.mesh.fleet.demand.read(key).claimsPerSecond;
    expect(rate).toBeGreaterThan(0);
    expect(rate).toBeLessThanOrEqual(1 / 5 + 1e-9);
    await sbx.kill();
  });
});
