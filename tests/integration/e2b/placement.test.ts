// Placement's two-choice pick (docs/e2b.md "Create"): of two sampled candidates the one whose snapshot shows more
// warm VMs gets the claim. With two nodes the pair is always both, so every create while one node is clearly
// warmer must land there. sandbox-e2b runs in-process on two simulated sandboxd nodes (development substrate).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { KEY_A, ROOT, startStack, type Stack } from "./harness.ts";
import { until } from "#tests/support/wait.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ nodes: 2, pools: ["img:1/none/small=8"] });
});
afterAll(() => s.stop());

const KEY = { template: "img:1", net: "none", size: "small" } as const;
const warmInView = (addr: string) =>
  s.mesh.fleet.nodes().find((n) => n.address === addr)?.pools.find((p) => p.template === KEY.template && p.net === KEY.net && p.size === KEY.size)?.warm ?? -1;
const claimsOn = (i: number) => s.cluster.nodes[i]!.requests.filter((e) => e.route === "claim").length;

describe("two-choice placement", () => {
  test("prefers the warmer node: with one node at 1 warm VM and the other at 8, every create lands on the warmer", async () => {
    const [cold, warm] = s.cluster.nodes as [(typeof s.cluster.nodes)[0], (typeof s.cluster.nodes)[0]];
    await new SandboxdClient({ baseUrl: cold.url, token: ROOT }).putPools({ pools: [{ ...KEY, warm: 1 }] });
    s.mesh.fleet.changed?.(cold.addr);
    await until(() => warmInView(cold.addr) === 1 && warmInView(warm.addr) === 8, "the fleet view to show 1 warm VM on one node and 8 on the other", 15_000, 20);
    const before = [claimsOn(0), claimsOn(1)];
    for (let i = 0; i < 6; i++) {
      const r = await fetch(`${s.apiUrl}/v2/sandboxes`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": KEY_A },
        body: JSON.stringify({ templateID: "img:1" }),
      });
      expect(r.status).toBe(201);
      // The warmer node never drops to the colder one's count in between (8 - 6 > 1), so the pick stays decided.
      expect(warmInView(warm.addr)).toBeGreaterThan(warmInView(cold.addr));
    }
    expect([claimsOn(0) - before[0]!, claimsOn(1) - before[1]!]).toEqual([0, 6]);
  });
});
