// The NodeInventory publisher against a real kube-apiserver with the CRD from manifests/ and the sandboxd
// simulator (scenarios 42, 43, 44), applying as the rbac.yaml ServiceAccount.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { NodeInventories, NodeInventory, NodeInventoryShards, type NodeInventoryShard } from "#shared/inventory/index.ts";
import { InventoryPublisher } from "#services/vk-sandbox/inventory/index.ts";
import { NodeController } from "#services/vk-sandbox/node/index.ts";
import { isNotFound } from "#shared/kube/errors.ts";
import { Nodes } from "#shared/kube/resources.ts";
import type { Log } from "#shared/log/index.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { type KubeFixture, nodeSpecFromFlags, quietLog, startKubeFixture } from "./kube-fixture.ts";
import { waitFor } from "../../support/wait.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

let k: KubeFixture;
let sim: SandboxdSim;
let sandboxd: SandboxdClient;
const running: { stop(): Promise<void> }[] = [];
const INTERVAL_MS = 250;

beforeAll(async () => {
  [k, sim] = await Promise.all([startKubeFixture({ crd: true }), startSandboxdSim({ pools: ["base:24.04/none/small=3"], seed: 7 })]);
  sandboxd = new SandboxdClient({ baseUrl: sim.url });
}, 180_000);

afterAll(async () => {
  await Promise.all(running.map((r) => r.stop()));
  await Promise.all([k?.stop(), sim?.stop()]);
});

type Inv = NodeInventory & { metadata: { uid?: string; managedFields?: { manager: string; operation: string }[] } };
const getInventory = (name: string) => k.admin.get<Inv>(NodeInventories, name);

async function startPublishing(nodeName: string, own: Map<string, string>, log: Log = quietLog, format: "single" | "sharded" = "single") {
  const node = new NodeController({ client: k.daemon, spec: nodeSpecFromFlags([`--node-name=${nodeName}`]), log: quietLog, statusIntervalMs: 200 });
  running.push(node);
  await node.ensure();
  node.start();
  const publisher = new InventoryPublisher({
    kube: k.daemon,
    sandboxd,
    nodeName,
    address: sim.addr,
    ownAddresses: () => own,
    nodeGone: () => node.gone,
    intervalMs: INTERVAL_MS,
    log,
    format,
  });
  running.push(publisher);
  publisher.start();
  return { node, publisher };
}

async function publishedAtAfter(name: string, after: string, ms = 10_000): Promise<Inv> {
  return waitFor("a condition", async () => {
    const inv = await getInventory(name);
    return inv.publishedAt && inv.publishedAt > after ? inv : undefined;
  }, ms);
}

describe("NodeInventory publisher on a real apiserver", () => {
  // Scenario 42 is the seed's single-object form (--inventory-format=single); the sharded form is the next test.
  test("scenario 42: node, address, pools, sorted entries, field manager vk-sandbox, Node ownerRef, advancing publishedAt", async () => {
    const b = await sandboxd.claim({ template: "base:24.04", claim_ref: "ns/bravo", metadata: { team: "x" } });
    const a = await sandboxd.claim({ template: "base:24.04", claim_ref: "ns/alpha" });
    const own = new Map([[b.id, b.owner_addr]]);
    const { node } = await startPublishing("inv-a", own);
    const inv = await waitFor("a condition", async () => {
      const got = await getInventory("inv-a").catch(() => undefined);
      return got?.entries?.length === 2 ? got : undefined;
    });
    expect(NodeInventory.safeParse(inv).success).toBe(true);
    expect(inv.node).toBe("inv-a");
    expect(inv.address).toBe(sim.addr);
    expect(inv.pools?.[0]).toMatchObject({ template: "base:24.04", net: "none", size: "small", target: 3 });
    expect(inv.entries!.map((e) => e.name)).toEqual(["ns/alpha", "ns/bravo"]);
    const [alpha, bravo] = inv.entries!;
    expect(alpha).toMatchObject({ id: a.id, phase: "Running", template: "base:24.04", claimRef: "ns/alpha" });
    expect(alpha!.addr).toBeUndefined();
    expect(bravo).toMatchObject({ id: b.id, addr: b.owner_addr, claimMetadata: '{"team":"x"}' });
    expect(bravo!.deadline).toBeTruthy();
    expect(inv.metadata.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: "inv-a", uid: node.nodeRef()!.uid }]);
    const managers = (inv.metadata.managedFields ?? []).map((m) => `${m.manager}/${m.operation}`);
    expect(managers).toContain("vk-sandbox/Apply");
    const next = await publishedAtAfter("inv-a", inv.publishedAt!);
    expect(Date.parse(next.publishedAt!)).toBeGreaterThan(Date.parse(inv.publishedAt!));

    // A released sandbox vanishes from the next publish; the last one gone clears the list entirely.
    await sandboxd.release(a.id, { token: a.token });
    await waitFor("a condition", async () => (await getInventory("inv-a")).entries?.length === 1);
    await sandboxd.release(b.id, { token: b.token });
    const empty = await waitFor("a condition", async () => {
      const got = await getInventory("inv-a");
      return got.entries === undefined ? got : undefined;
    });
    expect(empty.pools).toBeDefined();
  }, 60_000);

  test("the sharded form (issue 29): the rows in NodeInventoryShards the node's own identity writes, the root naming the set; a release rewrites its shard", async () => {
    const b = await sandboxd.claim({ template: "base:24.04", claim_ref: "ns/sh-bravo", metadata: { team: "y" } });
    const a = await sandboxd.claim({ template: "base:24.04", claim_ref: "ns/sh-alpha" });
    await startPublishing("inv-s", new Map(), quietLog, "sharded");
    const root = await waitFor("the sharded root", async () => {
      const got = await getInventory("inv-s").catch(() => undefined);
      return got?.shards ? got : undefined;
    });
    expect(root.entries).toEqual([]);
    expect(root.shards).toEqual({ generation: 1, count: 1 });
    const shard = await k.admin.get<NodeInventoryShard>(NodeInventoryShards, "inv-s.1.0");
    expect(shard).toMatchObject({ node: "inv-s", generation: 1, index: 0, count: 1 });
    expect(shard.metadata.ownerReferences?.[0]).toMatchObject({ kind: "Node", name: "inv-s" });
    const mine = (shard.entries ?? []).filter((e) => e.name.startsWith("ns/sh-"));
    expect(mine.map((e) => e.name)).toEqual(["ns/sh-alpha", "ns/sh-bravo"]);
    expect(mine[1]).toMatchObject({ id: b.id, claimMetadata: '{"team":"y"}' });
    const next = await publishedAtAfter("inv-s", root.publishedAt!);
    expect(next.shards).toEqual({ generation: 1, count: 1 });
    await sandboxd.release(a.id, { token: a.token });
    await waitFor("the released row gone from its shard", async () => {
      const s2 = await k.admin.get<NodeInventoryShard>(NodeInventoryShards, "inv-s.1.0");
      return !(s2.entries ?? []).some((e) => e.id === a.id) ? true : undefined;
    });
    await sandboxd.release(b.id, { token: b.token });
  }, 60_000);

  test("scenario 43: a failing /v1/sandboxes or /v1/info stalls publishedAt; recovery resumes it", async () => {
    // This publisher's own skips (the simulator is shared with the other tests' publishers).
    const warnings: string[] = [];
    const skipped = () => warnings.filter((m) => m.includes("sandboxd listing or info failed")).length;
    await startPublishing("inv-b", new Map(), { ...quietLog, warn: (_fields: object, msg: string) => void warnings.push(msg) });
    const first = await waitFor("a condition", () => getInventory("inv-b").catch(() => undefined));
    for (const breakIt of [() => sim.listFails("500"), () => sim.fail("info", 500, { error: "boom" }, 1_000_000)]) {
      const skipped0 = skipped();
      breakIt();
      // The loop is serial: once a publish has failed its reads, any publish already past them has landed (a fixed
      // pause is not enough on a loaded machine). Then the reference must hold over five more failed publishes.
      await waitFor("a publish skipped for the failing read", () => skipped() > skipped0, 10_000, 10);
      const stalled = (await getInventory("inv-b")).publishedAt;
      await waitFor("five more skipped publishes", () => skipped() >= skipped0 + 6, 15_000, 10);
      expect((await getInventory("inv-b")).publishedAt).toBe(stalled);
      sim.listFails(false);
      sim.clearFaults();
      await publishedAtAfter("inv-b", stalled!);
    }
    expect(first.node).toBe("inv-b");
  }, 120_000);

  test("scenario 44: the Node deleted while running: no republish, and the Node is not recreated", async () => {
    // This publisher's own refusals to publish for a deleted Node (the first from the apiserver's 404, then from the
    // Node controller's gone flag).
    const lines: string[] = [];
    const record = (_fields: object, msg: string) => void lines.push(msg);
    const declined = () => lines.filter((m) => m.includes("the Node was deleted") || m.includes("node deleted while running")).length;
    const { node } = await startPublishing("inv-c", new Map(), { ...quietLog, warn: record, debug: record });
    await waitFor("a condition", () => getInventory("inv-c").catch(() => undefined));
    await k.admin.delete(Nodes, "inv-c");
    // No controller-manager runs here, so GC does not remove the inventory: it must simply stop changing. The loop is
    // serial: once a publish has declined, one already past its Node read has landed; then five more must decline.
    await waitFor("a publish declined for the deleted Node", () => declined() > 0, 10_000, 10);
    const stalled = (await getInventory("inv-c")).publishedAt;
    await waitFor("five more declined publishes", () => declined() >= 6, 15_000, 10);
    expect((await getInventory("inv-c")).publishedAt).toBe(stalled);
    await waitFor("the Node controller to see its Node gone", async () => node.gone, 15_000);
    let err: unknown;
    try {
      await k.admin.get(Nodes, "inv-c");
    } catch (e) {
      err = e;
    }
    expect(isNotFound(err)).toBe(true);
  }, 60_000);
});

// Last in the file: it swaps the NodeInventory CRD for an older one and puts it back.
describe("an older NodeInventory CRD (helm upgrade never updates crds/)", () => {
  test("one without `shards`: the sharded publisher applies the single form in the same publish and keeps to it, saying why", async () => {
    const path = join(import.meta.dir, "../../../manifests/crds/nodeinventories.sandbox.cocoonstack.io.yaml");
    const current = readFileSync(path, "utf8");
    const old = parse(current) as { spec: { versions: { schema: { openAPIV3Schema: { properties: Record<string, unknown> } } }[] } };
    for (const v of old.spec.versions) delete v.schema.openAPIV3Schema.properties.shards;
    await k.cluster.apply([old]);
    try {
      // Once the apiserver serves the older schema, server-side apply refuses the undeclared field.
      await waitFor("the older schema in force", async () => {
        const refused = await k.cluster
          .apply([{ apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventory", metadata: { name: "probe" }, node: "probe", shards: { generation: 1, count: 1 } }])
          .then(() => false, (e: Error) => e.message.includes(".shards: field not declared in schema"));
        return refused || undefined;
      }, 30_000);
      const c = await sandboxd.claim({ template: "base:24.04", claim_ref: "ns/pruned" });
      const warnings: string[] = [];
      await startPublishing("inv-p", new Map(), { ...quietLog, warn: (_f: object, msg: string) => void warnings.push(msg) }, "sharded");
      const inv = await waitFor("the single form", async () => {
        const got = await getInventory("inv-p").catch(() => undefined);
        return got?.entries?.some((e) => e.id === c.id) ? got : undefined;
      });
      expect(inv.shards).toBeUndefined();
      await publishedAtAfter("inv-p", inv.publishedAt!);
      expect((await getInventory("inv-p")).entries?.some((e) => e.id === c.id)).toBe(true);
      expect(warnings.filter((m) => m.includes("cannot publish NodeInventoryShards"))).toHaveLength(1);
      // The shards written before the root was refused are deleted again.
      const left = await k.admin.list<NodeInventoryShard>(NodeInventoryShards, { fieldSelector: "node=inv-p" });
      expect(left.items).toEqual([]);
      await sandboxd.release(c.id, { token: c.token });
    } finally {
      await k.cluster.apply(current);
    }
  }, 60_000);
});
