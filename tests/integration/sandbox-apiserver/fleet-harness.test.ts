// Issue 29 item 4: the fleet harness itself (tests/kube/fleet.ts), at a modest size. 20 simulated nodes × 200
// sandboxes publish through vk-sandbox's InventoryPublisher on the real kube-apiserver, beside one real node (the
// sandboxd simulator, published the same way); sandbox-apiserver with its e2b surface reads them. What the fleet bench
// (tests/bench/fleet.bench.ts) measures is only worth as much as this: every simulated row is a sandbox of the
// aggregated API on its own node and in its namespace, the e2b surface lists a namespace's rows exactly and reads one
// by id with its metadata, creates are placed on the real node only (the simulated ones advertise no pools), and a
// steady wave applies one root per node and no shard.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { InventoryPublisher } from "#services/vk-sandbox/inventory/index.ts";
import { publicSandboxId } from "#shared/e2b/index.ts";
import { KubeClient, loadKubeConnection } from "#shared/kube/index.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { SimulatedFleet } from "../../kube/fleet.ts";
import { startTestGuest, type TestGuest } from "../e2b/guest.ts";
import { vouchingNode } from "../../kube/nodes.ts";
import { freePorts } from "../../kube/ports.ts";
import { e2bServerArgs, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";
import { waitFor } from "#tests/support/wait.ts";
import { type ApiserverProcess, type Stack, startStack } from "./fixture.ts";

const NODES = 20;
const PER_NODE = 200;
const NAMESPACES = 20;
const ROOT = "fleet-harness-root";
const KEY = "e2b_fleetharnesskey000000000000000000000";
const NS = "fleet-3";
const REAL = "fleet-harness-real";
const quiet = { info() {}, warn() {}, debug() {}, error() {} };

let stack: Stack;
let sim: SandboxdSim;
let guest: TestGuest;
let fleet: SimulatedFleet;
let real: InventoryPublisher;
let server: ApiserverProcess;
let e2bUrl: string;

type SandboxList = { items: { metadata: { namespace: string; name: string; annotations?: Record<string, string> }; status: { nodeName?: string } }[] };

const aggregated = async <T>(path: string): Promise<T> => {
  const r = await stack.cluster.adminFetch(`/apis/agents.x-k8s.io/v1beta1${path}`);
  const text = await r.text();
  if (!r.ok) throw new Error(`${path}: ${r.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
};

beforeAll(async () => {
  stack = await startStack();
  sim = await startSandboxdSim({ rootToken: ROOT, pools: ["img:1/none/small=4"] });
  // A create runs envd /init through the node's ports relay: the shared test guest answers it.
  guest = await startTestGuest();
  sim.attachGuest("*", 49983, guest.port);
  await vouchingNode(stack.cluster, REAL, sim.addr);
  const kube = new KubeClient(await loadKubeConnection({ KUBECONFIG: stack.admin }));
  real = new InventoryPublisher({ kube, sandboxd: new SandboxdClient({ baseUrl: sim.url, token: ROOT }), nodeName: REAL, address: sim.addr, ownAddresses: () => new Map(), intervalMs: 30_000, log: quiet });
  fleet = new SimulatedFleet({ cluster: stack.cluster, kube, sandboxesPerNode: PER_NODE, namespaces: NAMESPACES });
  await fleet.addNodes(NODES);
  const first = await fleet.publishWave();
  expect(first.failed).toEqual([]);
  expect((await real.publishOnce()).published).toBe(true);
  writeE2bFiles(stack.dir, `${KEY} ${NS}\n`);
  const [port] = freePorts(1);
  e2bUrl = `http://127.0.0.1:${port}`;
  server = await stack.startServer({ args: [...e2bServerArgs({ rootToken: ROOT, port, dir: stack.dir }), "--canary-interval=0"] });
  await stack.register(server.port);
}, 240_000);

afterAll(async () => {
  await server?.stop();
  await fleet?.stop();
  await guest?.stop();
  await sim?.stop();
  await stack?.stop();
});

test("every simulated row is a sandbox of the aggregated API, on its node, in its namespace", async () => {
  const all = await waitFor("the aggregated API to list the whole fleet", async () => {
    const l = await aggregated<SandboxList>("/sandboxes").catch(() => undefined);
    return l && l.items.length === NODES * PER_NODE ? l : undefined;
  }, 120_000);
  const want = new Map(fleet.nodes.flatMap((n) => n.rows.map((r) => [r.claim_ref!, n.name] as const)));
  const got = new Map(all.items.map((s) => [`${s.metadata.namespace}/${s.metadata.name}`, s.status.nodeName]));
  expect(got.size).toBe(want.size);
  expect([...want].filter(([k, node]) => got.get(k) !== node)).toEqual([]);
  const ns = await aggregated<SandboxList>(`/namespaces/${NS}/sandboxes`);
  expect(ns.items).toHaveLength(fleet.rowsIn(NS));
  expect(ns.items.length).toBe((NODES * PER_NODE) / NAMESPACES);
  // One by name, with the metadata its node published.
  const one = fleet.nodes[13]!.rows[7]!;
  const [oneNs, oneName] = one.claim_ref!.split("/") as [string, string];
  const got1 = await aggregated<SandboxList["items"][number]>(`/namespaces/${oneNs}/sandboxes/${oneName}`);
  expect(got1.status.nodeName).toBe(fleet.nodes[13]!.name);
  expect(JSON.parse(Object.entries(got1.metadata.annotations ?? {}).find(([k]) => k.endsWith("/metadata"))?.[1] ?? "{}")).toEqual(one.metadata!);
}, 150_000);

test("the e2b surface lists exactly its namespace's simulated sandboxes, reads one by id, and places creates on the real node", async () => {
  const mine = fleet.nodes.flatMap((n) => n.rows).filter((r) => r.claim_ref!.startsWith(`${NS}/`));
  const seen = new Set<string>();
  let next: string | null = null;
  for (let pages = 0; pages < 50; pages++) {
    const q: string = next ? `&nextToken=${encodeURIComponent(next)}` : "";
    const r = await fetch(`${e2bUrl}/v2/sandboxes?limit=100${q}`, { headers: { "x-api-key": KEY } });
    expect(r.status).toBe(200);
    for (const s of (await r.json()) as { sandboxID: string }[]) seen.add(s.sandboxID);
    next = r.headers.get("x-next-token");
    if (!next) break;
  }
  expect([...seen].sort()).toEqual(mine.map((r) => publicSandboxId(r.id)).sort());
  const one = mine[42]!;
  const r = await fetch(`${e2bUrl}/sandboxes/${publicSandboxId(one.id)}`, { headers: { "x-api-key": KEY } });
  expect(r.status).toBe(200);
  expect(((await r.json()) as { metadata?: Record<string, string> }).metadata).toEqual(one.metadata!);
  // A row of another namespace is not this key's to read.
  const other = fleet.nodes[0]!.rows.find((x) => !x.claim_ref!.startsWith(`${NS}/`))!;
  const hidden = await fetch(`${e2bUrl}/sandboxes/${publicSandboxId(other.id)}`, { headers: { "x-api-key": KEY } });
  expect(hidden.status).toBe(404);
  await hidden.body?.cancel();

  const created = await fetch(`${e2bUrl}/sandboxes`, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base" }) });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}\n${server.stderr().slice(-2000)}`);
  const { sandboxID } = (await created.json()) as { sandboxID: string };
  expect(sim.claims().map((c) => publicSandboxId(c.id))).toContain(sandboxID);
  const killed = await fetch(`${e2bUrl}/sandboxes/${sandboxID}`, { method: "DELETE", headers: { "x-api-key": KEY } });
  expect(killed.status).toBe(204);
}, 120_000);

test("a steady wave applies one root per node and no shard; the stamps advance", async () => {
  const before = await publishedAtOf(fleet.nodes[5]!.name);
  await Bun.sleep(1100); // publishedAt has millisecond precision; one second apart reads unambiguously
  const wave = await fleet.publishWave();
  expect(wave.failed).toEqual([]);
  expect(wave.published).toBe(NODES);
  expect(wave.appliedObjects).toBe(NODES);
  expect(Date.parse(await publishedAtOf(fleet.nodes[5]!.name))).toBeGreaterThan(Date.parse(before));
}, 60_000);

async function publishedAtOf(node: string): Promise<string> {
  const r = await stack.cluster.adminFetch(`/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/${node}`);
  const body = (await r.json()) as { publishedAt: string };
  return body.publishedAt;
}
