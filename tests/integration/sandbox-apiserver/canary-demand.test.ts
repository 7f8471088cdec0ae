// The canary is no demand (issue 21 item 1/4): its claim is released within a round, before the node's next publish,
// so the inventory shows only a warm drop no entry explains — which the demand meter counts as a stranger's claim
// unless the canary told it the claim id. The real simulator (guest agents: a real envd per claim), the Canary
// class, the process's DemandMeter fed the node's snapshots before and after a round.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { Canary } from "#services/sandbox-apiserver/canary/index.ts";
import { NodeClients } from "#services/sandbox-apiserver/sandboxes/index.ts";
import { ApiserverMetrics } from "#services/sandbox-apiserver/serving/index.ts";
import { realClock } from "#shared/clock/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { DemandMeter, type FleetNode, type InventoryRecord } from "#shared/fleet/index.ts";
import { waitFor } from "#tests/support/wait.ts";

const ROOT = "canary-demand-root";
const IMG = "img:canary";
const KEY = { template: IMG, net: "none", size: "small" } as const;
let sim: SandboxdSim;

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, pools: [`${IMG}/none/small=3`], guestAgents: true });
  await waitFor("three warm VMs", async () => sim.info().pools.find((p) => p.key.template === IMG)?.warm === 3, 15_000, 50);
  sim.setProvisionLatency(120_000); // replacements stay out of the next snapshot: one warm VM fewer per round
}, 30_000);
afterAll(() => sim?.stop());

/** The node as a NodeInventory would show it now (no claims listed: the canary's is gone by then). */
function snapshot(at: number): InventoryRecord {
  const fleet: FleetNode = {
    name: "n1",
    address: sim.addr,
    publishedAt: at,
    pools: sim.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })),
    templates: [],
    entries: [],
  };
  return { name: "n1", address: sim.addr, publishedAt: at, inventory: { pools: [] } as never, fleet };
}

describe("canary claims and the demand meter", () => {
  for (const told of [true, false]) {
    test(told ? "told the claim id: a canary round is no claim" : "untold (the old wiring): the round reads as a stranger's claim", async () => {
      const meter = new DemandMeter(realClock);
      const before = snapshot(Date.now());
      meter.observe([before.fleet]);
      const canary = new Canary({
        fresh: () => [before],
        clients: new NodeClients(ROOT),
        rootToken: ROOT,
        intervalMs: 60_000,
        clock: realClock,
        log: createLogger({ level: "error", name: "canary-test" }),
        metrics: new ApiserverMetrics(),
        ...(told ? { demand: meter } : {}),
      });
      await canary.round();
      const after = snapshot(Date.now() + 1);
      const warm = (r: InventoryRecord) => r.fleet.pools.find((p) => p.template === IMG)!.warm;
      expect(warm(after)).toBe(warm(before) - 1); // the canary's VM is gone, and no entry says why
      meter.observe([after.fleet]);
      if (told) expect(meter.read(KEY).claimsPerSecond).toBe(0);
      else expect(meter.read(KEY).claimsPerSecond).toBeGreaterThan(0);
    });
  }
});
