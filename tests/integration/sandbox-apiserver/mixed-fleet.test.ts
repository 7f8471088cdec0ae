// Issue 29 item 3: a fleet mid-migration, some nodes on the upstream Go daemons and some on ours (docs/inventory.md
// "Mixed fleets"). The Go publisher is played as the swap tests play it (tests/e2e/vk-sandbox/migration.test.ts): the
// objects it leaves, applied under its field manager `cocoon-node-inventory-publisher`, rows inline in `entries`. An
// upstream reader is played by what it decodes of a NodeInventory: the seed's fields of the object, `entries` included,
// nothing else (it knows no shards). Ours are the real binaries: vk-sandbox and sandbox-apiserver.
//
//   - our readers, upstream node: its inline rows are listed, as before;
//   - upstream reader, our node in the default sharded form: fresh, claimable (address, pools), but no rows;
//   - upstream reader, our node with --inventory-format=single: every row, as from a Go node;
//   - a node handed back to the Go daemon keeps the `shards` field vk-sandbox applied: our readers must list the Go
//     daemon's rows, not the leftover shards; a node handed to us keeps the Go daemon's `entries`: our sharded root
//     clears them, so an upstream reader never trusts rows nobody publishes any more.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { Daemon } from "../../e2e/vk-sandbox/daemon.ts";
import { freePorts } from "../../kube/ports.ts";
import { type ApiserverProcess, type Stack, rfc3339, startStack } from "./fixture.ts";
import { waitFor } from "#tests/support/wait.ts";

const REPO = join(import.meta.dir, "../../..");
const ROOT = "mixed-root-token";
const OURS = "vk-ours";
const GO = "vk-go";
const GO_MANAGER = "cocoon-node-inventory-publisher";
const INVENTORIES = "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories";

let stack: Stack;
let simOurs: SandboxdSim;
let simGo: SandboxdSim;
let server: ApiserverProcess;
let daemon: Daemon | undefined;
let kubeconfig: string;
let kubelet: number;
const goRows: { name: string; id: string; phase: string }[] = [];

/** The NodeInventory the upstream Go daemon applies for `node` (seed §9 fields, rows inline), under its manager. */
async function goPublish(node: string, sim: SandboxdSim, entries: { name: string; id: string; phase: string }[]): Promise<void> {
  const body = {
    apiVersion: "sandbox.cocoonstack.io/v1beta1",
    kind: "NodeInventory",
    metadata: { name: node },
    node,
    address: sim.addr,
    pools: sim.info().pools.map((p) => ({ template: p.key.template, net: p.key.net, size: p.key.size, warm: p.warm, target: p.target })),
    entries,
    publishedAt: rfc3339(Date.now()),
  };
  const r = await stack.cluster.adminFetch(`${INVENTORIES}/${node}?fieldManager=${GO_MANAGER}&force=true`, {
    method: "PATCH",
    headers: { "content-type": "application/apply-patch+yaml" },
    body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`go publish ${node}: ${r.status} ${await r.text()}`);
  await r.body?.cancel();
}

/** What an upstream reader decodes of a node: the seed's NodeInventory fields, the rows from `entries` only. */
async function upstreamView(node: string): Promise<{ publishedAt?: string; address?: string; pools: unknown[]; ids: string[] }> {
  const r = await stack.cluster.adminFetch(`${INVENTORIES}/${node}`);
  const o = (await r.json()) as { publishedAt?: string; address?: string; pools?: unknown[]; entries?: { id?: string }[] };
  return { publishedAt: o.publishedAt, address: o.address, pools: o.pools ?? [], ids: (o.entries ?? []).flatMap((e) => (e.id ? [e.id] : [])).sort() };
}

/** The sandboxes our aggregated API lists on `node` (label sandbox.cocoonstack.io/node), as claim ids. */
async function oursView(node: string): Promise<string[]> {
  const r = await stack.cluster.adminFetch(`/apis/agents.x-k8s.io/v1beta1/sandboxes?labelSelector=${encodeURIComponent(`sandbox.cocoonstack.io/node=${node}`)}`);
  if (!r.ok) return [];
  const list = (await r.json()) as { items: { metadata: { annotations?: Record<string, string> } }[] };
  return list.items.map((s) => s.metadata.annotations?.["sandbox.cocoonstack.io/claim-id"] ?? "").sort();
}

async function ensureNode(name: string): Promise<void> {
  const r = await stack.cluster.adminFetch("/api/v1/nodes", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "v1", kind: "Node", metadata: { name } }),
  });
  await r.body?.cancel();
  const s = await stack.cluster.adminFetch(`/api/v1/nodes/${name}/status`, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json" },
    body: JSON.stringify({ status: { addresses: [{ type: "InternalIP", address: "127.0.0.1" }, { type: "Hostname", address: name }] } }),
  });
  if (!s.ok) throw new Error(`Node ${name} status: ${s.status} ${await s.text()}`);
  await s.body?.cancel();
}

async function startOurs(...extra: string[]): Promise<void> {
  await stopOurs();
  daemon = Daemon.start({
    args: [
      `--node-name=${OURS}`,
      "--node-ip=127.0.0.1",
      `--listen-addr=127.0.0.1:${kubelet}`,
      `--sandboxd-url=${simOurs.url}`,
      `--sandboxd-token-file=${join(stack.dir, "vk-token")}`,
      `--state-path=${join(stack.dir, "vk-state", "claims.json")}`,
      "--publish-inventory",
      "--publish-interval=1s",
      ...extra,
    ],
    env: { KUBECONFIG: kubeconfig },
  });
}

async function stopOurs(): Promise<void> {
  if (!daemon) return;
  daemon.proc.kill("SIGTERM");
  await daemon.proc.exited;
  daemon = undefined;
}

let oursIds: string[] = [];

beforeAll(async () => {
  stack = await startStack();
  await stack.cluster.apply(readFileSync(join(REPO, "manifests/rbac.yaml"), "utf8"));
  await stack.cluster.apply(readFileSync(join(REPO, "manifests/node-admission.yaml"), "utf8"));
  await stack.cluster.createNamespace("kube-node-lease");
  [simOurs, simGo] = await Promise.all([
    startSandboxdSim({ rootToken: ROOT, pools: ["base:24.04/none/small=5"] }),
    startSandboxdSim({ rootToken: ROOT, pools: ["base:24.04/none/small=5"] }),
  ]);
  const claim = (sim: SandboxdSim, ref: string) => new SandboxdClient({ baseUrl: sim.url, token: ROOT }).claim({ template: "base:24.04", claim_ref: ref, metadata: { team: "t" } });
  for (const n of ["a", "b", "c"]) oursIds.push((await claim(simOurs, `team/ours-${n}`)).id);
  oursIds = oursIds.sort();
  for (const n of ["a", "b"]) {
    const c = await claim(simGo, `team/go-${n}`);
    goRows.push({ name: `team/go-${n}`, id: c.id, phase: "Running" });
  }
  await stack.cluster.apply([{ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: OURS, namespace: "sandbox-nodes" } }]);
  const token = await stack.cluster.serviceAccountToken("sandbox-nodes", OURS, 3600);
  kubeconfig = stack.cluster.kubeconfig({ auth: "token", token, path: join(stack.dir, "vk.kubeconfig") });
  [kubelet] = freePorts(1) as [number];
  writeFileSync(join(stack.dir, "vk-token"), ROOT);
  await ensureNode(GO);
  await goPublish(GO, simGo, goRows);
  await startOurs();
  server = await stack.startServer({ args: [`--sandboxd-token=${ROOT}`, "--enable-warm-pool-driver=false"] });
  await stack.register(server.port);
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await stopOurs();
  await simOurs?.stop();
  await simGo?.stop();
  await stack?.stop();
});

const goIds = () => goRows.map((r) => r.id).sort();

test("our readers list an upstream node's inline rows beside our sharded node's shard rows", async () => {
  await waitFor("both nodes in the aggregated API", async () => ((await oursView(OURS)).length === 3 && (await oursView(GO)).length === 2 ? true : undefined), 60_000);
  expect(await oursView(OURS)).toEqual(oursIds);
  expect(await oursView(GO)).toEqual(goIds());
}, 90_000);

test("an upstream reader sees our sharded node fresh and claimable but with no rows; with --inventory-format=single it sees every row", async () => {
  const sharded = await waitFor("the sharded root", async () => {
    const v = await upstreamView(OURS);
    return v.publishedAt ? v : undefined;
  }, 30_000);
  expect(sharded.address).toBe(simOurs.addr);
  expect(sharded.pools.length).toBe(1);
  expect(sharded.ids).toEqual([]);
  // The compatibility form: the seed's one object, which the Go readers decode. With a warning size below it, the
  // node says so: a log line and a Warning Event on its Node, each naming the node and the size.
  await startOurs("--inventory-format=single", "--inventory-warn-bytes=1024");
  const single = await waitFor("rows inline", async () => {
    const v = await upstreamView(OURS);
    return v.ids.length === 3 ? v : undefined;
  }, 30_000);
  expect(single.ids).toEqual(oursIds);
  const event = await waitFor("the InventoryNearLimit Event on the Node", async () => {
    const r = await stack.cluster.adminFetch(`/api/v1/namespaces/default/events?fieldSelector=${encodeURIComponent(`involvedObject.kind=Node,involvedObject.name=${OURS}`)}`);
    const list = (await r.json()) as { items: { reason: string; type: string; message: string; source?: { host?: string } }[] };
    return list.items.find((e) => e.reason === "InventoryNearLimit");
  }, 30_000);
  expect(event.type).toBe("Warning");
  expect(event.source?.host).toBe(OURS);
  expect(event.message).toMatch(new RegExp(`NodeInventory of node ${OURS}: largest object \\d+ bytes \\(3 rows, single form\\), past the warning size 1024`));
  expect(daemon!.log()).toContain(`"node":"${OURS}"`);
  expect(daemon!.log()).toMatch(/"bytes":\d+.*past the warning size 1024/);
  // Its shards are deleted, and our readers list the same rows from the inline form.
  await waitFor("the shards deleted", async () => {
    const r = await stack.cluster.adminFetch(`/apis/sandbox.cocoonstack.io/v1beta1/nodeinventoryshards?fieldSelector=node%3D${OURS}`);
    return ((await r.json()) as { items: unknown[] }).items.length === 0 ? true : undefined;
  }, 30_000);
  expect(await oursView(OURS)).toEqual(oursIds);
  await startOurs();
  await waitFor("sharded again", async () => ((await upstreamView(OURS)).ids.length === 0 ? true : undefined), 30_000);
  expect(await oursView(OURS)).toEqual(oursIds);
}, 120_000);

test("a node handed back to the Go daemon: our readers list the Go daemon's rows, not the shards vk-sandbox left", async () => {
  await waitFor("sharded root", async () => ((await upstreamView(OURS)).publishedAt ? true : undefined), 30_000);
  await stopOurs();
  // The Go daemon on the same node publishes its own view (here: one row that only it knows of) and the shards stay.
  const handedBack = [{ name: "team/go-only", id: "sb_00000000000000ff", phase: "Running" }];
  await goPublish(OURS, simOurs, handedBack);
  const raw = (await (await stack.cluster.adminFetch(`${INVENTORIES}/${OURS}`)).json()) as { shards?: unknown };
  expect(raw.shards).toBeDefined();
  await waitFor("the Go daemon's rows", async () => ((await oursView(OURS)).join() === "sb_00000000000000ff" ? true : undefined), 30_000);

  // And handed to us again: the sharded root clears the Go daemon's inline rows for upstream readers.
  await startOurs();
  await waitFor("the Go rows cleared", async () => ((await upstreamView(OURS)).ids.length === 0 ? true : undefined), 30_000);
  await waitFor("ours again", async () => ((await oursView(OURS)).join() === oursIds.join() ? true : undefined), 30_000);
}, 120_000);
