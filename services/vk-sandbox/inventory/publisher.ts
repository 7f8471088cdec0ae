// The NodeInventory publisher (§9, --publish-inventory): immediately, then every --publish-interval, rebuild
// this node's inventory from live sandboxd state and server-side apply it as field manager `vk-sandbox`.
//
// Two forms (--inventory-format, docs/inventory.md). `sharded` (the default): the object `<node>` carries the
// address, pools, templates, `publishedAt` and `shards: {generation, count}`, and the rows live in
// NodeInventoryShard objects `<node>.<generation>.<index>`, each applied only when its rows changed; a node at its
// 2,000-sandbox capacity with the largest e2b metadata is about 40 shards of at most 512 KiB. `single`: the seed's
// one object with every row in `entries`, for fleets whose readers are still the upstream Go daemons; it stops
// working past about 1.5 MiB (etcd's request limit), so it warns long before.
//
// Either way, `publishedAt` advances only on a publish that applied everything: a shard that failed leaves the root
// unapplied, so readers see the stamp stall, as they do when sandboxd cannot be listed.
//
// Every failure is logged and skips one publish, never more: the next tick rebuilds from scratch. A failed listing
// is not an empty list, so nothing is applied when either sandboxd read fails (readers then see `publishedAt`
// stall and treat the node as stale, which is the truth). A Node seen once and then gone stops publishing: the
// inventory is owned by the Node, GC removes it, and re-applying would resurrect an orphan.
import type { V1Node } from "@kubernetes/client-node";
import type { KubeClient } from "#shared/kube/index.ts";
import { isForbidden, isNotFound, type ResourceRef } from "#shared/kube/index.ts";
import { Nodes } from "#shared/kube/index.ts";
import type { SandboxdClient } from "#shared/sandboxd/index.ts";
import { createHash } from "node:crypto";
import { type BuildInput, buildEntries, buildInventory, buildRoot, buildShard } from "./build.ts";
import { layoutShards, MAX_SHARDS } from "./shards.ts";
import { NodeInventories, type NodeInventory, type NodeInventoryShard, NodeInventoryShards, shardName } from "#shared/inventory/index.ts";
import { type Clock, realClock } from "#shared/clock/index.ts";
import { PeriodicLoop } from "#shared/lifecycle/index.ts";
import { errorMessage, type Log } from "#shared/log/index.ts";
import { addressHost } from "#shared/config/index.ts";

export type InventoryKubeClient = Pick<KubeClient, "get" | "patch" | "list" | "delete">;
/** Declared apart so a test can fail the listing alone. */
export type InventorySandboxd = Pick<SandboxdClient, "list" | "info">;

export const FIELD_MANAGER = "vk-sandbox";

export const INVENTORY_FORMATS = ["sharded", "single"] as const;
export type InventoryFormat = (typeof INVENTORY_FORMATS)[number];

/**
 * The size at which a node warns (a metric, an Event on its Node, a log line): a third of etcd's 1.5 MiB request
 * limit, so an operator hears of a `single`-form node at about 110 rows of the largest e2b metadata, with room to act.
 */
export const DEFAULT_WARN_OBJECT_BYTES = 512 * 1024;

/** Every this many publishes every shard is applied again, changed or not, so one deleted by hand comes back. */
export const SHARD_RESYNC_PUBLISHES = 20;

/** What one publish wrote and how large the node's inventory is (the metrics sink of wire.ts reads it). */
export interface InventorySizes {
  format: InventoryFormat;
  rows: number;
  /** The root, and every shard in the sharded form: what a reader holds for this node. */
  totalBytes: number;
  /** The largest single object: the figure etcd's limit applies to. */
  largestObjectBytes: number;
  shards: number;
  /** Bytes this publish sent to the apiserver (applies only; the root every time, shards when changed). */
  appliedBytes: number;
  appliedObjects: number;
}

/** Where the size warning goes besides the log: an Event on the Node. */
export interface InventoryWarnings {
  warning(obj: { apiVersion: string; kind: string; metadata: { name: string; uid?: string } }, reason: string, message: string): void;
}

export interface InventoryPublisherOptions {
  kube: InventoryKubeClient;
  sandboxd: InventorySandboxd;
  nodeName: string;
  /** --sandboxd-advertise-addr (or its default). */
  address: string;
  /**
   * owner_addr of this provider's own claims, by sandbox id. Read once per publish: each listed row then looks its
   * id up instead of scanning the claims table (2000 rows against 2000 claims was 4 M comparisons per publish).
   */
  ownAddresses(): ReadonlyMap<string, string>;
  /** The node controller's signal that the Node was deleted while running. */
  nodeGone?: () => boolean;
  /** --publish-interval, positive (the flags reject anything else). */
  intervalMs: number;
  log: Log;
  clock?: Clock;
  /** --inventory-format; `sharded` when absent. */
  format?: InventoryFormat;
  /** --inventory-warn-bytes: the largest object past which the node warns. */
  warnObjectBytes?: number;
  events?: InventoryWarnings;
  /** Called after every successful publish. */
  observe?: (sizes: InventorySizes) => void;
}

export type PublishOutcome =
  | { published: true; inventory: NodeInventory; shards: NodeInventoryShard[]; sizes: InventorySizes }
  | { published: false; reason: "node-gone" | "node-read-failed" | "sandboxd-failed" | "apply-failed"; error?: unknown };

/** A shard apply the cluster refused for want of the CRD (404) or of RBAC (403): see publishShardedOrSingle. */
class ShardsUnavailable extends Error {
  constructor(cause: unknown) {
    super(`NodeInventoryShards unavailable: ${errorMessage(cause)}`, { cause });
  }
}

export class InventoryPublisher {
  private readonly o: InventoryPublisherOptions;
  private readonly clock: Clock;
  private readonly loop: PeriodicLoop;
  private nodeSeen = false;
  private publishes = 0;
  /** The pool targets of the last publish, so a change of them is logged once (not every warm count's move). */
  private lastTargets: string | undefined;
  /** The address host last warned about, so the warning is logged once per change, not every publish. */
  private warnedHost: string | undefined;
  /** The NodeInventory CRD prunes `shards` (an older CRD): single form until restart. */
  private shardsPruned = false;
  /** Set once the single-form fallback was logged, until a sharded publish lands again. */
  private warnedNoShards = false;
  /** Set while the largest object is past the warning size (cleared below 90% of it): one warning per crossing. */
  private warnedSize = false;
  /** The shard set last completed (sharded form): its generation, count and each shard's digest as applied. */
  private generation = 0;
  private count: number | undefined;
  private readonly applied = new Map<number, string>();
  /** Shard names this node holds in the apiserver, as far as we know; undefined until listed once. */
  private known: Set<string> | undefined;

  constructor(opts: InventoryPublisherOptions) {
    if (!(opts.intervalMs > 0)) throw new RangeError(`publish interval must be positive, got ${opts.intervalMs} ms`);
    this.o = opts;
    this.clock = opts.clock ?? realClock;
    // publishOnce never throws, so the loop has nothing to log.
    this.loop = new PeriodicLoop({ name: "inventory", clock: this.clock, intervalMs: opts.intervalMs, first: "now", tick: async () => void (await this.publishOnce()) });
  }

  /** Successful applies since start. */
  get publishCount(): number {
    return this.publishes;
  }

  /** Publishes now, then every interval, until stopped. Idempotent. */
  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One publish; never throws. */
  async publishOnce(): Promise<PublishOutcome> {
    const name = this.o.nodeName;
    const log = this.o.log;
    if (this.o.nodeGone?.()) {
      log.debug({ node: name }, "node deleted while running; not publishing its inventory");
      return { published: false, reason: "node-gone" };
    }
    let nodeUid: string | undefined;
    try {
      // resourceVersion=0: served from the apiserver's watch cache; the UID never changes for one Node object.
      const node = await this.o.kube.get<V1Node>(Nodes, name, { resourceVersion: "0" });
      nodeUid = node.metadata?.uid;
      this.nodeSeen = true;
      this.warnIfUnvouched(node);
    } catch (e) {
      if (!isNotFound(e)) {
        log.warn({ node: name, err: errorMessage(e) }, "cannot read the Node; skipping this inventory publish");
        return { published: false, reason: "node-read-failed", error: e };
      }
      if (this.nodeSeen) {
        log.warn({ node: name }, "the Node was deleted; not publishing an inventory it would no longer own");
        return { published: false, reason: "node-gone", error: e };
      }
      // Never seen yet (registration still under way): publish without an owner; a later apply adds it.
    }
    let rows, info;
    try {
      [rows, info] = await Promise.all([this.o.sandboxd.list(), this.o.sandboxd.info()]);
    } catch (e) {
      log.warn({ node: name, err: errorMessage(e) }, "sandboxd listing or info failed; skipping this inventory publish");
      return { published: false, reason: "sandboxd-failed", error: e };
    }
    const own = this.o.ownAddresses();
    const input: BuildInput = { nodeName: name, address: this.o.address, nodeUid, rows, info, ownAddressOf: (id: string) => own.get(id), publishedAt: new Date(this.clock.now()) };
    const format = this.o.format ?? "sharded";
    let result: { inventory: NodeInventory; shards: NodeInventoryShard[]; sizes: InventorySizes };
    try {
      result = format === "single" ? await this.publishSingle(buildInventory(input)) : await this.publishShardedOrSingle(input, nodeUid);
    } catch (e) {
      log.warn({ node: name, err: errorMessage(e) }, "NodeInventory apply failed; the next tick retries");
      return { published: false, reason: "apply-failed", error: e };
    }
    this.publishes++;
    const targets = (result.inventory.pools ?? []).map((p) => `${p.template}/${p.net ?? "none"}/${p.size ?? "small"}=${p.target}`).join(", ");
    if (targets !== this.lastTargets) {
      this.lastTargets = targets;
      log.info({ node: name, pools: targets || "(none)" }, "the node's pool targets changed in its NodeInventory");
    }
    this.checkSize(result.sizes, nodeUid);
    this.o.observe?.(result.sizes);
    log.debug(
      { node: name, entries: result.sizes.rows, pools: result.inventory.pools?.length ?? 0, shards: result.sizes.shards, appliedBytes: result.sizes.appliedBytes },
      "published NodeInventory",
    );
    return { published: true, ...result };
  }

  private async apply(res: ResourceRef, name: string, body: NodeInventory | NodeInventoryShard, bytes: number): Promise<unknown> {
    try {
      return await this.o.kube.patch<unknown>(res, name, body, { type: "apply", fieldManager: FIELD_MANAGER, force: true });
    } catch (e) {
      throw new Error(`apply ${res.resource}/${name} (${bytes} bytes): ${errorMessage(e)}`, { cause: e });
    }
  }

  /**
   * The sharded form, or the single one while the cluster cannot take shards: a vk-sandbox upgraded before the chart
   * (no NodeInventoryShard CRD: 404) or before manifests/rbac.yaml (no shard verbs: 403) would otherwise stop
   * publishing, and its node would drop out of every reader after --inventory-stale-after. Said once per outage;
   * every publish tries the sharded form first, so the node moves to it as soon as the cluster can take it.
   */
  private async publishShardedOrSingle(input: BuildInput, nodeUid: string | undefined): Promise<{ inventory: NodeInventory; shards: NodeInventoryShard[]; sizes: InventorySizes }> {
    // Not retried once seen: each try would show readers a root without rows for a moment.
    if (this.shardsPruned) return this.publishSingle(buildInventory(input));
    try {
      const out = await this.publishSharded(input, nodeUid);
      this.warnedNoShards = false;
      return out;
    } catch (e) {
      if (!(e instanceof ShardsUnavailable)) throw e;
      if (!this.warnedNoShards) {
        this.warnedNoShards = true;
        this.o.log.warn(
          { node: this.o.nodeName, err: errorMessage(e.cause) },
          "cannot publish NodeInventoryShards (the chart's CRD and manifests/rbac.yaml installed? a node name short enough?); publishing the single form meanwhile",
        );
      }
      return this.publishSingle(buildInventory(input));
    }
  }

  private async publishSingle(inventory: NodeInventory): Promise<{ inventory: NodeInventory; shards: NodeInventoryShard[]; sizes: InventorySizes }> {
    const bytes = Buffer.byteLength(JSON.stringify(inventory));
    // Which shards a sharded run left must be read before this apply clears the root's `shards`.
    if (this.known === undefined) await this.readShardSet();
    await this.apply(NodeInventories, this.o.nodeName, inventory, bytes);
    // Back from the sharded form: its shards are garbage now (readers ignore them once the root names none).
    await this.removeShards(new Set());
    return {
      inventory,
      shards: [],
      sizes: { format: "single", rows: inventory.entries?.length ?? 0, totalBytes: bytes, largestObjectBytes: bytes, shards: 0, appliedBytes: bytes, appliedObjects: 1 },
    };
  }

  private async publishSharded(
    input: BuildInput,
    nodeUid: string | undefined,
  ): Promise<{ inventory: NodeInventory; shards: NodeInventoryShard[]; sizes: InventorySizes }> {
    const name = this.o.nodeName;
    // A node name near the 253-character limit leaves no room for `.<generation>.<index>`: the single form it is.
    if (shardName(name, this.generation + 1, MAX_SHARDS - 1).length > 253) {
      throw new ShardsUnavailable(new Error(`node name of ${name.length} characters leaves no room for shard names (253 at most)`));
    }
    if (this.known === undefined) await this.listShards();
    const entries = buildEntries(input.rows, input.ownAddressOf);
    const layout = layoutShards(entries, this.count);
    let generation = this.generation;
    if (generation === 0 || layout.count !== this.count) {
      // A new set: written whole under a new generation before the root names it, so a reader never mixes two counts.
      generation = this.generation + 1;
      this.applied.clear();
    } else if (this.publishes % SHARD_RESYNC_PUBLISHES === 0) {
      this.applied.clear();
    }
    const shards: NodeInventoryShard[] = [];
    let totalBytes = 0;
    let largest = 0;
    let appliedBytes = 0;
    let appliedObjects = 0;
    for (let index = 0; index < layout.count; index++) {
      const shard = buildShard({ nodeName: name, nodeUid, generation, index, count: layout.count, entries: layout.buckets[index]! });
      const body = JSON.stringify(shard);
      const bytes = Buffer.byteLength(body);
      totalBytes += bytes;
      largest = Math.max(largest, bytes);
      shards.push(shard);
      const digest = createHash("sha256").update(body).digest("base64");
      if (this.applied.get(index) === digest) continue;
      this.applied.delete(index);
      try {
        await this.apply(NodeInventoryShards, shard.metadata.name, shard, bytes);
      } catch (e) {
        const cause = (e as Error).cause;
        if (isNotFound(cause) || isForbidden(cause)) throw new ShardsUnavailable(cause);
        throw e;
      }
      this.known!.add(shard.metadata.name);
      this.applied.set(index, digest);
      appliedBytes += bytes;
      appliedObjects++;
    }
    const inventory = buildRoot(input);
    inventory.shards = { generation, count: layout.count };
    // Sent empty, not omitted: a node that ran the upstream Go daemon before has its rows in `entries` under that
    // daemon's field manager, which an omitted field would leave in place for upstream readers to trust.
    inventory.entries = [];
    const rootBytes = Buffer.byteLength(JSON.stringify(inventory));
    // A NodeInventory CRD older than the sharded form (helm upgrade never updates crds/) has no `shards`: server-side
    // apply refuses the field ("field not declared in schema"), and were it pruned instead, readers would take this
    // root for the single form and list none of its rows. Either way the single form is applied at once, and kept
    // until a restart (each retry would rewrite every shard first).
    const older = (cause: unknown) =>
      new ShardsUnavailable(new Error(`the NodeInventory CRD has no shards field (${errorMessage(cause)}): apply the chart's crds/ (helm upgrade does not), then restart vk-sandbox`));
    let stored: unknown;
    try {
      stored = await this.apply(NodeInventories, name, inventory, rootBytes);
    } catch (e) {
      if (errorMessage(e).includes(".shards: field not declared in schema")) {
        this.shardsPruned = true;
        throw older(e);
      }
      throw e;
    }
    if (stored !== null && typeof stored === "object" && !("shards" in stored)) {
      this.shardsPruned = true;
      throw older("the stored object lost it");
    }
    this.generation = generation;
    this.count = layout.count;
    await this.removeShards(new Set(shards.map((s) => s.metadata.name)));
    return {
      inventory,
      shards,
      sizes: {
        format: "sharded",
        rows: entries.length,
        totalBytes: totalBytes + rootBytes,
        largestObjectBytes: Math.max(largest, rootBytes),
        shards: layout.count,
        appliedBytes: appliedBytes + rootBytes,
        appliedObjects: appliedObjects + 1,
      },
    };
  }

  /**
   * The set this node last completed, from its root: an empty merge patch answers the object and changes nothing
   * (RBAC gives a node no read of inventories, whose rows are every tenant's, and the node admission policy lets it
   * patch only its own). Its shards are then the ones to replace and delete; the next set takes a newer generation.
   */
  private async listShards(): Promise<void> {
    this.known = new Set();
    this.count = undefined;
    let root: NodeInventory | undefined;
    try {
      root = await this.o.kube.patch<NodeInventory>(NodeInventories, this.o.nodeName, {}, { type: "merge" });
    } catch (e) {
      if (isNotFound(e)) return;
      throw e;
    }
    const set = root?.shards;
    if (!set || !(set.generation >= 1) || !(set.count >= 1) || set.count > 1024) return;
    if (set.generation > this.generation) this.generation = set.generation;
    for (let i = 0; i < set.count; i++) this.known.add(shardName(this.o.nodeName, set.generation, i));
  }

  /** Deletes every shard of this node not in `keep`. A failure is logged and retried on the next publish. */
  private async readShardSet(): Promise<void> {
    try {
      await this.listShards();
    } catch (e) {
      this.o.log.debug({ node: this.o.nodeName, err: errorMessage(e) }, "cannot read this node's NodeInventory; assuming no shards to remove");
      this.known = new Set();
    }
  }

  private async removeShards(keep: ReadonlySet<string>): Promise<void> {
    if (this.known === undefined) await this.readShardSet();
    const known: Set<string> = this.known ?? new Set();
    for (const shard of [...known]) {
      if (keep.has(shard)) continue;
      try {
        await this.o.kube.delete(NodeInventoryShards, shard);
      } catch (e) {
        // Not found: already gone. Forbidden/absent CRD in the single form: this node never wrote shards there.
        if (!isNotFound(e)) {
          this.o.log.warn({ node: this.o.nodeName, shard, err: errorMessage(e) }, "cannot delete a NodeInventoryShard of an older set; the next publish retries");
          continue;
        }
      }
      known.delete(shard);
    }
  }

  /** The node says so long before any object limit: log line and Event once per crossing (the metric every publish). */
  private checkSize(sizes: InventorySizes, nodeUid: string | undefined): void {
    const limit = this.o.warnObjectBytes ?? DEFAULT_WARN_OBJECT_BYTES;
    if (sizes.largestObjectBytes <= limit) {
      if (sizes.largestObjectBytes < limit * 0.9) this.warnedSize = false;
      return;
    }
    if (this.warnedSize) return;
    this.warnedSize = true;
    const message =
      `NodeInventory of node ${this.o.nodeName}: largest object ${sizes.largestObjectBytes} bytes (${sizes.rows} rows, ${sizes.format} form), ` +
      `past the warning size ${limit}; etcd refuses objects over 1.5 MiB` +
      (sizes.format === "single" ? ", so set --inventory-format=sharded once every reader of the fleet reads shards" : "");
    this.o.log.warn({ node: this.o.nodeName, bytes: sizes.largestObjectBytes, totalBytes: sizes.totalBytes, rows: sizes.rows, format: sizes.format, warnBytes: limit }, message);
    this.o.events?.warning({ apiVersion: "v1", kind: "Node", metadata: { name: this.o.nodeName, ...(nodeUid ? { uid: nodeUid } : {}) } }, "InventoryNearLimit", message);
  }

  /**
   * The control plane calls this inventory only when its address host is one of the Node's addresses (and in the
   * operator's --inventory-trusted-networks when set: shared/fleet/trust.ts). Say so here, where the operator looks first.
   */
  private warnIfUnvouched(node: V1Node): void {
    const host = addressHost(this.o.address);
    const addresses = (node.status?.addresses ?? []).map((a) => a.address.toLowerCase());
    if (host === undefined || addresses.includes(host) || this.warnedHost === host) return;
    this.warnedHost = host;
    this.o.log.warn(
      { node: this.o.nodeName, address: this.o.address, nodeAddresses: addresses },
      "the advertised sandboxd address is none of this Node's addresses: the control plane ignores this inventory " +
        "(set --node-ip to the advertised host)",
    );
  }
}
