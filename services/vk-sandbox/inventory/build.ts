// From one sandboxd listing and one /v1/info to the NodeInventory this node applies (§9). Pure.
//
// The node's index, not the claims table, is the source: sandboxes claimed by others (e2b, the operator) appear, and
// reaped ones vanish on the next publish.
import { parseGoTime } from "#shared/clock/index.ts";
import type { Info, SandboxRow } from "#shared/sandboxd/index.ts";
import {
  API_VERSION,
  type InventoryEntry,
  type InventoryPool,
  type InventoryTemplate,
  KIND,
  type NodeInventory,
  type NodeInventoryShard,
  SHARD_KIND,
  shardName,
} from "#shared/inventory/index.ts";

export interface BuildInput {
  nodeName: string;
  /** --sandboxd-advertise-addr or its default. */
  address: string;
  /** The Node's UID, when the Node exists: the inventory is then garbage-collected with it. */
  nodeUid?: string;
  rows: SandboxRow[];
  info: Info;
  /** owner_addr of this provider's own claim with that id; undefined for sandboxes claimed elsewhere. */
  ownAddressOf(id: string): string | undefined;
  publishedAt: Date;
}

/** Absent, or Go's zero time: sandboxd's way of saying "none". */
const isZero = (t: string | undefined): t is undefined => !t || parseGoTime(t) === null;

export function inventoryEntry(row: SandboxRow, ownAddressOf: (id: string) => string | undefined): InventoryEntry {
  const name = row.claim_ref || row.id;
  const e: InventoryEntry = {
    name,
    phase: row.hibernated || row.archived ? "Hibernated" : "Running",
    id: row.id,
    template: row.key.template,
    claimRef: name,
  };
  const addr = ownAddressOf(row.id);
  if (addr) e.addr = addr;
  if (!isZero(row.deadline)) e.deadline = row.deadline;
  if (!isZero(row.claimed_at)) e.claimedAt = row.claimed_at;
  if (row.metadata && Object.keys(row.metadata).length > 0) e.claimMetadata = JSON.stringify(row.metadata);
  if (row.cpu_count && row.cpu_count > 0) e.cpuCount = row.cpu_count;
  if (row.mem_total_bytes && row.mem_total_bytes > 0) e.memoryBytes = row.mem_total_bytes;
  return e;
}

function byNameThenId(a: InventoryEntry, b: InventoryEntry): number {
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  const ai = a.id ?? "";
  const bi = b.id ?? "";
  return ai < bi ? -1 : ai > bi ? 1 : 0;
}

/** RFC 3339, UTC, millisecond precision. */
export const rfc3339 = (d: Date): string => d.toISOString();

/** The node's rows, sorted by name (ties broken by id) so an unchanged index always produces the same list. */
export function buildEntries(rows: readonly SandboxRow[], ownAddressOf: (id: string) => string | undefined): InventoryEntry[] {
  return rows.map((r) => inventoryEntry(r, ownAddressOf)).sort(byNameThenId);
}

const ownerOf = (nodeName: string, nodeUid: string | undefined) =>
  nodeUid ? [{ apiVersion: "v1", kind: "Node", name: nodeName, uid: nodeUid }] : undefined;

/** The object `<node>` without its rows: what the sharded form applies every publish. */
export function buildRoot(i: Omit<BuildInput, "rows" | "ownAddressOf">): NodeInventory {
  const pools: InventoryPool[] = i.info.pools.map((p) => ({
    template: p.key.template,
    net: p.key.net,
    size: p.key.size,
    warm: p.warm,
    target: p.target,
  }));
  const templates: InventoryTemplate[] = (i.info.templates ?? []).map((t) => {
    const out: InventoryTemplate = { template: t.key.template, net: t.key.net, size: t.key.size, contentDigest: t.content_digest };
    if (t.tenant) out.tenant = t.tenant;
    if (!isZero(t.created_at)) out.createdAt = t.created_at;
    if (t.cpu_count > 0) out.cpuCount = t.cpu_count;
    if (t.mem_total_bytes > 0) out.memoryBytes = t.mem_total_bytes;
    return out;
  });
  const inv: NodeInventory = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: i.nodeName },
    node: i.nodeName,
    publishedAt: rfc3339(i.publishedAt),
  };
  const owner = ownerOf(i.nodeName, i.nodeUid);
  if (owner) inv.metadata.ownerReferences = owner;
  if (i.address) inv.address = i.address;
  // An empty list is left out, not sent as []: with server-side apply, a field this manager stops sending is cleared.
  if (pools.length > 0) inv.pools = pools;
  if (templates.length > 0) inv.templates = templates;
  return inv;
}

/** The seed's single-object form: the root with every row in `entries`. */
export function buildInventory(i: BuildInput): NodeInventory {
  const inv = buildRoot(i);
  const entries = buildEntries(i.rows, i.ownAddressOf);
  if (entries.length > 0) inv.entries = entries;
  return inv;
}

export interface ShardInput {
  nodeName: string;
  nodeUid?: string;
  generation: number;
  index: number;
  count: number;
  entries: InventoryEntry[];
}

/** One NodeInventoryShard (docs/inventory.md): owned by the Node like the root, so GC removes both with it. */
export function buildShard(i: ShardInput): NodeInventoryShard {
  const shard: NodeInventoryShard = {
    apiVersion: API_VERSION,
    kind: SHARD_KIND,
    metadata: { name: shardName(i.nodeName, i.generation, i.index) },
    node: i.nodeName,
    generation: i.generation,
    index: i.index,
    count: i.count,
  };
  const owner = ownerOf(i.nodeName, i.nodeUid);
  if (owner) shard.metadata.ownerReferences = owner;
  // Omitted when empty, as in the root: apply then clears the rows this manager sent before.
  if (i.entries.length > 0) shard.entries = i.entries;
  return shard;
}
