// Issue 29 item 2: what a node's inventory publishing costs the apiserver and every reader, at 20 and at 2,000
// sandboxes a node (each with the largest metadata sandboxd accepts), in the seed's single-object form ("before") and
// the sharded form ("after", docs/inventory.md). On a real kube-apiserver with both CRDs: vk-sandbox's InventoryPublisher
// (in-process) publishes a simulated node; its Kubernetes client counts the bytes of every apply it sends, and a
// reader's two watches (nodeinventories, nodeinventoryshards) count the bytes they receive. Steady state is six
// publishes with nothing claimed or released, given per minute at the default --publish-interval of 30 s; a change is
// the publish after one release.
//
//   bun run bench -- inventory            the group, with the others' figures carried forward
//   bun tests/bench/inventory.bench.ts    prints the figures as JSON
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startSandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { InventoryPublisher, type InventoryFormat } from "#services/vk-sandbox/inventory/index.ts";
import { bunTransport, KubeClient, loadKubeConnection, type Transport } from "#shared/kube/index.ts";
import { SandboxdClient } from "#shared/sandboxd/client.ts";
import { startKubeApiserver, type TestCluster } from "../kube/harness.ts";
import { largestMetadata } from "../support/inventory-rows.ts";
import { cores, type Figure } from "./vk-sandbox-pods.bench.ts";

const REPO = join(import.meta.dir, "../..");
const NODE = "bench-inventory-node";
const STEADY_PUBLISHES = 6;
const PER_MINUTE = 60_000 / 30_000;
const COMMAND = "bun run bench -- inventory";
const quiet = { info() {}, warn() {}, debug() {}, error() {} };

interface Case {
  rows: number;
  format: InventoryFormat;
  /** Whether the publishes landed (the single form at 2,000 rows does not). */
  published: boolean;
  firstBytes: number;
  steadySentPerMinute: number;
  steadyReceivedPerMinute: number;
  changeSent: number;
  changeReceived: number;
  shards: number;
  largestObject: number;
}

/** A watch on `resource` from now on, counting the bytes it receives until stopped. */
function countingWatch(cluster: TestCluster, resource: string): { bytes(): number; stop(): void } {
  const abort = new AbortController();
  let bytes = 0;
  void (async () => {
    try {
      const r = await cluster.adminFetch(`/apis/sandbox.cocoonstack.io/v1beta1/${resource}?watch=1`, { signal: abort.signal });
      const reader = r.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        bytes += value.byteLength;
      }
    } catch {
      // aborted
    }
  })();
  return { bytes: () => bytes, stop: () => abort.abort() };
}

/** Until `read` has not changed for 500 ms (at most 15 s): the watchers have what the last publish sent. */
async function settled(read: () => number): Promise<void> {
  let last = read();
  let since = performance.now();
  const end = performance.now() + 15_000;
  while (performance.now() < end) {
    await Bun.sleep(100);
    const now = read();
    if (now !== last) {
      last = now;
      since = performance.now();
    } else if (performance.now() - since >= 500) return;
  }
}

async function removeAll(cluster: TestCluster): Promise<void> {
  for (const kind of ["nodeinventories", "nodeinventoryshards"]) {
    const r = await cluster.adminFetch(`/apis/sandbox.cocoonstack.io/v1beta1/${kind}`, { method: "DELETE" });
    await r.body?.cancel();
  }
}

export async function runInventoryBench(rowsList = [20, 2000]): Promise<Case[]> {
  const cluster = await startKubeApiserver();
  const cases: Case[] = [];
  try {
    for (const f of ["nodeinventories", "nodeinventoryshards"]) await cluster.apply(readFileSync(join(REPO, "manifests/crds", `${f}.sandbox.cocoonstack.io.yaml`), "utf8"));
    const node = await cluster.adminFetch("/api/v1/nodes", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ apiVersion: "v1", kind: "Node", metadata: { name: NODE } }) });
    await node.body?.cancel();
    const conn = await loadKubeConnection({ KUBECONFIG: cluster.kubeconfig() });
    let sent = 0;
    const inner = bunTransport(conn);
    const counting: Transport = (url, init) => {
      if (init.method === "PATCH" && init.headers["Content-Type"]?.startsWith("application/apply-patch") && init.body) sent += Buffer.byteLength(init.body);
      return inner(url, init);
    };
    const kube = new KubeClient(conn, { transport: counting });
    for (const rows of rowsList) {
      const sim = await startSandboxdSim({ pools: [`base:24.04/none/small=${rows + 1}`], maxClaims: rows + 1 });
      const sandboxd = new SandboxdClient({ baseUrl: sim.url });
      try {
        for (let i = 0; i < rows; i += 50) {
          await Promise.all(
            Array.from({ length: Math.min(50, rows - i) }, (_, j) => sandboxd.claim({ template: "base:24.04", claim_ref: `team/sbx-${i + j}`, metadata: largestMetadata(i + j), ttl_seconds: 3600 })),
          );
        }
        for (const format of ["single", "sharded"] as const) {
          await removeAll(cluster);
          const watches = [countingWatch(cluster, "nodeinventories"), countingWatch(cluster, "nodeinventoryshards")];
          const received = () => watches.reduce((n, w) => n + w.bytes(), 0);
          await Bun.sleep(300);
          let largest = 0;
          let shards = 0;
          let published = true;
          const publisher = new InventoryPublisher({
            kube,
            sandboxd,
            nodeName: NODE,
            address: sim.addr,
            ownAddresses: () => new Map(),
            intervalMs: 30_000,
            log: quiet,
            format,
            observe: (s) => {
              largest = s.largestObjectBytes;
              shards = s.shards;
            },
          });
          sent = 0;
          // Every publish runs whatever the last one did (`&&=` would skip the call once one had failed).
          const landed = async () => {
            const ok = (await publisher.publishOnce()).published;
            published = published && ok;
          };
          await landed();
          const firstBytes = sent;
          await settled(received);
          sent = 0;
          const r0 = received();
          for (let k = 0; k < STEADY_PUBLISHES; k++) await landed();
          await settled(received);
          const steadySent = sent;
          const steadyReceived = received() - r0;
          // One release: the publish after it carries the change.
          const victim = sim.claims().find((c) => c.claimRef === "team/sbx-7")!;
          await sandboxd.release(victim.id, { token: victim.token });
          sent = 0;
          const r1 = received();
          await landed();
          await settled(received);
          cases.push({
            rows,
            format,
            published,
            firstBytes,
            steadySentPerMinute: Math.round((steadySent / STEADY_PUBLISHES) * PER_MINUTE),
            steadyReceivedPerMinute: Math.round((steadyReceived / STEADY_PUBLISHES) * PER_MINUTE),
            changeSent: sent,
            changeReceived: received() - r1,
            shards,
            largestObject: largest,
          });
          for (const w of watches) w.stop();
          await sandboxd.claim({ template: "base:24.04", claim_ref: "team/sbx-7", metadata: largestMetadata(7), ttl_seconds: 3600 });
        }
      } finally {
        await sim.stop();
      }
    }
  } finally {
    await cluster.stop();
  }
  return cases;
}

export async function inventoryFigures(): Promise<Figure[]> {
  const cases = await runInventoryBench();
  const out: Figure[] = [];
  for (const c of cases.filter((x) => x.format === "sharded")) {
    const before = cases.find((x) => x.rows === c.rows && x.format === "single")!;
    const refused = before.published ? "" : `; the single form's every apply was refused at this size (etcd/413), so its node went stale and readers received nothing`;
    const notes = `${c.rows} sandboxes with 16x240-byte metadata; sharded: ${c.shards} shard(s), largest object ${c.largestObject} B; single: one object of ${before.firstBytes} B${refused}`;
    const figure = (name: string, value: number, unit: string, baseline: number, bName: string) =>
      out.push({ name, value, unit, command: COMMAND, cores, baseline: { name: bName, value: baseline, unit }, anchor: "issue 29 item 2", notes });
    figure(`inventory publish, steady, ${c.rows} sandboxes/node: bytes sent to the apiserver`, c.steadySentPerMinute, "B/min/node", before.steadySentPerMinute, "single form (seed)");
    figure(`inventory publish, steady, ${c.rows} sandboxes/node: bytes each reader receives`, c.steadyReceivedPerMinute, "B/min/node", before.steadyReceivedPerMinute, "single form (seed)");
    figure(`inventory publish after one release, ${c.rows} sandboxes/node: bytes sent`, c.changeSent, "B", before.changeSent, "single form (seed)");
    figure(`inventory publish after one release, ${c.rows} sandboxes/node: bytes each reader receives`, c.changeReceived, "B", before.changeReceived, "single form (seed)");
  }
  return out;
}

if (import.meta.main) console.log(JSON.stringify(await runInventoryBench(), null, 2));
