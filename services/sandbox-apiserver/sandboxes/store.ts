// Reads of the sandboxes view (docs/api.md "Reads" and "Resolution"): lists materialize every entry of every fresh
// node; a Get resolves through the owning-node index, then inventories, then live lookups on the nodes themselves,
// so a sandbox created a moment ago (not yet published) is readable on any replica.
import type { InventoryRecord, InventoryFleet } from "#shared/fleet/index.ts";
import type { InventoryEntry } from "#shared/inventory/index.ts";
import type { SandboxRow } from "#shared/sandboxd/index.ts";
import { LIVE_LOOKUP_TIMEOUT_MS, type NodeClients, firstHit } from "./nodes.ts";
import { type Sandbox, sandboxFromEntry, splitEntryName } from "./object.ts";
import { LiveLookupGate } from "./live-gate.ts";
import { OwnerIndex } from "./owner-index.ts";

/** Fan-out bound over nodes. */
export const NODE_FANOUT = 16;

/** How many namespace filters keep their last sorted list. */
const LAST_LISTS = 64;

interface LastList {
  nodes: readonly InventoryRecord[];
  namespace: string | undefined;
  result: Sandbox[];
}

export interface Resolved {
  sandbox: Sandbox;
  node: string;
  entry: InventoryEntry;
}

/** What the store reads the fleet through: fresh nodes only (stale nodes are absent from every read path). */
export type FleetReader = Pick<InventoryFleet, "fresh" | "freshNode">;

export class SandboxReader {
  readonly index = new OwnerIndex();

  constructor(
    readonly fleet: FleetReader,
    readonly clients: NodeClients,
    /** Bounds step 4 of resolve (live-gate.ts): a missing name does not fan out to every node on every Get. */
    readonly liveGate: LiveLookupGate = new LiveLookupGate(),
  ) {}

  /**
   * Every node's sandboxes, rendered once per inventory version and grouped by namespace. The fleet source keeps
   * the same record object while a node's resourceVersion is unchanged, so lists and the watch changes (changes.ts) reuse
   * the rendering instead of synthesizing the whole fleet each time. Rendered objects are shared: never mutate one.
   */
  private readonly rendered = new WeakMap<object, Map<string, Sandbox[]>>();

  private byNamespace(rec: InventoryRecord): Map<string, Sandbox[]> {
    // Keyed by the rows array, not the record: a node's publish that changed only its root (`publishedAt`) gets a new
    // record with the same rows (shared/fleet/inventory.ts), whose rendering is the same objects. A rows array belongs
    // to one node, and a rendering depends only on the rows and the node's name.
    const key = rec.inventory.entries ?? rec;
    let m = this.rendered.get(key);
    if (!m) {
      m = new Map();
      for (const e of rec.inventory.entries ?? []) {
        const s = sandboxFromEntry(e, rec.name);
        const ns = s.metadata.namespace!;
        const list = m.get(ns);
        if (list) list.push(s);
        else m.set(ns, [s]);
      }
      this.rendered.set(key, m);
    }
    return m;
  }

  /** One node's sandboxes as rendered for lists: the same objects for the same record (the watch changes rely on it). */
  *sandboxesOf(rec: InventoryRecord): Iterable<Sandbox> {
    for (const l of this.byNamespace(rec).values()) yield* l;
  }

  /**
   * The last list's inputs and result per namespace filter (undefined: all), so the next list starts from it instead
   * of sorting 50,000 again; kept per filter because watches of one namespace start between lists of another.
   * Bounded: past LAST_LISTS filters the least recently used goes.
   */
  private readonly lastLists = new Map<string | undefined, LastList>();

  /**
   * Every sandbox of every fresh node in `namespace` (all when undefined), sorted by namespace, name, then node. The
   * result may be shared with the next caller: never mutate it.
   */
  list(namespace?: string, nodes: readonly InventoryRecord[] = this.fleet.fresh()): readonly Sandbox[] {
    const last = this.lastLists.get(namespace);
    let result: Sandbox[] | undefined;
    if (last) {
      this.lastLists.delete(namespace);
      if (last.nodes.length === nodes.length && last.nodes.every((r, i) => r === nodes[i])) result = last.result;
      else result = this.updatedList(last, nodes);
    }
    result ??= this.sortedList(namespace, nodes);
    this.lastLists.set(namespace, { nodes, namespace, result });
    if (this.lastLists.size > LAST_LISTS) this.lastLists.delete(this.lastLists.keys().next().value);
    return result;
  }

  private pick(rec: InventoryRecord, namespace: string | undefined, out: Sandbox[]): void {
    const m = this.byNamespace(rec);
    if (namespace !== undefined) {
      const l = m.get(namespace);
      if (l) for (const s of l) out.push(s);
    } else {
      for (const l of m.values()) for (const s of l) out.push(s);
    }
  }

  private sortedList(namespace: string | undefined, nodes: readonly InventoryRecord[]): Sandbox[] {
    const out: Sandbox[] = [];
    for (const rec of nodes) this.pick(rec, namespace, out);
    return out.sort(byNamespaceThenName);
  }

  /**
   * The last list with the nodes that changed since (republished, gone stale, new) swapped: their old sandboxes are
   * dropped and their new ones merged in, one linear pass instead of a full sort. In a large fleet some node
   * republishes between almost any two lists, and the full sort of 50,000 cost ~100 ms each time. Undefined when
   * most nodes changed (then sorting is as cheap).
   */
  private updatedList(last: LastList, nodes: readonly InventoryRecord[]): Sandbox[] | undefined {
    const now = new Set(nodes);
    const before = new Set(last.nodes);
    const removed = last.nodes.filter((r) => !now.has(r));
    const added = nodes.filter((r) => !before.has(r));
    if (removed.length + added.length > nodes.length / 4) return undefined;
    const gone = new Set<Sandbox>();
    for (const rec of removed) {
      const old: Sandbox[] = [];
      this.pick(rec, last.namespace, old);
      for (const s of old) gone.add(s);
    }
    const incoming: Sandbox[] = [];
    for (const rec of added) this.pick(rec, last.namespace, incoming);
    incoming.sort(byNamespaceThenName);
    const out: Sandbox[] = [];
    let j = 0;
    for (const s of last.result) {
      if (gone.has(s)) continue;
      while (j < incoming.length && byNamespaceThenName(incoming[j]!, s) < 0) out.push(incoming[j++]!);
      out.push(s);
    }
    while (j < incoming.length) out.push(incoming[j++]!);
    return out;
  }

  /** The entry named `<ns>/<name>` in one node's inventory (as published), if that node is fresh. */
  inInventory(nodeName: string, namespace: string, name: string): Resolved | undefined {
    const rec = this.fleet.freshNode(nodeName);
    return rec ? findIn(rec, namespace, name) : undefined;
  }

  /** Scans every fresh inventory for `<ns>/<name>` (first node in name order wins). */
  scan(namespace: string, name: string): Resolved | undefined {
    for (const rec of this.fleet.fresh()) {
      const hit = findIn(rec, namespace, name);
      if (hit) return hit;
    }
    return undefined;
  }

  /**
   * Resolution order: (1) the indexed node's inventory; (2) that node live; (3) every fresh inventory; (4) every
   * fresh node live, first hit wins, within the live gate's bounds. A hit is remembered in the index. Undefined
   * means not found.
   */
  async resolve(namespace: string, name: string): Promise<Resolved | undefined> {
    const key = OwnerIndex.nameKey(namespace, name);
    const indexed = this.index.get(key);
    let hit: Resolved | undefined;
    if (indexed !== undefined) {
      hit = this.inInventory(indexed, namespace, name);
      if (!hit) {
        const rec = this.fleet.freshNode(indexed);
        if (rec) hit = await this.live(rec, namespace, name).catch(() => undefined);
      }
    }
    hit ??= this.scan(namespace, name);
    hit ??= await this.liveGate.run(namespace, name, () => firstHit(this.fleet.fresh(), NODE_FANOUT, (rec, signal) => this.live(rec, namespace, name, signal)));
    if (hit) this.remember(hit, namespace);
    return hit;
  }

  remember(hit: { node: string; entry: { id?: string; name: string } }, namespace: string): void {
    this.index.set(OwnerIndex.nameKey(namespace, splitEntryName(hit.entry.name).name), hit.node);
    if (hit.entry.id) this.index.set(OwnerIndex.claimKey(namespace, hit.entry.id), hit.node);
  }

  /** Asks one node directly by claim_ref `<ns>/<name>` within 500 ms; a timeout, an error or no row is a miss. */
  async live(rec: InventoryRecord, namespace: string, name: string, signal?: AbortSignal): Promise<Resolved | undefined> {
    if (!rec.address) return undefined;
    const timeout = AbortSignal.timeout(LIVE_LOOKUP_TIMEOUT_MS);
    const rows = await this.clients
      .for(rec.address)
      .list({ claimRef: `${namespace}/${name}` }, { signal: signal ? AbortSignal.any([signal, timeout]) : timeout, timeoutMs: LIVE_LOOKUP_TIMEOUT_MS });
    const row = rows[0];
    if (!row) return undefined;
    const entry = entryFromRow(row);
    return { sandbox: sandboxFromEntry(entry, rec.name), node: rec.name, entry };
  }
}

/** A live row as an inventory entry: no addr, no metadata (docs/api.md "Live lookup"). */
export function entryFromRow(row: SandboxRow): InventoryEntry {
  const name = row.claim_ref || row.id;
  return {
    name,
    id: row.id,
    phase: row.hibernated || row.archived ? "Hibernated" : "Running",
    claimRef: name,
    template: row.key.template,
    ...(row.deadline ? { deadline: row.deadline } : {}),
    ...(row.claimed_at ? { claimedAt: row.claimed_at } : {}),
  };
}

function findIn(rec: InventoryRecord, namespace: string, name: string): Resolved | undefined {
  for (const e of rec.inventory.entries ?? []) {
    const n = splitEntryName(e.name);
    if (n.namespace === namespace && n.name === name) return { sandbox: sandboxFromEntry(e, rec.name), node: rec.name, entry: e };
  }
  return undefined;
}

/** Namespace, then name, then node: a total order, so a full sort and an incremental merge give the same list. */
export function byNamespaceThenName(a: Sandbox, b: Sandbox): number {
  const na = a.metadata.namespace!;
  const nb = b.metadata.namespace!;
  if (na !== nb) return na < nb ? -1 : 1;
  const ma = a.metadata.name!;
  const mb = b.metadata.name!;
  if (ma !== mb) return ma < mb ? -1 : 1;
  const xa = a.status.nodeName ?? "";
  const xb = b.status.nodeName ?? "";
  return xa < xb ? -1 : xa > xb ? 1 : 0;
}
