// The Kubernetes source of the fleet view (docs/fleet.md): one NodeInventory informer (a LIST, then WATCH; never a
// per-request LIST), an immutable snapshot rebuilt per event, and the freshness rule of --inventory-stale-after
// applied at read time against this process's clock (freshNodes in view.ts). Besides the FleetNode snapshot the e2b
// surface and the relay read, it keeps each node's raw NodeInventory: the aggregated API renders fields (addr,
// claimRef, entries without an id) that FleetEntry does not carry. A second informer, on Nodes, feeds the trust
// check of trust.ts: an inventory that fails it is absent from every read (issue 22 case 2), since every reader
// sends the fleet's root token to the inventory's address. A third, on NodeInventoryShards, brings the rows of nodes
// publishing the sharded form (docs/inventory.md): such a node's record carries its root with the rows of its newest
// complete shard set put back in `entries`, so every reader sees one NodeInventory per node, whichever form a node
// publishes (an upstream Go node, or ours with --inventory-format=single, still lists them inline).
import type { Logger } from "pino";
import { type Clock, realClock } from "../clock/index.ts";
import { formatGoDuration } from "../config/index.ts";
import type { KubeClient } from "../kube/index.ts";
import { Informer, isForbidden, isNotFound, Nodes } from "../kube/index.ts";
import { type InventoryEntry, NodeInventories, NodeInventory, NodeInventoryShard, NodeInventoryShards, shardName } from "../inventory/index.ts";
import { type Net, NETS, type Size, SIZES, parseWireTime } from "../sandboxd/index.ts";
import type { FleetEntry, FleetNode, FleetPool, FleetSource, FleetTemplate } from "./types.ts";
import { freshNodes, namespaceOfName } from "./view.ts";
import { inventoryTrust, type NodeAddresses, TrustedNetworks } from "./trust.ts";
import { DemandMeter } from "./demand.ts";

/** How long ready() waits for the first LIST before naming the missing CRD (sandbox-apiserver.md §1.1 step 5). */
export const INVENTORY_SYNC_TIMEOUT_MS = 120_000;

/** One node as the last inventory event left it: the raw object (validated) and its fleet-view rendering. */
export interface InventoryRecord {
  name: string;
  address: string;
  /** Epoch ms of `publishedAt`; undefined when absent, unparsable or Go's zero time (an unstamped node). */
  publishedAt?: number;
  inventory: NodeInventory;
  fleet: FleetNode;
}

export interface InventoryFleetOptions {
  client: KubeClient;
  /** --inventory-stale-after in ms (always positive). */
  staleAfterMs: number;
  clock?: Clock;
  log?: Logger;
  syncTimeoutMs?: number;
  /** --inventory-trusted-networks: when set, an address host must lie in one of these as well as be its Node's. */
  trustedNetworks?: readonly string[];
}

type RawInventory = { metadata?: { name?: string; resourceVersion?: string } } & Record<string, unknown>;

type RawShard = { metadata?: { name?: string; resourceVersion?: string }; node?: unknown } & Record<string, unknown>;

export class InventoryFleet implements FleetSource {
  private readonly informer: Informer<RawInventory>;
  private readonly shardInformer: Informer<RawShard>;
  /** Per node: its shard objects by name (raw), kept by the shard informer's events. */
  private readonly shardsByNode = new Map<string, Map<string, RawShard>>();
  /** Per node: bumped on every shard event, so a record is rebuilt exactly when one of its shards changed. */
  private readonly shardEpoch = new Map<string, number>();
  /** Per shard name: the version parsed and its result (null: refused), so an unchanged shard is parsed once. */
  private readonly parsedShards = new Map<string, { rv: string; shard: NodeInventoryShard | null }>();
  /** Per node: the rows last merged from its shards, and the shard epoch and set they were merged for. */
  private readonly mergedRows = new Map<string, { epoch: number; generation: number; count: number; entries: InventoryEntry[] | undefined }>();
  /** Sets already logged as incomplete (node/generation/count), bounded. */
  private readonly warnedIncomplete = new Set<string>();
  private readonly nodeInformer: Informer<NodeAddresses & { metadata?: { name?: string; resourceVersion?: string } }>;
  private readonly networks: TrustedNetworks;
  /** Per inventory name: the version refused and why, so it is neither re-parsed nor re-logged until it changes. */
  private readonly refused = new Map<string, { rv: Version; reason: string }>();
  private readonly clock: Clock;
  private readonly log?: Logger;
  /** Sorted by name; replaced (never mutated) on every event, so a reader may hold one. */
  private records: readonly InventoryRecord[] = [];
  /** Per object name: the resourceVersion its record was built from, so an unchanged node is not re-rendered. */
  private readonly built = new Map<string, { rv: Version; record: InventoryRecord }>();
  private readonly listeners = new Set<() => void>();
  private started = false;
  /** Claim rate and refill time per key, observed on every inventory change (docs/fleet.md "Demand"). */
  readonly demand: DemandMeter;

  /** No side effects: the informer starts on ready(). */
  constructor(private readonly o: InventoryFleetOptions) {
    this.clock = o.clock ?? realClock;
    this.demand = new DemandMeter(this.clock);
    this.log = o.log;
    this.networks = new TrustedNetworks(o.trustedNetworks ?? []);
    this.informer = new Informer<RawInventory>(o.client, NodeInventories, { log: o.log });
    this.nodeInformer = new Informer(o.client, Nodes, { log: o.log });
    this.shardInformer = new Informer<RawShard>(o.client, NodeInventoryShards, { log: o.log });
    // Every event rebuilds once per burst (queueRebuild), not once each: a reader's first LIST delivers every root and
    // Node as one synchronous loop of adds, and a rebuild per add walked every root so far (quadratic in nodes on
    // every restart), warning of each sharded node whose shards had not been listed yet.
    const rebuild = () => this.queueRebuild();
    const shardEvent = (raw: RawShard, gone: boolean) => {
      const node = typeof raw.node === "string" ? raw.node : "";
      const name = raw.metadata?.name ?? "";
      let m = this.shardsByNode.get(node);
      if (gone) {
        m?.delete(name);
        if (m?.size === 0) this.shardsByNode.delete(node);
        this.parsedShards.delete(name);
      } else {
        if (!m) this.shardsByNode.set(node, (m = new Map()));
        m.set(name, raw);
      }
      this.shardEpoch.set(node, (this.shardEpoch.get(node) ?? 0) + 1);
      this.queueRebuild();
    };
    this.shardInformer.onAdd((o) => shardEvent(o, false));
    this.shardInformer.onUpdate((prev, o) => {
      // A shard's node never changes under one name (the publisher names it after the node), but an object
      // rewritten by hand might: drop it from the old node's set first.
      if (prev.node !== o.node) shardEvent(prev, true);
      shardEvent(o, false);
    });
    this.shardInformer.onDelete((o) => shardEvent(o, true));
    this.informer.onAdd(rebuild);
    this.informer.onUpdate(rebuild);
    this.informer.onDelete(rebuild);
    // A Node's status changes with every heartbeat; only its coming, going or addresses can change a verdict, so
    // only those rebuild (and so wake the warm-pool driver and the watchers).
    this.nodeInformer.onAdd(rebuild);
    this.nodeInformer.onDelete(rebuild);
    this.nodeInformer.onUpdate((a, b) => {
      if (addressesKey(a) !== addressesKey(b)) rebuild();
    });
  }

  async ready(signal?: AbortSignal): Promise<void> {
    if (!this.started) {
      this.started = true;
      this.informer.start();
      this.nodeInformer.start();
      this.shardInformer.start();
    }
    const timeoutMs = this.o.syncTimeoutMs ?? INVENTORY_SYNC_TIMEOUT_MS;
    let timer: { cancel(): void } | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = this.clock.after(timeoutMs, () =>
        reject(
          new Error(
            !this.informer.hasSynced()
              ? `kubeinventory: node inventory cache did not sync within ${formatGoDuration(BigInt(timeoutMs) * 1_000_000n)} ` +
                  `(is the NodeInventory.sandbox.cocoonstack.io CRD installed?)`
              : !this.nodeInformer.hasSynced()
                ? `kubeinventory: node cache did not sync within ${formatGoDuration(BigInt(timeoutMs) * 1_000_000n)} ` +
                  `(may this identity list and watch nodes?)`
                : `kubeinventory: node inventory shard cache did not sync within ${formatGoDuration(BigInt(timeoutMs) * 1_000_000n)} ` +
                  `(is the NodeInventoryShard.sandbox.cocoonstack.io CRD installed, and may this identity list and watch it?)`,
          ),
        ),
      );
    });
    const aborted = new Promise<never>((_, reject) => {
      if (signal?.aborted) reject(signal.reason);
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
    try {
      await Promise.race([Promise.all([this.informer.synced, this.nodeInformer.synced, this.shardsSyncedOrAbsent()]), timedOut, aborted]);
      // Ready means the first snapshot holds every shard the LIST brought, not only once the queued rebuild runs.
      if (this.rebuildQueued) this.rebuild();
    } finally {
      timer?.cancel();
    }
  }

  async stop(): Promise<void> {
    await Promise.all([this.informer.stop(), this.nodeInformer.stop(), this.shardInformer.stop()]);
  }

  /**
   * The shard cache synced, or the cluster has no NodeInventoryShard CRD (404) or this identity no right to it (403):
   * `helm upgrade` never installs a chart's new crds/, and a reader that refused to start would take every node down
   * with it. Without shards every node publishes the single form (vk-sandbox falls back to it on the same 404), so
   * the fleet is whole; the informer keeps retrying and brings the shards in once the CRD is there.
   */
  private async shardsSyncedOrAbsent(): Promise<void> {
    const probe = this.o.client.list(NodeInventoryShards, { limit: 1 }).then(
      () => "present" as const,
      (e: unknown) => (isNotFound(e) ? ("absent" as const) : isForbidden(e) ? ("forbidden" as const) : ("present" as const)),
    );
    const first = await Promise.race([this.shardInformer.synced.then(() => "synced" as const), probe]);
    if (first === "synced") return;
    if (first === "present") return void (await this.shardInformer.synced);
    this.log?.warn(
      { resource: "nodeinventoryshards.sandbox.cocoonstack.io", reason: first === "absent" ? "no such CRD" : "forbidden" },
      "serving without NodeInventoryShards: nodes publish the single form until the chart's crds/ (and RBAC) are applied, then shards are read",
    );
  }

  /** Fresh nodes, sorted by name (FleetSource). */
  nodes(): readonly FleetNode[] {
    const fresh = this.fresh();
    // One array per fresh() answer: readers on the create path call this several times, and an identical answer
    // lets the e2b surface's template overlay keep its memo (shared/e2b/template-writes.ts).
    if (this.nodesMemo?.fresh !== fresh) this.nodesMemo = { fresh, nodes: fresh.map((r) => r.fleet) };
    return this.nodesMemo.nodes;
  }

  private nodesMemo?: { fresh: readonly InventoryRecord[]; nodes: readonly FleetNode[] };

  /** The last fresh() answer and the records it was computed from (see fresh()). */
  private freshMemo?: { records: readonly InventoryRecord[]; newestStamp: number; result: readonly InventoryRecord[] };

  /**
   * Fresh nodes with their raw inventory, sorted by name. Stale nodes are absent from every read path. Shared between
   * callers: never mutate it. The answer depends on the clock only while some stamp is ahead of it (the freshness rule
   * caps the newest stamp by our clock), so between inventory events it is computed once, not on every claim and read.
   */
  fresh(): readonly InventoryRecord[] {
    const now = this.clock.now();
    const m = this.freshMemo;
    if (m && m.records === this.records && m.newestStamp <= now) return m.result;
    const result = freshNodes(this.records, this.o.staleAfterMs, now);
    let newestStamp = Number.NEGATIVE_INFINITY;
    for (const r of this.records) if (r.publishedAt !== undefined && r.publishedAt > newestStamp) newestStamp = r.publishedAt;
    this.freshMemo = { records: this.records, newestStamp, result };
    return result;
  }

  /** Every cached trusted node, fresh or not (metrics, diagnostics). */
  all(): readonly InventoryRecord[] {
    return this.records;
  }

  /** Trusted nodes left out as stale (FleetSource). */
  staleCount(): number {
    return this.records.length - this.fresh().length;
  }

  /** One fresh node by name; a stale node answers undefined ("not found"), as §4.3 requires of per-node reads. */
  freshNode(name: string): InventoryRecord | undefined {
    return this.fresh().find((r) => r.name === name);
  }

  /** Called after every inventory event (the warm-pool driver's trigger). Returns an unsubscribe function. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Shard events rebuild once per burst, not once each: a reader's first LIST of a fleet's shards (about 257 per full
   * node) arrives as one synchronous loop of adds, and each rebuild merges the node's rows again.
   */
  private rebuildQueued = false;
  private queueRebuild(): void {
    if (this.rebuildQueued) return;
    this.rebuildQueued = true;
    queueMicrotask(() => {
      if (this.rebuildQueued) this.rebuild();
    });
  }

  private rebuild(): void {
    this.rebuildQueued = false;
    const next: InventoryRecord[] = [];
    const seen = new Set<string>();
    for (const raw of this.informer.list()) {
      const name = raw.metadata?.name ?? "";
      seen.add(name);
      const node = this.nodeInformer.get(typeof raw.node === "string" ? raw.node : "");
      // The record depends on its Node too: a Node that loses the address, or goes away, withdraws its trust.
      const nodeName = typeof raw.node === "string" ? raw.node : "";
      // Compared, not concatenated into a key: this runs for every root on every event.
      const rv: Version = { rv: raw.metadata?.resourceVersion ?? "", node, epoch: this.shardEpoch.get(nodeName) ?? 0 };
      const cached = this.built.get(name);
      if (cached && sameVersion(cached.rv, rv)) {
        next.push(cached.record);
        continue;
      }
      const refusedAs = this.refused.get(name);
      if (refusedAs && sameVersion(refusedAs.rv, rv)) continue;
      const parsed = NodeInventory.safeParse(raw);
      if (!parsed.success) {
        // One malformed object must not take the fleet down: skip it, say which and why.
        this.log?.warn({ nodeInventory: name, err: parsed.error.issues[0]?.message }, "skipping a NodeInventory that does not match its schema");
        this.built.delete(name);
        continue;
      }
      const verdict = inventoryTrust(parsed.data, node, this.networks);
      if (!verdict.trusted) {
        this.built.delete(name);
        const before = this.refused.get(name)?.reason;
        this.refused.set(name, { rv, reason: verdict.reason });
        if (before !== verdict.reason) {
          this.log?.warn({ nodeInventory: name, address: parsed.data.address, reason: verdict.reason }, "ignoring a NodeInventory that no known Node vouches for");
        }
        continue;
      }
      this.refused.delete(name);
      const record = recordOf(parsed.data.shards && shardsAreCurrent(raw) ? this.withShardRows(parsed.data) : parsed.data, cached?.record);
      this.built.set(name, { rv, record });
      next.push(record);
    }
    for (const name of [...this.built.keys()]) if (!seen.has(name)) this.built.delete(name);
    for (const node of [...this.mergedRows.keys()]) if (!seen.has(node)) this.mergedRows.delete(node);
    for (const name of [...this.refused.keys()]) if (!seen.has(name)) this.refused.delete(name);
    // The informer keeps its order between events, so the list is usually sorted already: checked in one pass.
    if (!sortedByName(next)) next.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.records = next;
    this.demand.observe(this.fresh().map((r) => r.fleet));
    for (const fn of this.listeners) {
      try {
        fn();
      } catch (err) {
        this.log?.error({ err: (err as Error).message }, "inventory change listener failed");
      }
    }
  }

  /**
   * A sharded root with its rows back in `entries`. A set is (generation, count): the publisher writes a new set whole
   * before the root names it and deletes the old one after, but the root and the shards reach us on two watches, so
   * the root may name a set before all of it is here. The rows are then those of the set the root names when it is
   * complete, else of the newest complete older set (the one being replaced), else what is here of the named set
   * (said once per change in the log). A shard counts only under the one name shardName() gives it, with the root's
   * node: trust is the root's (the Node vouches for the address; the admission policy lets a node write only its own).
   */
  private withShardRows(root: NodeInventory): NodeInventory {
    const named = root.shards!;
    // A node's publish at steady state changes only its root (`publishedAt`): when no shard of it changed since and
    // the root names the same set, its rows are the merge of last time, reused as the same array so every reader's
    // rendering of them is reused too (recordOf, the aggregated API's objects). Without it a wave of N nodes at
    // steady state re-merged, re-sorted and re-rendered every row of the fleet (docs/scaling.md).
    const epoch = this.shardEpoch.get(root.node) ?? 0;
    const memo = this.mergedRows.get(root.node);
    if (memo && memo.epoch === epoch && memo.generation === named.generation && memo.count === named.count) return withEntries(root, memo.entries);
    const entries = this.mergeShardRows(root);
    this.mergedRows.set(root.node, { epoch, generation: named.generation, count: named.count, entries });
    return withEntries(root, entries);
  }

  private mergeShardRows(root: NodeInventory): InventoryEntry[] | undefined {
    const named = root.shards!;
    const sets = new Map<string, { generation: number; count: number; shards: NodeInventoryShard[] }>();
    for (const [name, raw] of this.shardsByNode.get(root.node) ?? []) {
      const shard = this.parseShard(name, raw);
      if (!shard || shard.node !== root.node || shard.index >= shard.count || name !== shardName(root.node, shard.generation, shard.index)) continue;
      const key = `${shard.generation}/${shard.count}`;
      let set = sets.get(key);
      if (!set) sets.set(key, (set = { generation: shard.generation, count: shard.count, shards: [] }));
      set.shards.push(shard);
    }
    const complete = (x: { count: number; shards: NodeInventoryShard[] } | undefined) => x !== undefined && x.shards.length === x.count;
    let chosen = sets.get(`${named.generation}/${named.count}`);
    if (!complete(chosen)) {
      const older = [...sets.values()].filter((x) => x.generation < named.generation && complete(x)).sort((a, b) => b.generation - a.generation)[0];
      if (older) chosen = older;
      else if (this.shardInformer.hasSynced() && !this.warnedIncomplete.has(`${root.node}/${named.generation}/${named.count}`)) {
        // Once per set: a node's first set may reach us shard by shard after its root.
        this.warnedIncomplete.add(`${root.node}/${named.generation}/${named.count}`);
        if (this.warnedIncomplete.size > 4096) this.warnedIncomplete.clear();
        this.log?.warn(
          { nodeInventory: root.node, generation: named.generation, count: named.count, present: chosen?.shards.length ?? 0 },
          "no complete NodeInventoryShard set for this node yet; showing the shards present",
        );
      }
    }
    const entries: InventoryEntry[] = [];
    for (const sh of chosen?.shards ?? []) if (sh.entries) for (const e of sh.entries) entries.push(e);
    entries.sort(byNameThenId);
    return entries.length > 0 ? entries : undefined;
  }

  private parseShard(name: string, raw: RawShard): NodeInventoryShard | null {
    const rv = raw.metadata?.resourceVersion ?? "";
    const hit = this.parsedShards.get(name);
    if (hit && hit.rv === rv) return hit.shard;
    const parsed = NodeInventoryShard.safeParse(raw);
    if (!parsed.success) this.log?.warn({ nodeInventoryShard: name, err: parsed.error.issues[0]?.message }, "skipping a NodeInventoryShard that does not match its schema");
    const shard = parsed.success ? parsed.data : null;
    this.parsedShards.set(name, { rv, shard });
    return shard;
  }
}

/** The root with `entries` set to the merged rows (absent when none). */
function withEntries(root: NodeInventory, entries: InventoryEntry[] | undefined): NodeInventory {
  const merged: NodeInventory = { ...root };
  if (entries) merged.entries = entries;
  else delete merged.entries;
  return merged;
}

/**
 * Whether the root's `shards` is the last publisher's word. A node handed back to the upstream Go daemon keeps the
 * `shards` field vk-sandbox applied (that daemon never sends it, so server-side apply leaves it), while the Go daemon
 * now owns `publishedAt` and `entries`: the shards are then leftovers and its inline rows are the truth. Told by the
 * managed fields: `shards` and `publishedAt` must have one manager. Without managed fields, the shards stand.
 */
export function shardsAreCurrent(raw: { metadata?: unknown }): boolean {
  const managed = (raw.metadata as { managedFields?: unknown } | undefined)?.managedFields;
  if (!Array.isArray(managed)) return true;
  const ownerOf = (field: string): string | undefined => {
    for (const m of managed as { manager?: unknown; fieldsV1?: unknown }[]) {
      const f = m?.fieldsV1;
      if (f && typeof f === "object" && field in f) return typeof m.manager === "string" ? m.manager : "";
    }
    return undefined;
  };
  const shards = ownerOf("f:shards");
  const stamp = ownerOf("f:publishedAt");
  return shards === undefined || stamp === undefined || shards === stamp;
}

/** The publisher's row order: by name, ties broken by id. */
function byNameThenId(a: InventoryEntry, b: InventoryEntry): number {
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  const ai = a.id ?? "";
  const bi = b.id ?? "";
  return ai < bi ? -1 : ai > bi ? 1 : 0;
}

/** What a node's record was built from: its root's version, its Node (by addresses) and its shard epoch. */
interface Version {
  rv: string;
  node: NodeAddresses | undefined;
  epoch: number;
}

/** The same inputs: a Node heartbeat that left the addresses alone changes nothing. */
function sameVersion(a: Version, b: Version): boolean {
  if (a.rv !== b.rv || a.epoch !== b.epoch) return false;
  if (a.node === b.node) return true;
  return a.node !== undefined && b.node !== undefined && addressesKey(a.node) === addressesKey(b.node);
}

function sortedByName(records: readonly InventoryRecord[]): boolean {
  for (let i = 1; i < records.length; i++) if (records[i - 1]!.name > records[i]!.name) return false;
  return true;
}

/** What of a Node the trust verdict reads: its addresses, in order. */
function addressesKey(node: NodeAddresses): string {
  // Every rebuild asks it of every node's Node: once per Node object (the informer replaces it on change).
  let key = addressKeys.get(node);
  if (key === undefined) addressKeys.set(node, (key = JSON.stringify((node.status?.addresses ?? []).map((a) => a.address ?? ""))));
  return key;
}
const addressKeys = new WeakMap<object, string>();

/**
 * One node's record. `previous` is the node's last record: when its rows are the very array this one carries (a
 * publish that changed only the root), their rendering is reused instead of parsed again (2,000 rows' metadata each).
 */
export function recordOf(inv: NodeInventory, previous?: InventoryRecord): InventoryRecord {
  const publishedAt = epochMs(inv.publishedAt);
  const reuse = previous !== undefined && inv.entries !== undefined && previous.inventory.entries === inv.entries ? previous.fleet.entries : undefined;
  const fleet: FleetNode = {
    name: inv.node,
    address: inv.address ?? "",
    ...(publishedAt === undefined ? {} : { publishedAt }),
    pools: (inv.pools ?? []).flatMap((p): FleetPool[] => {
      const net = asNet(p.net);
      const size = asSize(p.size);
      return net && size ? [{ template: p.template, net, size, warm: p.warm, target: p.target }] : [];
    }),
    templates: (inv.templates ?? []).flatMap((t): FleetTemplate[] => {
      const net = asNet(t.net);
      const size = asSize(t.size);
      if (!net || !size) return [];
      const createdAt = epochMs(t.createdAt);
      return [{ template: t.template, net, size, ...(t.contentDigest ? { contentDigest: t.contentDigest } : {}), ...(createdAt === undefined ? {} : { createdAt }) }];
    }),
    entries: reuse ?? (inv.entries ?? []).flatMap((e): FleetEntry[] => {
      if (!e.id) return []; // the e2b surface and the relay address sandboxes by claim id only
      const deadline = epochMs(e.deadline);
      const claimedAt = epochMs(e.claimedAt);
      const metadata = parseMetadata(e.claimMetadata);
      return [
        {
          id: e.id,
          name: e.name,
          namespace: namespaceOfName(e.name),
          phase: e.phase,
          ...(e.template ? { template: e.template } : {}),
          ...(deadline === undefined ? {} : { deadline }),
          ...(claimedAt === undefined ? {} : { claimedAt }),
          ...(metadata ? { metadata } : {}),
          ...(e.cpuCount ? { cpuCount: e.cpuCount } : {}),
          ...(e.memoryBytes ? { memoryBytes: e.memoryBytes } : {}),
        },
      ];
    }),
  };
  return { name: inv.node, address: inv.address ?? "", ...(publishedAt === undefined ? {} : { publishedAt }), inventory: inv, fleet };
}

/** RFC 3339 → epoch ms; undefined for absent, unparsable, or Go's zero time (which means "never stamped"). */
function epochMs(s: string | undefined): number | undefined {
  if (!s) return undefined;
  try {
    const ms = parseWireTime(s);
    return ms === null || ms <= 0 ? undefined : ms;
  } catch {
    return undefined;
  }
}

function asNet(v: string | undefined): Net | undefined {
  const n = v || "none";
  return (NETS as readonly string[]).includes(n) ? (n as Net) : undefined;
}

function asSize(v: string | undefined): Size | undefined {
  const s = v || "small";
  return (SIZES as readonly string[]).includes(s) ? (s as Size) : undefined;
}

function parseMetadata(s: string | undefined): Record<string, string> | undefined {
  if (!s) return undefined;
  try {
    const v = JSON.parse(s) as unknown;
    if (v === null || typeof v !== "object" || Array.isArray(v)) return undefined;
    return Object.fromEntries(Object.entries(v as Record<string, unknown>).filter((kv): kv is [string, string] => typeof kv[1] === "string"));
  } catch {
    return undefined;
  }
}
