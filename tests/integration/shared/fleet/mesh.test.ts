// The mesh fleet source against real simulated sandboxd nodes: seeds, peers, polling, leaving, startup failures.
import { afterEach, describe, expect, test } from "bun:test";
import { MeshFleet } from "#shared/fleet/mesh.ts";
import { findEntry } from "#shared/fleet/view.ts";
import { createLogger } from "#shared/log/index.ts";
import { isStartupError } from "#shared/config/errors.ts";
import { startSandboxdSim, startSimCluster, type SandboxdSim, type SimCluster } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";

const ROOT = "root-token-mesh";
const log = createLogger({ level: "error", name: "test" });
let cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

async function cluster(n: number): Promise<SimCluster> {
  const c = await startSimCluster(n, { rootToken: ROOT, pools: ["img/none/small=2"] });
  cleanups.push(() => c.stop());
  return c;
}
function fleet(seeds: string[], token = ROOT, pollMs = 60_000): MeshFleet {
  const f = new MeshFleet({ seeds, token, pollMs, log });
  cleanups.push(() => f.stop());
  return f;
}
const addr = (s: SandboxdSim) => s.addr;

describe("MeshFleet", () => {
  test("one seed reveals its peers; every node's pools and claims are in the snapshot", async () => {
    const c = await cluster(3);
    const f = fleet([addr(c.nodes[0]!)]);
    await f.ready();
    // The first round dials the seed only; the next one dials the peers it named.
    await f.pollOnce();
    expect(f.nodes().map((n) => n.name).sort()).toEqual(c.nodes.map(addr).sort());
    const client = new SandboxdClient({ baseUrl: c.nodes[2]!.url, token: ROOT });
    const claimed = await client.claim({ template: "img", claim_ref: "team-a/e2b-1", metadata: { k: "v" } });
    await f.pollOnce();
    const hit = findEntry(f.nodes(), claimed.id.replace("sb_", "sb-"), "team-a");
    expect(hit?.node.name).toBe(addr(c.nodes[2]!));
    expect(hit?.entry.metadata).toEqual({ k: "v" });
    expect(hit?.entry.phase).toBe("Running");
    expect(f.nodes()[0]!.pools[0]).toMatchObject({ template: "img", net: "none", size: "small" });
  });

  test("a silent node keeps its snapshot for 3 ticks, then leaves", async () => {
    const c = await cluster(2);
    const f = fleet(c.nodes.map(addr));
    await f.ready();
    expect(f.nodes()).toHaveLength(2);
    await c.nodes[1]!.stop();
    await f.pollOnce();
    await f.pollOnce();
    expect(f.nodes()).toHaveLength(2);
    await f.pollOnce();
    expect(f.nodes().map((n) => n.name)).toEqual([addr(c.nodes[0]!)]);
  });

  test("changed() polls early instead of waiting for the tick", async () => {
    const c = await cluster(1);
    const f = fleet([addr(c.nodes[0]!)], ROOT, 60_000);
    await f.ready();
    const client = new SandboxdClient({ baseUrl: c.nodes[0]!.url, token: ROOT });
    const claimed = await client.claim({ template: "img", claim_ref: "ns/x" });
    f.changed();
    for (let i = 0; i < 50 && !findEntry(f.nodes(), claimed.id); i++) await Bun.sleep(20);
    expect(findEntry(f.nodes(), claimed.id)).toBeDefined();
  });

  test("changed(address) refreshes just that node before the tick; the others keep their snapshot", async () => {
    const c = await cluster(2);
    const f = fleet(c.nodes.map(addr), ROOT, 60_000);
    await f.ready();
    const [n0, n1] = c.nodes;
    const infos = (n: SandboxdSim) => n.requests.filter((e) => e.route === "info").length;
    const before1 = infos(n1!);
    const claimed = await new SandboxdClient({ baseUrl: n0!.url, token: ROOT }).claim({ template: "img", claim_ref: "ns/y" });
    f.changed(addr(n0!));
    for (let i = 0; i < 50 && !findEntry(f.nodes(), claimed.id); i++) await Bun.sleep(20);
    expect(findEntry(f.nodes(), claimed.id)?.node.name).toBe(addr(n0!));
    expect(infos(n1!)).toBe(before1);
    expect(f.nodes()).toHaveLength(2);
  });

  test("startup: no seed answers, or a seed refuses the token => StartupError naming the flag", async () => {
    const dead = fleet(["127.0.0.1:1"]);
    const e1 = await dead.ready().catch((e) => e);
    expect(isStartupError(e1)).toBe(true);
    expect(String(e1.message)).toContain("no sandboxd seed answered");

    const s = await startSandboxdSim({ rootToken: ROOT });
    cleanups.push(() => s.stop());
    const wrong = fleet([s.addr], "wrong-token");
    const e2 = await wrong.ready().catch((e) => e);
    expect(isStartupError(e2)).toBe(true);
    expect(String(e2.message)).toContain("refused the root token");
  });
});
