// Issue 29: a node at its full 2,000-sandbox capacity, every sandbox carrying the largest caller metadata sandboxd
// (and so the e2b surface) accepts — 16 pairs, 4 KiB as JSON — plus Pod-path rows, published by the real vk-sandbox
// binary to the real kube-apiserver. The seed's single object would be about 9 MiB (etcd refuses 1.5 MiB; the
// apiserver answers 413 past 3 MiB), so the node publishes the sharded form (docs/inventory.md) and must stay fresh:
// `publishedAt` keeps advancing, no object comes near the limit, and every sandbox stays visible to the aggregated
// API (with its metadata), the e2b surface (its namespace's list, paged) and the envd proxy (found in the inventory,
// not by a probe). Sized for 2 busy cores: the claims go straight to the simulator, the daemon publishes every 2 s.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { InventoryFleet } from "#shared/fleet/index.ts";
import { KubeClient, loadKubeConnection } from "#shared/kube/index.ts";
import { EnvdRelay } from "#shared/relay/index.ts";
import { createLogger } from "#shared/log/index.ts";
import { Daemon } from "../../e2e/vk-sandbox/daemon.ts";
import { kubectl } from "../../kube/kubectl.ts";
import { freePorts } from "../../kube/ports.ts";
import { type ApiserverProcess, type Stack, startStack } from "./fixture.ts";
import { e2bServerArgs, writeE2bFiles } from "#tests/support/e2b-apiserver.ts";
import { waitFor } from "#tests/support/wait.ts";
import { largestMetadata } from "#tests/support/inventory-rows.ts";

const REPO = join(import.meta.dir, "../../..");
const ROOT = "vk-root-token";
const NODE = "vk-full-node";
const KEY = "e2b_fullcapacitykey0000000000000000000000";
const NS = "team-full";
const CAPACITY = 2000;
const PODS = 5;
const DIRECT = CAPACITY - PODS;
const metadataOf = largestMetadata;

let stack: Stack;
let sim: SandboxdSim;
let daemon: Daemon;
let server: ApiserverProcess;
let fleet: InventoryFleet;
let e2bUrl: string;
let kubelet: number;

beforeAll(async () => {
  stack = await startStack();
  await stack.cluster.apply(readFileSync(join(REPO, "manifests/rbac.yaml"), "utf8"));
  // The node admission policy too: a node identity may write its own shards, named <node>.<generation>.<index>.
  await stack.cluster.apply(readFileSync(join(REPO, "manifests/node-admission.yaml"), "utf8"));
  await stack.cluster.createNamespace("kube-node-lease");
  await stack.cluster.createNamespace(NS);
  sim = await startSandboxdSim({ rootToken: ROOT, pools: [`base:24.04/none/small=${CAPACITY}`], maxClaims: CAPACITY });
  const client = new SandboxdClient({ baseUrl: sim.url, token: ROOT });
  for (let i = 0; i < DIRECT; i += 25) {
    await Promise.all(
      Array.from({ length: Math.min(25, DIRECT - i) }, (_, j) =>
        client.claim({ template: "base:24.04", claim_ref: `${NS}/sbx-${i + j}`, metadata: metadataOf(i + j), ttl_seconds: 3600 }),
      ),
    );
  }
  expect(sim.claims()).toHaveLength(DIRECT);

  await stack.cluster.apply([{ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: NODE, namespace: "sandbox-nodes" } }]);
  const token = await stack.cluster.serviceAccountToken("sandbox-nodes", NODE, 3600);
  const kubeconfig = stack.cluster.kubeconfig({ auth: "token", token, path: join(stack.dir, "vk.kubeconfig") });
  const [kubeletPort, e2bPort] = freePorts(2);
  kubelet = kubeletPort!;
  const tokenFile = join(stack.dir, "vk-token");
  writeFileSync(tokenFile, ROOT);
  daemon = Daemon.start({
    args: [
      `--node-name=${NODE}`,
      "--node-ip=127.0.0.1",
      `--listen-addr=127.0.0.1:${kubelet}`,
      `--sandboxd-url=${sim.url}`,
      `--sandboxd-token-file=${tokenFile}`,
      `--state-path=${join(stack.dir, "vk-state", "claims.json")}`,
      "--node-pods=2000",
      // The kubelet port's /metrics, scraped below with the cluster's kubelet client certificate.
      `--client-ca-file=${stack.cluster.clientCaFile}`,
      "--publish-inventory",
      "--publish-interval=2s",
    ],
    env: { KUBECONFIG: kubeconfig },
  });
  // Pod-path rows: Pods bound to the node, claimed by the daemon (claim_ref default/<pod>), long names included.
  for (let p = 0; p < PODS; p++) {
    const name = `capacity-pod-${p}-`.padEnd(200, "x");
    const created = await kubectl(["create", "-f", "-"], {
      kubeconfig: stack.admin,
      stdin: JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: "default", annotations: { "sandbox.cocoonstack.io/template": "base:24.04" } },
        spec: {
          nodeName: NODE,
          tolerations: [{ key: "virtual-kubelet.io/provider", operator: "Equal", value: "sandboxd", effect: "NoSchedule" }],
          containers: [{ name: "sandbox", image: "base:24.04" }],
        },
      }),
    });
    // kubectl warns that a name past 63 characters is a poor hostname; the Pod is created all the same.
    expect(created.code).toBe(0);
  }
  writeE2bFiles(stack.dir, `${KEY} ${NS}\n`);
  server = await stack.startServer({ args: e2bServerArgs({ rootToken: ROOT, port: e2bPort, dir: stack.dir }) });
  await stack.register(server.port);
  e2bUrl = `http://127.0.0.1:${e2bPort}`;

  // The envd proxy's own fleet view (what sandbox-envd-proxy runs): an informer pair on the real apiserver.
  const conn = await loadKubeConnection({ KUBECONFIG: stack.admin });
  fleet = new InventoryFleet({ client: new KubeClient(conn), staleAfterMs: 90_000 });
  await fleet.ready();
  await waitFor(
    `all ${CAPACITY} rows in the fleet view:\n${daemon.log().slice(-3000)}`,
    () => (fleet.nodes()[0]?.entries.length === CAPACITY ? true : undefined),
    240_000,
  );
}, 300_000);

afterAll(async () => {
  await fleet?.stop();
  await server?.stop();
  daemon?.proc.kill("SIGTERM");
  await daemon?.proc.exited;
  await sim?.stop();
  await stack?.stop();
});

const adminJson = async <T>(path: string): Promise<{ body: T; bytes: number }> => {
  const r = await stack.cluster.adminFetch(path);
  const text = await r.text();
  if (!r.ok) throw new Error(`${path}: ${r.status} ${text.slice(0, 300)}`);
  return { body: JSON.parse(text) as T, bytes: Buffer.byteLength(text) };
};

test("the node publishes 2,000 rows of the largest metadata in shards far below etcd's limit, and stays fresh", async () => {
  const root = await adminJson<{ publishedAt: string; shards?: { generation: number; count: number }; entries?: unknown[] }>(
    `/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/${NODE}`,
  );
  expect(root.body.entries).toEqual([]);
  expect(root.body.shards?.count).toBeGreaterThan(1);
  expect(root.bytes).toBeLessThan(64 * 1024);
  const shards = await adminJson<{ items: { metadata: { name: string }; entries?: unknown[]; generation: number }[] }>(
    `/apis/sandbox.cocoonstack.io/v1beta1/nodeinventoryshards?fieldSelector=node%3D${NODE}`,
  );
  const current = shards.body.items.filter((s) => s.generation === root.body.shards!.generation);
  expect(current).toHaveLength(root.body.shards!.count);
  expect(current.reduce((n, s) => n + (s.entries?.length ?? 0), 0)).toBe(CAPACITY);
  // Each shard is stored with room to spare under etcd's 1.5 MiB request limit.
  for (const s of current) {
    const one = await adminJson<unknown>(`/apis/sandbox.cocoonstack.io/v1beta1/nodeinventoryshards/${s.metadata.name}`);
    expect(one.bytes).toBeLessThan(600 * 1024);
  }
  // Two more publishes land: publishedAt advances, so no reader ever drops the node as stale.
  const first = Date.parse(root.body.publishedAt);
  const advanced = await waitFor("publishedAt to advance twice", async () => {
    const now = await adminJson<{ publishedAt: string }>(`/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/${NODE}`);
    return Date.parse(now.body.publishedAt) >= first + 4000 ? now : undefined;
  }, 60_000);
  expect(Date.parse(advanced.body.publishedAt)).toBeGreaterThan(first);
  expect(fleet.staleCount()).toBe(0);

  // What the node says of its size (docs/inventory.md): every row, in many objects none of them near etcd's limit.
  const { certPem, keyPem } = stack.cluster.kubeletClient;
  const metrics = await (await fetch(`https://127.0.0.1:${kubelet}/metrics`, { tls: { rejectUnauthorized: false, cert: certPem, key: keyPem } })).text();
  const gauge = (series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(metrics)?.[1]);
  expect(gauge("vk_sandbox_inventory_rows")).toBe(CAPACITY);
  expect(gauge("vk_sandbox_inventory_shards")).toBe(root.body.shards!.count);
  expect(gauge('vk_sandbox_inventory_bytes{object="largest"}')).toBeLessThan(512 * 1024);
  expect(gauge('vk_sandbox_inventory_bytes{object="total"}')).toBeGreaterThan(8 * 1024 * 1024);
  expect(daemon.log()).not.toContain("past the warning size");
}, 120_000);

test("every sandbox is in the aggregated API with its metadata, in the e2b surface's list, and found by the proxy in the inventory", async () => {
  // The aggregated API (kube-apiserver -> APIService -> sandbox-apiserver).
  type SandboxList = { items: { metadata: { namespace: string; name: string; annotations?: Record<string, string> } }[] };
  // The APIService turns Available a moment after registration; its inventory cache holds every row by then or soon.
  const all = await waitFor("the aggregated API to list every sandbox", async () => {
    const r = await adminJson<SandboxList>("/apis/agents.x-k8s.io/v1beta1/sandboxes").catch(() => undefined);
    return r && r.body.items.length === CAPACITY ? r : undefined;
    // One list is ~9 MB of JSON through the aggregator: on a loaded machine each try takes many seconds.
  }, 150_000);
  expect(all.body.items).toHaveLength(CAPACITY);
  const mine = all.body.items.filter((s) => s.metadata.namespace === NS);
  expect(mine).toHaveLength(DIRECT);
  expect(all.body.items.filter((s) => s.metadata.namespace === "default")).toHaveLength(PODS);
  const sample = mine.find((s) => s.metadata.name === "sbx-1234")!;
  const md = Object.values(sample.metadata.annotations ?? {}).find((v) => v.startsWith("{"));
  expect(JSON.parse(md ?? "{}")).toEqual(metadataOf(1234));

  // The e2b surface: the namespace's key lists every one of its sandboxes, page by page, metadata included.
  const seen = new Set<string>();
  let next: string | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const q: string = next ? `&nextToken=${encodeURIComponent(next)}` : "";
    const r = await fetch(`${e2bUrl}/v2/sandboxes?limit=100${q}`, { headers: { "x-api-key": KEY } });
    expect(r.status).toBe(200);
    const page = (await r.json()) as { sandboxID: string; metadata?: Record<string, string> }[];
    for (const s of page) seen.add(s.sandboxID);
    if (pages === 0) expect(Object.keys(page[0]?.metadata ?? {}).filter((k) => /^k\d\d$/.test(k))).toHaveLength(16);
    next = r.headers.get("x-next-token");
    if (!next) break;
  }
  expect(seen.size).toBe(DIRECT);

  // The envd proxy: each sandbox resolves from the NodeInventory (its shards), never by probing the nodes.
  const relay = new EnvdRelay({ domain: "sb.test", fleet, envdSecret: "envd-secret", rootToken: ROOT, namespace: "", guestHttp2: false, log: createLogger({ level: "error", name: "proxy" }) });
  const ids = sim.claims().filter((c) => c.claimRef?.startsWith(`${NS}/`)).map((c) => c.id);
  expect(ids).toHaveLength(DIRECT);
  for (const id of ids.filter((_, i) => i % 40 === 0)) {
    const r = await relay.owners.resolve(id, undefined);
    expect(r.kind === "ok" ? r.source : r.kind).toBe("inventory");
  }
}, 180_000);
