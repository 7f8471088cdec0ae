// How the sharded form (docs/inventory.md) splits a node's rows over NodeInventoryShard objects. Pure.
//
// A row's shard is a hash of its claim id (its name when it has none) modulo the shard count, so it stays in one
// shard for as long as the count does: a claim or release rewrites one shard, never the set. The count is a power of
// two chosen from the rows' encoded size, kept while it still fits (hysteresis: a count is left only when a shard
// would pass SHARD_MAX_BYTES or the rows would fit in a quarter of it), so a node that hovers around a boundary does
// not rewrite every shard each publish.
import type { InventoryEntry } from "#shared/inventory/index.ts";

/**
 * What a new count aims each shard at. A change rewrites its shard whole, so this is about what one claim or release
 * costs the apiserver and every reader at a full node (measured: tests/bench/inventory.bench.ts); smaller means more
 * objects (a full node of the largest metadata is 256 at this size).
 */
export const SHARD_TARGET_BYTES = 64 * 1024;
/** No shard is written larger: past it the count doubles (a third of etcd's limit, so managedFields and the rest fit). */
export const SHARD_MAX_BYTES = 512 * 1024;
/** A bound, not a goal: 1,024 shards of 512 KiB is 512 MiB, far past any row set sandboxd's 2,000 slots produce. */
export const MAX_SHARDS = 1024;
/** Bytes of a shard object besides its rows (apiVersion, kind, metadata, node, generation, index, count). */
export const SHARD_OVERHEAD_BYTES = 1024;

/** The key a row hashes on: the claim id, stable for the row's life; the name for an id-less row. */
export const rowKey = (e: InventoryEntry): string => e.id ?? e.name;

/** FNV-1a, 32-bit, over UTF-16 code units: cheap, stable across processes and releases (it is part of the format). */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export const shardOf = (e: InventoryEntry, count: number): number => fnv1a(rowKey(e)) % count;

/** The encoded size of one row inside an `entries` array (its JSON and a comma). */
export const rowBytes = (e: InventoryEntry): number => Buffer.byteLength(JSON.stringify(e)) + 1;

export interface ShardLayout {
  count: number;
  /** Per shard, its rows in the caller's order (sorted rows stay sorted). */
  buckets: InventoryEntry[][];
  /** Per shard, the estimated object size. */
  bytes: number[];
  /** Every row's bytes, summed. */
  rowBytes: number;
}

function split(entries: readonly InventoryEntry[], sizes: readonly number[], count: number): ShardLayout {
  const buckets: InventoryEntry[][] = Array.from({ length: count }, () => []);
  const bytes: number[] = new Array<number>(count).fill(SHARD_OVERHEAD_BYTES);
  let total = 0;
  entries.forEach((e, i) => {
    const k = shardOf(e, count);
    buckets[k]!.push(e);
    bytes[k]! += sizes[i]!;
    total += sizes[i]!;
  });
  return { count, buckets, bytes, rowBytes: total };
}

const pow2AtLeast = (n: number): number => {
  let p = 1;
  while (p < n && p < MAX_SHARDS) p *= 2;
  return p;
};

/**
 * The layout of `entries` over shards. `current` is the count of the generation last written: it is kept while every
 * shard stays within SHARD_MAX_BYTES and the rows would not fit in a quarter of it.
 */
export function layoutShards(entries: readonly InventoryEntry[], current?: number): ShardLayout {
  const sizes = entries.map(rowBytes);
  const total = sizes.reduce((a, b) => a + b, 0);
  const wanted = pow2AtLeast(Math.ceil(total / SHARD_TARGET_BYTES));
  if (current !== undefined && current >= 1 && current <= MAX_SHARDS && current >= wanted && current <= wanted * 4) {
    const kept = split(entries, sizes, current);
    if (Math.max(...kept.bytes) <= SHARD_MAX_BYTES) return kept;
  }
  let count = Math.max(1, wanted);
  let layout = split(entries, sizes, count);
  // An uneven hash (or one huge row set on one key) can still overfill a shard: double until none does.
  while (Math.max(...layout.bytes) > SHARD_MAX_BYTES && count < MAX_SHARDS) {
    count *= 2;
    layout = split(entries, sizes, count);
  }
  return layout;
}
