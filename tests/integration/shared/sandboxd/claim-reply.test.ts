// The claim reply's optional members against the simulator: an older node's reply without `net_route` is an
// ordinary claim (returned as sent), not a schema failure that would send a delivered claim down the reconcile path.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { ClaimReply, inferNetRoute } from "#shared/sandboxd/schemas.ts";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";

const ROOT = "root-token-0123";
let sim: SandboxdSim;
let root: SandboxdClient;

beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT, seed: 31, pools: ["base:24.04=2"] });
  root = new SandboxdClient({ baseUrl: sim.url, token: ROOT, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
});
afterAll(async () => {
  await sim.stop();
});

describe("claim reply members", () => {
  test("a reply without net_route (an older node) is a normal claim: no reconcile listing, nothing adopted", async () => {
    const older = { id: "sb_00000000000000aa", token: "b".repeat(32), deadline: "2026-07-06T00:05:00Z", owner_addr: sim.addr };
    sim.fail("claim", 200, older);
    const r = await root.claim({ template: "base:24.04", claim_ref: "ns/older" });
    expect(r).toEqual(older);
    expect(r.net_route).toBeUndefined();
    expect(r.adopted).toBeUndefined();
    expect(sim.log.find("list")).toEqual([]);
    // Where a caller needs a route, the lane gives the usual one.
    expect(inferNetRoute("none")).toBe("none");
    expect(inferNetRoute("egress")).toBe("relay");
  });

  test("the newest node's reply carries net_route, and the schema keeps it", async () => {
    const r = await root.claim({ template: "base:24.04", claim_ref: "ns/newest" });
    expect(r.net_route).toBe("none");
    expect(ClaimReply.parse({ ...r, net_route: "direct" }).net_route).toBe("direct");
    expect(ClaimReply.safeParse({ ...r, net_route: "sideways" }).success).toBe(false);
  });
});
