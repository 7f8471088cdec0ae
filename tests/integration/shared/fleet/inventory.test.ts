// The NodeInventory fleet source against the real kube-apiserver: one informer, and every row of the freshness table
// of --inventory-stale-after (docs/fleet.md) on a FakeClock, with publishedAt stamps the test chooses. The window is
// 90 s and the publish cadence 30 s, as in production. Every inventory here names a Node that exists with the
// inventory's address host as its InternalIP, as vk-sandbox publishes it; "trust" covers the others (issue 22 case 2).
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { parse } from "yaml";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "#shared/clock/index.ts";
import { InventoryFleet } from "#shared/fleet/inventory.ts";
import { KubeClient, loadKubeConnection } from "#shared/kube/index.ts";
import { startKubeApiserver, type TestCluster } from "#tests/kube/harness.ts";
import { waitFor } from "#tests/support/wait.ts";

const REPO = join(import.meta.dir, "../../../..");
const WINDOW = 90_000;
const CADENCE = 30_000;
let cluster: TestCluster;
let client: KubeClient;

beforeAll(async () => {
  cluster = await startKubeApiserver();
  await cluster.apply(readFileSync(join(REPO, "manifests/crds/nodeinventories.sandbox.cocoonstack.io.yaml"), "utf8"));
  await cluster.apply(readFileSync(join(REPO, "manifests/crds/nodeinventoryshards.sandbox.cocoonstack.io.yaml"), "utf8"));
  client = new KubeClient(await loadKubeConnection({ KUBECONFIG: cluster.kubeconfig() }));
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

const iso = (ms: number) => new Date(ms).toISOString();

const ipOf = (node: string) => `10.0.0.${node.length}`;

/** The Node vk-sandbox keeps for `name`: InternalIP `ip`, then Hostname, as node-object.ts writes them. */
async function ensureNode(name: string, ip = ipOf(name)): Promise<void> {
  const r = await cluster.adminFetch("/api/v1/nodes", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "v1", kind: "Node", metadata: { name } }),
  });
  if (!r.ok && r.status !== 409) throw new Error(`create Node ${name}: ${r.status} ${await r.text()}`);
  await r.body?.cancel();
  const s = await cluster.adminFetch(`/api/v1/nodes/${name}/status`, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json" },
    body: JSON.stringify({ status: { addresses: [{ type: "InternalIP", address: ip }, { type: "Hostname", address: name }] } }),
  });
  if (!s.ok) throw new Error(`Node ${name} status: ${s.status} ${await s.text()}`);
  await s.body?.cancel();
}

async function deleteNode(name: string): Promise<void> {
  const r = await cluster.adminFetch(`/api/v1/nodes/${name}`, { method: "DELETE" });
  await r.body?.cancel();
}

async function publish(node: string, publishedAt: number | undefined, address = `${ipOf(node)}:7777`): Promise<void> {
  await ensureNode(node);
  await cluster.apply([
    {
      apiVersion: "sandbox.cocoonstack.io/v1beta1",
      kind: "NodeInventory",
      metadata: { name: node },
      node,
      address,
      ...(publishedAt === undefined ? {} : { publishedAt: iso(publishedAt) }),
      entries: [{ name: `default/${node}-sb`, id: `sb_${node}`, phase: "Running" }],
    },
  ]);
}

async function removeAll(): Promise<void> {
  for (const kind of ["nodeinventories", "nodeinventoryshards"]) {
    const r = await cluster.adminFetch(`/apis/sandbox.cocoonstack.io/v1beta1/${kind}`, { method: "DELETE" });
    await r.body?.cancel();
  }
}

let clock: FakeClock;
let fleet: InventoryFleet;

/** Waits until the informer has seen `n` objects whose stamps match what was applied. */
async function seen(expected: Record<string, number | undefined>): Promise<void> {
  await waitFor(`the informer to see ${JSON.stringify(expected)}`, () => {
    const all = fleet.all();
    const ok = Object.entries(expected).every(([n, at]) => {
      const r = all.find((x) => x.name === n);
      return r !== undefined && r.publishedAt === at;
    });
    if (ok && all.length === Object.keys(expected).length) return true;
    throw new Error(`has ${JSON.stringify(all.map((r) => [r.name, r.publishedAt]))}`);
  }, 10_000, 20);
}

const freshNames = () => fleet.fresh().map((r) => r.name);

beforeEach(async () => {
  await removeAll();
  clock = new FakeClock();
  fleet?.stop();
  fleet = new InventoryFleet({ client, staleAfterMs: WINDOW, clock });
  await fleet.ready();
  await seen({});
});

describe("freshness (--inventory-stale-after 90s, publishes every 30s)", () => {
  test("a node that stops publishing leaves once it trails the newest publish by more than the window, and its next publish brings it back", async () => {
    const t0 = clock.now();
    await publish("n1", t0);
    await publish("n2", t0);
    await publish("n3", t0);
    await seen({ n1: t0, n2: t0, n3: t0 });
    // n1 and n2 keep publishing every 30 s; n3 stopped after t0.
    for (const k of [1, 2, 3]) {
      await clock.tick(CADENCE);
      await publish("n1", t0 + k * CADENCE);
      await publish("n2", t0 + k * CADENCE);
      await seen({ n1: t0 + k * CADENCE, n2: t0 + k * CADENCE, n3: t0 });
      // At k = 3 n3 trails by exactly 90 s: not more than the window, still fresh.
      expect(freshNames()).toEqual(["n1", "n2", "n3"]);
    }
    await clock.tick(CADENCE);
    await publish("n1", t0 + 4 * CADENCE);
    await seen({ n1: t0 + 4 * CADENCE, n2: t0 + 3 * CADENCE, n3: t0 });
    // 120 s behind the newest publish: gone from every read (nodes(), fresh(), freshNode()).
    expect(freshNames()).toEqual(["n1", "n2"]);
    expect(fleet.freshNode("n3")).toBeUndefined();
    expect(fleet.nodes().map((n) => n.name)).toEqual(["n1", "n2"]);
    // It left between window and window + one publish interval after its last publish.
    const leftAfter = t0 + 4 * CADENCE - t0;
    expect(leftAfter).toBeGreaterThan(WINDOW);
    expect(leftAfter).toBeLessThanOrEqual(WINDOW + CADENCE);
    await publish("n3", t0 + 4 * CADENCE);
    await seen({ n1: t0 + 4 * CADENCE, n2: t0 + 3 * CADENCE, n3: t0 + 4 * CADENCE });
    expect(freshNames()).toEqual(["n1", "n2", "n3"]);
  });

  test("an inventory without publishedAt is stale while any other node has one", async () => {
    await publish("n1", undefined);
    await publish("n2", clock.now());
    await seen({ n1: undefined, n2: clock.now() });
    expect(freshNames()).toEqual(["n2"]);
  });

  test("when no node has publishedAt nothing is stale: every node is kept", async () => {
    await publish("n1", undefined);
    await publish("n2", undefined);
    await seen({ n1: undefined, n2: undefined });
    await clock.tick(10 * WINDOW);
    expect(freshNames()).toEqual(["n1", "n2"]);
  });

  test("all nodes stopping at once (a control-plane write outage) freezes relative ages: nobody becomes stale", async () => {
    const t0 = clock.now();
    await publish("n1", t0);
    await publish("n2", t0 - 20_000);
    await seen({ n1: t0, n2: t0 - 20_000 });
    await clock.tick(3 * WINDOW);
    expect(freshNames()).toEqual(["n1", "n2"]);
  });

  test("a one-node fleet is never stale: its own stamp is the newest", async () => {
    await publish("solo", clock.now());
    await seen({ solo: clock.now() });
    await clock.tick(100 * WINDOW);
    expect(freshNames()).toEqual(["solo"]);
  });

  test("a node whose clock runs ahead cannot push the others out, and is itself never stale", async () => {
    const now = clock.now();
    await publish("fast", now + 3_600_000);
    await publish("n1", now);
    await publish("n2", now - 60_000);
    await seen({ fast: now + 3_600_000, n1: now, n2: now - 60_000 });
    // The reference is capped at our own clock: n2 trails by 60 s, inside the window.
    expect(freshNames()).toEqual(["fast", "n1", "n2"]);
    await clock.tick(WINDOW - 60_000 + 1);
    // Time passes with no publishes: the reference is still capped by min(newest, now) = now, so the ages grow.
    expect(freshNames()).toEqual(["fast", "n1"]);
  });

  test("a vk-sandbox restart shorter than the window changes nothing", async () => {
    const t0 = clock.now();
    await publish("n1", t0);
    await publish("n2", t0);
    await seen({ n1: t0, n2: t0 });
    // n2's publisher restarts: it misses one publish (45 s gap) while n1 keeps publishing.
    await clock.tick(CADENCE);
    await publish("n1", t0 + CADENCE);
    await seen({ n1: t0 + CADENCE, n2: t0 });
    expect(freshNames()).toEqual(["n1", "n2"]);
    await clock.tick(15_000);
    await publish("n2", t0 + 45_000);
    await clock.tick(15_000);
    await publish("n1", t0 + 2 * CADENCE);
    await seen({ n1: t0 + 2 * CADENCE, n2: t0 + 45_000 });
    expect(freshNames()).toEqual(["n1", "n2"]);
  });

  test("an old vk-sandbox that never stamps publishedAt counts as unstamped (stale once another node stamps)", async () => {
    await publish("old", undefined);
    await seen({ old: undefined });
    expect(freshNames()).toEqual(["old"]);
    await publish("new", clock.now());
    await seen({ old: undefined, new: clock.now() });
    expect(freshNames()).toEqual(["new"]);
  });

  test("Go's zero time as publishedAt is no stamp", async () => {
    await ensureNode("zero");
    await cluster.apply([{ apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventory", metadata: { name: "zero" }, node: "zero", address: `${ipOf("zero")}:7777`, publishedAt: "0001-01-01T00:00:00Z" }]);
    await publish("n1", clock.now());
    await seen({ zero: undefined, n1: clock.now() });
    expect(freshNames()).toEqual(["n1"]);
  });
});

describe("an old CRD schema without publishedAt", () => {
  test("prunes every stamp, so every node counts as unstamped and all are kept", async () => {
    const path = join(REPO, "manifests/crds/nodeinventories.sandbox.cocoonstack.io.yaml");
    const current = readFileSync(path, "utf8");
    const crd = parse(current) as { spec: { versions: { schema: { openAPIV3Schema: { properties: Record<string, unknown> } } }[] } };
    for (const v of crd.spec.versions) delete v.schema.openAPIV3Schema.properties.publishedAt;
    await cluster.apply([crd]);
    try {
      const now = clock.now();
      // A plain create (an older publisher) is pruned to the schema; server-side apply would refuse the field.
      const create = async (node: string, at: number) => {
        await ensureNode(node);
        const r = await cluster.adminFetch("/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventory", metadata: { name: node }, node, address: `${ipOf(node)}:7777`, publishedAt: iso(at) }),
        });
        return r.status === 201 ? ((await r.json()) as { publishedAt?: string }) : undefined;
      };
      const n1 = await waitFor("the create of n1", () => create("n1", now), 10_000);
      expect(n1.publishedAt).toBeUndefined();
      await create("n2", now - 10 * WINDOW);
      await seen({ n1: undefined, n2: undefined });
      expect(freshNames()).toEqual(["n1", "n2"]);
    } finally {
      await cluster.apply(current);
    }
  });
});

describe("the informer", () => {
  test("ready() names the CRD when the cache cannot sync in time", async () => {
    const bare = await startKubeApiserver();
    try {
      const f = new InventoryFleet({ client: new KubeClient(await loadKubeConnection({ KUBECONFIG: bare.kubeconfig() })), staleAfterMs: WINDOW, syncTimeoutMs: 500 });
      await expect(f.ready()).rejects.toThrow(
        "kubeinventory: node inventory cache did not sync within 500ms (is the NodeInventory.sandbox.cocoonstack.io CRD installed?)",
      );
      await f.stop();
    } finally {
      await bare.stop();
    }
  }, 60_000);

  test("without the NodeInventoryShard CRD (helm upgrade installs no new crds/) ready() resolves and single-form nodes are served; shards are read once the CRD exists", async () => {
    const bare = await startKubeApiserver();
    const f = new InventoryFleet({ client: new KubeClient(await loadKubeConnection({ KUBECONFIG: bare.kubeconfig() })), staleAfterMs: WINDOW, syncTimeoutMs: 10_000 });
    try {
      await bare.apply(readFileSync(join(REPO, "manifests/crds/nodeinventories.sandbox.cocoonstack.io.yaml"), "utf8"));
      const node = (name: string) =>
        bare.adminFetch("/api/v1/nodes", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ apiVersion: "v1", kind: "Node", metadata: { name } }) }).then((r) => r.body?.cancel());
      await node("plain");
      await node("sharded");
      await bare.apply([{ apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventory", metadata: { name: "plain" }, node: "plain", publishedAt: iso(Date.now()), entries: [{ name: "a/x", id: "sb_x", phase: "Running" }] }]);
      await f.ready();
      await waitFor("the single-form node", () => (f.freshNode("plain")?.fleet.entries.length === 1 ? true : undefined), 10_000, 20);
      await bare.apply(readFileSync(join(REPO, "manifests/crds/nodeinventoryshards.sandbox.cocoonstack.io.yaml"), "utf8"));
      await bare.apply([
        { apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventoryShard", metadata: { name: "sharded.1.0" }, node: "sharded", generation: 1, index: 0, count: 1, entries: [{ name: "a/y", id: "sb_y", phase: "Running" }] },
        { apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventory", metadata: { name: "sharded" }, node: "sharded", publishedAt: iso(Date.now()), shards: { generation: 1, count: 1 } },
      ]);
      // The informer retries with backoff (at most 30 s between tries).
      await waitFor("the sharded node's rows", () => (f.freshNode("sharded")?.fleet.entries.map((e) => e.id).join() === "sb_y" ? true : undefined), 60_000, 50);
    } finally {
      await f.stop();
      await bare.stop();
    }
  }, 120_000);

  test("ready() names the Node permission when only the Node cache cannot sync (an identity without list/watch nodes)", async () => {
    await cluster.apply([
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: "inventory-only" }, rules: [{ apiGroups: ["sandbox.cocoonstack.io"], resources: ["nodeinventories"], verbs: ["list", "watch"] }] },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: "inventory-only" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "inventory-only" },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: cluster.user.name }],
      },
    ]);
    const asUser = new KubeClient(await loadKubeConnection({ KUBECONFIG: cluster.kubeconfig({ auth: "user-token" }) }));
    const f = new InventoryFleet({ client: asUser, staleAfterMs: WINDOW, syncTimeoutMs: 1_500 });
    await expect(f.ready()).rejects.toThrow("kubeinventory: node cache did not sync within 1.5s (may this identity list and watch nodes?)");
    await f.stop();
  }, 30_000);

  test("entries without an id stay in the raw inventory (the aggregated API lists them) but not in the e2b fleet view", async () => {
    await ensureNode("ok");
    await cluster.apply([
      { apiVersion: "sandbox.cocoonstack.io/v1beta1", kind: "NodeInventory", metadata: { name: "ok" }, node: "ok", address: `${ipOf("ok")}:7777`, publishedAt: iso(clock.now()), entries: [{ name: "a/x", phase: "Running" }, { name: "a/y", id: "sb_y", phase: "Hibernated" }] },
    ]);
    await seen({ ok: clock.now() });
    const rec = fleet.freshNode("ok")!;
    expect(rec.inventory.entries).toHaveLength(2);
    expect(rec.fleet.entries.map((e) => [e.id, e.name, e.namespace, e.phase])).toEqual([["sb_y", "a/y", "a", "Hibernated"]]);
  });
});

describe("trust (issue 22 case 2): the root token goes only to an address of a Node the cluster knows", () => {
  const raw = (name: string, node: string, address: string) => ({
    apiVersion: "sandbox.cocoonstack.io/v1beta1",
    kind: "NodeInventory",
    metadata: { name },
    node,
    address,
    publishedAt: iso(clock.now()),
    entries: [{ name: `default/${name}-sb`, id: `sb_${name}`, phase: "Running" }],
  });

  test("a made-up inventory for no Node is never read; the Node appearing with that address brings it in, its deletion takes it out", async () => {
    // Applied before a trusted one: once the informer has the later object, it has handled the fake one too.
    await cluster.apply([raw("ghost", "ghost", "127.0.0.1:9")]);
    await publish("real", clock.now());
    await seen({ real: clock.now() });
    expect(fleet.all().map((r) => r.name)).toEqual(["real"]);
    expect(fleet.freshNode("ghost")).toBeUndefined();
    await ensureNode("ghost", "127.0.0.1");
    await waitFor("the Node to vouch for ghost", () => fleet.freshNode("ghost") !== undefined, 10_000, 20);
    await deleteNode("ghost");
    await waitFor("ghost to leave with its Node", () => fleet.all().every((r) => r.name !== "ghost"), 10_000, 20);
  });

  test("an inventory whose address is none of its Node's addresses is ignored, and an object named for another node is ignored", async () => {
    await ensureNode("victim");
    await cluster.apply([raw("victim", "victim", "127.0.0.1:9"), raw("impostor", "victim", `${ipOf("victim")}:7777`)]);
    await publish("real", clock.now());
    await seen({ real: clock.now() });
    expect(fleet.all().map((r) => r.name)).toEqual(["real"]);
  });

  test("a Node losing the address withdraws its inventory", async () => {
    await publish("moving", clock.now());
    await seen({ moving: clock.now() });
    await ensureNode("moving", "10.9.9.9");
    await waitFor("the inventory to leave", () => fleet.all().length === 0, 10_000, 20);
  });

  test("--inventory-trusted-networks narrows the Node's addresses: a Node address outside them is refused, and no network admits a host the Node lacks", async () => {
    const trusting = new InventoryFleet({ client, staleAfterMs: WINDOW, clock, trustedNetworks: ["192.168.50.0/24"] });
    try {
      await trusting.ready();
      await ensureNode("lan", "192.168.50.7");
      await ensureNode("roamer", "192.168.50.9");
      await cluster.apply([raw("lan", "lan", "192.168.50.7:7777"), raw("nobody", "nobody", "192.168.50.8:7777"), raw("roamer", "roamer", "192.168.50.10:7777")]);
      await waitFor("lan in the view", () => trusting.freshNode("lan") !== undefined, 10_000, 20);
      // "real" is vouched by its Node (10.0.0.4) but outside the operator's network: the attack of a node identity
      // that registered its Node at a host of its own.
      await publish("real", clock.now());
      await waitFor("real in the plain view", () => fleet.freshNode("real") !== undefined, 10_000, 20);
      expect(trusting.all().map((r) => r.name)).toEqual(["lan"]);
      expect(() => new InventoryFleet({ client, staleAfterMs: WINDOW, trustedNetworks: ["192.168.50.0"] })).toThrow('trusted network "192.168.50.0"');
    } finally {
      await trusting.stop();
    }
  });

  test("a Node heartbeat that leaves the addresses alone wakes no listener; an address change does", async () => {
    // Both Nodes known to the fleet (their inventories trusted) before counting.
    await publish("beat", clock.now());
    await publish("other", clock.now());
    await seen({ beat: clock.now(), other: clock.now() });
    let changes = 0;
    const off = fleet.onChange(() => changes++);
    try {
      const r = await cluster.adminFetch("/api/v1/nodes/beat/status", {
        method: "PATCH",
        headers: { "content-type": "application/merge-patch+json" },
        body: JSON.stringify({ status: { conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", lastHeartbeatTime: iso(Date.now()) }] } }),
      });
      expect(r.status).toBe(200);
      await r.body?.cancel();
      // Same informer stream, later event: once it is handled, the heartbeat before it was too.
      await ensureNode("other", "10.1.1.1");
      await waitFor("the address change to withdraw other", () => fleet.all().every((r) => r.name !== "other"), 10_000, 20);
      expect(changes).toBe(1);
    } finally {
      off();
    }
  });

  test("a node of the upstream Go daemon (its own name, its InternalIP as the address host, any port) is served", async () => {
    await ensureNode("go-node", "10.20.0.4");
    await cluster.apply([raw("go-node", "go-node", "10.20.0.4:7777")]);
    await waitFor("go-node in the view", () => fleet.freshNode("go-node") !== undefined, 10_000, 20);
  });

  test("an address host that is only a prefix of a Node's address, or extends one, is none of its addresses (10.0.0.1 vs 10.0.0.10, node-1 vs node-1.internal, 10.0.0.20 vs 10.0.0.2) (issue 31)", async () => {
    // Each Node's addresses: its InternalIP, then its own name as Hostname (ensureNode).
    await ensureNode("prefix-ip", "10.0.0.10");
    await ensureNode("node-1.internal", "10.0.0.77");
    await ensureNode("suffix-ip", "10.0.0.2");
    await cluster.apply([raw("prefix-ip", "prefix-ip", "10.0.0.1:7777"), raw("node-1.internal", "node-1.internal", "node-1:7777"), raw("suffix-ip", "suffix-ip", "10.0.0.20:7777")]);
    // Applied before a trusted one: once the informer has the later object, it has judged these too.
    await publish("real", clock.now());
    await seen({ real: clock.now() });
    expect(fleet.all().map((r) => r.name)).toEqual(["real"]);
    expect(fleet.freshNode("prefix-ip")).toBeUndefined();
    expect(fleet.freshNode("node-1.internal")).toBeUndefined();
    expect(fleet.freshNode("suffix-ip")).toBeUndefined();
    // Control: the same inventories naming the Nodes' exact hosts are trusted (so the refusal was the prefix's).
    await cluster.apply([raw("prefix-ip", "prefix-ip", "10.0.0.10:7777"), raw("node-1.internal", "node-1.internal", "node-1.internal:7777"), raw("suffix-ip", "suffix-ip", "10.0.0.2:7777")]);
    await waitFor("the exact hosts in the view", () => ["prefix-ip", "node-1.internal", "suffix-ip"].every((n) => fleet.freshNode(n) !== undefined), 10_000, 20);
  });
});

describe("the sharded form (issue 29, docs/inventory.md): a node's rows in NodeInventoryShards, read back as one inventory", () => {
  const row = (i: number) => ({ name: `team/sb-${String(i).padStart(3, "0")}`, id: `sb_${String(i).padStart(16, "0")}`, phase: "Running", claimMetadata: `{"i":"${i}"}` });
  const root = (node: string, generation: number, count: number, extra: Record<string, unknown> = {}) => ({
    apiVersion: "sandbox.cocoonstack.io/v1beta1",
    kind: "NodeInventory",
    metadata: { name: node },
    node,
    address: `${ipOf(node)}:7777`,
    publishedAt: iso(clock.now()),
    shards: { generation, count },
    ...extra,
  });
  const shard = (node: string, generation: number, index: number, count: number, rows: number[], name = `${node}.${generation}.${index}`) => ({
    apiVersion: "sandbox.cocoonstack.io/v1beta1",
    kind: "NodeInventoryShard",
    metadata: { name },
    node,
    generation,
    index,
    count,
    ...(rows.length ? { entries: rows.map(row) } : {}),
  });
  const ids = (node: string) => fleet.freshNode(node)?.fleet.entries.map((e) => e.id) ?? [];
  const idsOf = (rows: number[]) => [...rows].sort((a, b) => a - b).map((i) => row(i).id);
  const del = async (name: string) => (await cluster.adminFetch(`/apis/sandbox.cocoonstack.io/v1beta1/nodeinventoryshards/${name}`, { method: "DELETE" })).body?.cancel();

  test("the rows of the set the root names come back sorted in one inventory, metadata included, for every reader", async () => {
    await ensureNode("sh");
    await cluster.apply([shard("sh", 1, 0, 2, [3, 1]), shard("sh", 1, 1, 2, [2, 0]), root("sh", 1, 2)]);
    await waitFor("the shard rows in the fleet view", () => (ids("sh").length === 4 ? true : undefined), 10_000, 20);
    const rec = fleet.freshNode("sh")!;
    expect(rec.inventory.entries!.map((e) => e.name)).toEqual(["team/sb-000", "team/sb-001", "team/sb-002", "team/sb-003"]);
    expect(rec.fleet.entries.find((e) => e.id === row(2).id)?.metadata).toEqual({ i: "2" });
    expect(rec.inventory.shards).toEqual({ generation: 1, count: 2 });
  });

  test("a new set is used only once complete: until then the rows of the older complete set, and the old set's deletion changes nothing", async () => {
    await ensureNode("sh");
    await cluster.apply([shard("sh", 1, 0, 1, [0, 1, 2]), root("sh", 1, 1)]);
    await waitFor("set 1", () => (ids("sh").length === 3 ? true : undefined), 10_000, 20);
    // The root names set 2 (4 shards) before all of them reached this reader (two watches, no order between them).
    await cluster.apply([root("sh", 2, 4), shard("sh", 2, 0, 4, [0]), shard("sh", 2, 1, 4, [1, 5])]);
    await waitFor("the root naming set 2", () => (fleet.freshNode("sh")?.inventory.shards?.generation === 2 ? true : undefined), 10_000, 20);
    expect(ids("sh")).toEqual(idsOf([0, 1, 2]));
    await cluster.apply([shard("sh", 2, 2, 4, [2]), shard("sh", 2, 3, 4, [])]);
    await waitFor("set 2 complete", () => (ids("sh").length === 4 ? true : undefined), 10_000, 20);
    expect(ids("sh")).toEqual(idsOf([0, 1, 2, 5]));
    await del("sh.1.0");
    await Bun.sleep(300);
    expect(ids("sh")).toEqual(idsOf([0, 1, 2, 5]));
  });

  test("a shard counts only under its own name and node: one named for another place, or naming another node, adds nothing", async () => {
    await ensureNode("sh");
    await ensureNode("other");
    await cluster.apply([
      shard("sh", 1, 0, 1, [0]),
      root("sh", 1, 1),
      // Index 0 of set 1 under a name that says index 7; and a shard of node "other" claiming to be sh's.
      shard("sh", 1, 0, 1, [9], "sh.1.7"),
      { ...shard("other", 1, 0, 1, [8]), metadata: { name: "sh.1.1" } },
    ]);
    await waitFor("sh's one row", () => (ids("sh").length === 1 ? true : undefined), 10_000, 20);
    await Bun.sleep(300);
    expect(ids("sh")).toEqual(idsOf([0]));
    // The CRD itself refuses an index past its set.
    await expect(cluster.apply([shard("sh", 1, 3, 2, [1])])).rejects.toThrow(/index must be below count/);
  });

  test("a publish that changes only the root keeps the node's rows as the same arrays (nothing re-merged or re-rendered); a shard change brings the new rows", async () => {
    await ensureNode("sh");
    await cluster.apply([shard("sh", 1, 0, 2, [0, 2]), shard("sh", 1, 1, 2, [1]), root("sh", 1, 2)]);
    await waitFor("the rows", () => (ids("sh").length === 3 ? true : undefined), 10_000, 20);
    const first = fleet.freshNode("sh")!;
    // The next publish at steady state: a new publishedAt, no shard written.
    await cluster.apply([root("sh", 1, 2, { publishedAt: iso(clock.now() + 1000) })]);
    await waitFor("the new stamp", () => (fleet.freshNode("sh") !== first ? true : undefined), 10_000, 20);
    const second = fleet.freshNode("sh")!;
    expect(second.publishedAt).toBe(clock.now() + 1000);
    expect(second.inventory.entries).toBe(first.inventory.entries);
    expect(second.fleet.entries).toBe(first.fleet.entries);
    // One shard rewritten (a claim): its rows are read again, the others' with them.
    await cluster.apply([shard("sh", 1, 1, 2, [1, 3])]);
    await waitFor("the new row", () => (ids("sh").length === 4 ? true : undefined), 10_000, 20);
    const third = fleet.freshNode("sh")!;
    expect(third.fleet.entries).not.toBe(first.fleet.entries);
    expect(ids("sh")).toEqual(idsOf([0, 1, 2, 3]));
    expect(third.fleet.entries.find((e) => e.id === row(3).id)?.metadata).toEqual({ i: "3" });
  });

  test("a root without shards (the upstream Go daemon, or --inventory-format=single) lists its own entries and ignores leftover shards", async () => {
    await ensureNode("sh");
    await cluster.apply([shard("sh", 1, 0, 1, [0, 1])]);
    await cluster.apply([{ ...root("sh", 1, 1), shards: undefined, entries: [row(7)] }]);
    await waitFor("the inline row", () => (ids("sh").length === 1 ? true : undefined), 10_000, 20);
    expect(ids("sh")).toEqual(idsOf([7]));
  });
});
