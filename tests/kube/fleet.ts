// A simulated fleet on the real kube-apiserver (issue 29 item 4): many nodes in this one process, each publishing
// its NodeInventory and NodeInventoryShards with vk-sandbox's own InventoryPublisher (the same build, sharding,
// digests and server-side applies as the daemon), so every reader sees exactly what a fleet of daemons would write.
// What makes it cheap is what stands behind each publisher: no sandboxd simulator, only a fixed list of rows in
// memory (InventorySandboxd: list + info), and at the node's address one small listener serving sandboxd's reads of
// those rows (a sandbox by id, the list, info) and 404 for anything else, so a reader that reads a sandbox live gets
// its row, and one that probes the fleet for a sandbox elsewhere meets a real "not here" from each node.
// Each node gets its Node object with that address among its status.addresses, so the readers' trust check
// (shared/fleet/trust.ts) vouches for it.
//
// Rows: node i holds `sandboxesPerNode` sandboxes named `<ns>/sbx-<global index>`, spread round-robin over
// `namespaces` namespaces `fleet-0`… (so one namespace holds rows of every node), each with two small metadata pairs
// as the e2b surface writes them, a deadline and a claim time. Nothing here is claimed or released: a publish wave at
// steady state is what the fleet costs when nothing happens.
import type { InventoryPublisher as Publisher } from "#services/vk-sandbox/inventory/index.ts";
import { InventoryPublisher } from "#services/vk-sandbox/inventory/index.ts";
import type { KubeClient } from "#shared/kube/index.ts";
import type { Info, SandboxRow } from "#shared/sandboxd/index.ts";
import { vouchingNode } from "./nodes.ts";
import type { TestCluster } from "./harness.ts";

const quiet = { info() {}, warn() {}, debug() {}, error() {} };

export interface SimulatedFleetOptions {
  cluster: Pick<TestCluster, "adminFetch">;
  /** The publishers' client (one for all nodes). */
  kube: KubeClient;
  sandboxesPerNode: number;
  /** Rows go round-robin over namespaces fleet-0 … fleet-(n-1). */
  namespaces: number;
  /** Node names are `<prefix>-<i>` (default `sim`). */
  prefix?: string;
  /** Publishes in flight at once in a wave (default 8). */
  concurrency?: number;
}

export interface SimulatedNode {
  name: string;
  address: string;
  rows: SandboxRow[];
  publisher: Publisher;
}

export interface WaveResult {
  ms: number;
  published: number;
  failed: { node: string; reason: string }[];
  /** Bytes the wave's applies carried (root and changed shards), from the publishers' own accounting. */
  appliedBytes: number;
  appliedObjects: number;
}

const hex16 = (n: number) => n.toString(16).padStart(16, "0");

export class SimulatedFleet {
  readonly nodes: SimulatedNode[] = [];
  private readonly stubs: ReturnType<typeof Bun.serve>[] = [];
  private readonly prefix: string;

  constructor(private readonly o: SimulatedFleetOptions) {
    this.prefix = o.prefix ?? "sim";
  }

  /** The namespace of the row with global index `g`. */
  namespaceOf(g: number): string {
    return `fleet-${g % this.o.namespaces}`;
  }

  /** Rows per namespace across the fleet as it is now. */
  rowsIn(namespace: string): number {
    return this.nodes.reduce((n, node) => n + node.rows.filter((r) => r.claim_ref!.startsWith(`${namespace}/`)).length, 0);
  }

  get totalRows(): number {
    return this.nodes.length * this.o.sandboxesPerNode;
  }

  /** Adds `count` nodes: a Node vouching for each one's address, its rows, its publisher. Nothing is published yet. */
  async addNodes(count: number): Promise<SimulatedNode[]> {
    const added: SimulatedNode[] = [];
    const now = Date.now();
    for (let k = 0; k < count; k++) {
      const i = this.nodes.length;
      const name = `${this.prefix}-${i}`;
      // The node's sandboxd, reads only: its rows by id and as a list, its info; everything else 404 with sandboxd's
      // error body (so a reader probing the fleet for a sandbox elsewhere hears "not here").
      const rows: SandboxRow[] = [];
      const byId = new Map<string, SandboxRow>();
      let info: Info | undefined;
      const stub = Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        fetch: (req) => {
          const path = new URL(req.url).pathname;
          if (req.method === "GET" && path === "/v1/info" && info) return Response.json(info);
          if (req.method === "GET" && path === "/v1/sandboxes") return Response.json({ sandboxes: rows });
          const row = req.method === "GET" ? byId.get(/^\/v1\/sandboxes\/([^/]+)$/.exec(path)?.[1] ?? "") : undefined;
          return row ? Response.json(row) : Response.json({ error: "sandbox not found" }, { status: 404 });
        },
      });
      this.stubs.push(stub);
      const address = `127.0.0.1:${stub.port}`;
      await vouchingNode(this.o.cluster, name, address);
      for (let j = 0; j < this.o.sandboxesPerNode; j++) {
        const g = i * this.o.sandboxesPerNode + j;
        rows.push({
          id: `sb_${hex16(0x5100000000 + g)}`,
          key: { template: "img:1", net: "none", size: "small" },
          hibernated: false,
          deadline: new Date(now + 86_400_000).toISOString(),
          claimed_at: new Date(now - (g % 3600) * 1000).toISOString(),
          claim_ref: `${this.namespaceOf(g)}/sbx-${g}`,
          metadata: { owner: `user-${g % 97}`, purpose: "fleet-bench" },
          cpu_count: 2,
          mem_total_bytes: 536_870_912,
        });
        byId.set(rows[j]!.id, rows[j]!);
      }
      info = { pools: [], templates: [], claimed: rows.length, advertise_addr: address };
      const nodeInfo = info;
      const publisher = new InventoryPublisher({
        kube: this.o.kube,
        sandboxd: { list: async () => rows, info: async () => nodeInfo },
        nodeName: name,
        address,
        ownAddresses: () => new Map(),
        intervalMs: 30_000,
        log: quiet,
        format: "sharded",
      });
      const node = { name, address, rows, publisher };
      this.nodes.push(node);
      added.push(node);
    }
    return added;
  }

  /** One publish of every node (or of `only`), `concurrency` at a time, as each node's --publish-interval tick would. */
  async publishWave(only: readonly SimulatedNode[] = this.nodes): Promise<WaveResult> {
    const t0 = performance.now();
    const failed: WaveResult["failed"] = [];
    let published = 0;
    let appliedBytes = 0;
    let appliedObjects = 0;
    const queue = [...only];
    const worker = async () => {
      for (let n = queue.shift(); n; n = queue.shift()) {
        const out = await n.publisher.publishOnce();
        if (out.published) {
          published++;
          appliedBytes += out.sizes.appliedBytes;
          appliedObjects += out.sizes.appliedObjects;
        } else failed.push({ node: n.name, reason: `${out.reason}: ${out.error instanceof Error ? out.error.message : String(out.error ?? "")}`.slice(0, 300) });
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.o.concurrency ?? 8, queue.length) }, worker));
    return { ms: performance.now() - t0, published, failed, appliedBytes, appliedObjects };
  }

  /** Stops the address listeners (the objects stay in the cluster: it is stopped whole by its owner). */
  async stop(): Promise<void> {
    for (const s of this.stubs.splice(0)) s.stop(true);
  }
}
