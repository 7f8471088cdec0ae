// Issue 17 leftover: the mesh fleet built a new sandboxd client (and its logger child) for every node on every poll,
// ~12% of a core idle in a mesh of nodes. One client per polled address is now kept across ticks: the logger
// children made while polling stop growing after the first contact, and a node that leaves takes its client along.
import { afterEach, expect, test } from "bun:test";
import { MeshFleet } from "#shared/fleet/mesh.ts";
import { createLogger, type Logger } from "#shared/log/index.ts";
import { startSimCluster } from "#services/sandboxd-sim/sim.ts";

const ROOT = "root-token-mesh-clients";
let cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

/** A logger that counts the children bound to a sandboxd node (one per SandboxdClient built). */
function countingLogger(): { log: Logger; nodeChildren: () => number } {
  const log = createLogger({ level: "error", name: "test" });
  let n = 0;
  const child = log.child.bind(log);
  log.child = ((bindings: Record<string, unknown>, options?: object) => {
    if ("sandboxd" in bindings) n++;
    return child(bindings, options);
  }) as Logger["child"];
  return { log, nodeChildren: () => n };
}

test("polling a mesh of 3 nodes 10 times builds no client after the first round, and a node that leaves drops its own", async () => {
  const c = await startSimCluster(3, { rootToken: ROOT, pools: ["img/none/small=1"] });
  cleanups.push(() => c.stop());
  const { log, nodeChildren } = countingLogger();
  const f = new MeshFleet({ seeds: [c.nodes[0]!.addr], token: ROOT, pollMs: 60_000, log });
  cleanups.push(() => f.stop());
  await f.ready();
  await f.pollOnce(); // the peers the seed named are dialled from this round on
  expect(f.nodes()).toHaveLength(3);
  const afterContact = nodeChildren();
  expect(afterContact).toBe(3);
  for (let i = 0; i < 10; i++) await f.pollOnce();
  expect(f.nodes()).toHaveLength(3);
  expect(nodeChildren()).toBe(afterContact);

  // A node that leaves the view is no longer polled; were it to come back under its address, it gets a fresh client.
  await c.nodes[2]!.stop();
  for (let i = 0; i < 3; i++) await f.pollOnce();
  expect(f.nodes().map((n) => n.name).sort()).toEqual([c.nodes[0]!.addr, c.nodes[1]!.addr].sort());
  expect(nodeChildren()).toBe(afterContact);
}, 30_000);
