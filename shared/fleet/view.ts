// Reads over a fleet snapshot that every consumer shares (the e2b surface, the relay): the inventory freshness
// rule, the namespace of a claim_ref, entry lookup by either id spelling, and claim placement candidates.
// Pure functions: the sources (mesh.ts, the Kubernetes one) produce FleetNode lists, these read them.
import { publicSandboxId } from "../envd-token/index.ts";
import { POD_UID_METADATA_KEY, type PoolKey } from "../sandboxd/index.ts";
import type { FleetEntry, FleetNode } from "./types.ts";

/** The namespace a `claim_ref` / inventory entry name belongs to: the part before the first `/`, else `default`. */
export function namespaceOfName(name: string): string {
  const i = name.indexOf("/");
  return i > 0 ? name.slice(0, i) : "default";
}

/**
 * The inventory freshness rule (docs/fleet.md): a node is fresh while its `publishedAt` trails the fleet's newest
 * `publishedAt` (capped by the local clock, so one node with a clock in the future cannot age everyone else out)
 * by at most `staleAfterMs`. A node without `publishedAt` is stale once any node stamps one; when no node stamps
 * one, every node stays.
 */
export function freshNodes<N extends { publishedAt?: number }>(nodes: readonly N[], staleAfterMs: number, nowMs: number): N[] {
  const stamps = nodes.map((n) => n.publishedAt).filter((t): t is number => t !== undefined);
  if (stamps.length === 0) return [...nodes];
  const newest = Math.min(Math.max(...stamps), nowMs);
  return nodes.filter((n) => n.publishedAt !== undefined && newest - n.publishedAt <= staleAfterMs);
}

/**
 * Whether a claim's metadata carries vk-sandbox's Pod stamp: the microVM backs a Kubernetes Pod, which only the
 * Kubernetes-facing surfaces may act on (docs/e2b.md "Pod-backed sandboxes"). Entries and live rows both carry it.
 */
export function isPodBacked(metadata: Readonly<Record<string, string>> | undefined): boolean {
  return metadata !== undefined && Object.hasOwn(metadata, POD_UID_METADATA_KEY);
}

export interface EntryHit {
  node: FleetNode;
  entry: FleetEntry;
}

/**
 * The entry whose id matches `requestedId` (either spelling), on a node with an address. `namespace` undefined or
 * empty matches every namespace (the proxy's empty `--namespace`).
 */
export function findEntry(nodes: readonly FleetNode[], requestedId: string, namespace?: string): EntryHit | undefined {
  // sameSandboxId's two spellings, looked up instead of compared with every row: the raw id as given, and its
  // lowercase against each row's public rendering. A scan was the proxy's and the e2b surface's cost per lookup at
  // fleet size (400,000 rows: a regex per row per request; docs/scaling.md).
  const raw = requestedId.trim();
  const lower = raw.toLowerCase();
  for (const node of nodes) {
    if (!node.address) continue;
    const index = idIndexOf(node.entries);
    const a = index.raw.get(raw);
    const b = index.pub.get(lower);
    if (!a && !b) continue;
    const hits = a && b ? [...new Set([...a, ...b])].sort((x, y) => x - y) : (a ?? b)!;
    for (const i of hits) {
      const entry = node.entries[i]!;
      if (namespace && entry.namespace !== namespace) continue;
      return { node, entry };
    }
  }
  return undefined;
}

interface IdIndex {
  /** Row positions by raw claim id. */
  raw: Map<string, number[]>;
  /** Row positions by the public rendering of the claim id (publicSandboxId). */
  pub: Map<string, number[]>;
}

/**
 * Per rows array, built on first lookup: a node's record is replaced on every publish, but a publish that changed only
 * its root keeps the same rows array (shared/fleet/inventory.ts), so the index is built once per change of its rows.
 */
const idIndexes = new WeakMap<readonly FleetEntry[], IdIndex>();

function idIndexOf(entries: readonly FleetEntry[]): IdIndex {
  let index = idIndexes.get(entries);
  if (index) return index;
  index = { raw: new Map(), pub: new Map() };
  const add = (m: Map<string, number[]>, k: string, i: number) => {
    const l = m.get(k);
    if (l) l.push(i);
    else m.set(k, [i]);
  };
  entries.forEach((e, i) => {
    add(index!.raw, e.id, i);
    add(index!.pub, publicSandboxId(e.id), i);
  });
  idIndexes.set(entries, index);
  return index;
}

/** Every entry of a namespace across the fleet (lists). */
export function entriesOf(nodes: readonly FleetNode[], namespace: string): EntryHit[] {
  const out: EntryHit[] = [];
  for (const node of nodes) for (const entry of node.entries) if (entry.namespace === namespace) out.push({ node, entry });
  return out;
}

/** Nodes with an address whose pool for `key` has warm capacity, warmest first (placement samples from these). */
export function claimCandidates(nodes: readonly FleetNode[], key: PoolKey): { node: FleetNode; warm: number }[] {
  const out: { node: FleetNode; warm: number }[] = [];
  for (const node of nodes) {
    if (!node.address) continue;
    const pool = node.pools.find((p) => p.template === key.template && p.net === key.net && p.size === key.size);
    if (pool && pool.warm > 0) out.push({ node, warm: pool.warm });
  }
  return out.sort((a, b) => b.warm - a.warm);
}

/** Whether any fresh node advertises a pool of this image (any net/size): the template is "known". */
export function advertisesImage(nodes: readonly FleetNode[], image: string): boolean {
  return nodes.some((n) => n.pools.some((p) => p.template === image));
}

/** The node a sandboxd address (`owner_addr`, a redirect target) belongs to. */
export function nodeByAddress(nodes: readonly FleetNode[], address: string): FleetNode | undefined {
  const a = address.trim().replace(/\/+$/, "").replace(/^https?:\/\//, "");
  return nodes.find((n) => n.address.replace(/\/+$/, "").replace(/^https?:\/\//, "") === a);
}
