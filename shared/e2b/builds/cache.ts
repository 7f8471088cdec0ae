// The build step cache (docs/e2b.md "Builds", beyond the seeds): after each step a build promotes its sandbox as
// `e2b/<ns>/_c-<key>`, key = sha256 of the pool image, size and the steps so far (COPY by its files hash), with the
// guest state (user, workdir, env) in a label. A later build of the same image and step prefix claims the longest
// cached prefix it finds with `require_promoted` and runs only the steps after it. Build names cannot start with
// `_`, so these never clash with a template; the catalog does not list them; each build name keeps one chain (a
// finished build deletes the cache entries of its name that are not on its own).
import { createHash } from "node:crypto";
import type { Logger } from "../../log/index.ts";
import type { FleetTemplate } from "../../fleet/index.ts";
import { DEFAULT_NET, DEFAULT_SIZE, metadataProblem } from "../../sandboxd/index.ts";
import type { NodeAccess } from "../nodes.ts";
import { BUILT_PREFIX, NAME_BUDGET } from "../render.ts";
import { CACHE_NAME_PREFIX } from "../../built-templates/index.ts";
import type { GuestState } from "./executor.ts";
import type { BuildStep } from "./steps.ts";

export { CACHE_NAME_PREFIX };
const KEY_HEX = 32;
/** A chain caches its first steps up to this many, then only its last: a 512-step build leaves 17 entries, not 512. */
export const CACHE_CHAIN_STEPS = 16;
/** Cache entries one namespace keeps on the fleet; beyond them a finished build deletes the oldest chains. */
export const CACHE_MAX_ENTRIES = 128;
/** Built names (`e2b/<ns>/<name>`, snapshots included) one namespace may hold; a build of a new name beyond is a 429. */
export const MAX_BUILT_NAMES = 100;

/** Whether step `i` (0-based) of `n` is saved as a cache entry. */
export const cachesStep = (i: number, n: number, k = CACHE_CHAIN_STEPS): boolean => i < k || i === n - 1;

/** keys[k-1] is the key of the first k steps. */
export function prefixKeys(image: string, size: string, steps: readonly BuildStep[]): string[] {
  const keys: string[] = [];
  const h = createHash("sha256").update(JSON.stringify({ v: 1, image, size }));
  for (const step of steps) {
    h.update(`\n${JSON.stringify(step)}`);
    keys.push(h.copy().digest("hex").slice(0, KEY_HEX));
  }
  return keys;
}

/** The promoted name of a cache entry; undefined when it does not fit the node's name budget. */
export function cacheRef(ns: string, key: string): string | undefined {
  const ref = `${BUILT_PREFIX}${ns}/${CACHE_NAME_PREFIX}${key}`;
  return ref.length <= NAME_BUDGET ? ref : undefined;
}

function stateOf(labels: Record<string, string> | undefined): GuestState | undefined {
  try {
    const v = JSON.parse(labels?.s ?? "") as { u?: unknown; w?: unknown; e?: unknown };
    if (typeof v.u !== "string" || typeof v.w !== "string" || !v.e || typeof v.e !== "object") return undefined;
    const env = Object.fromEntries(Object.entries(v.e as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === "string"));
    return { user: v.u, workdir: v.w, env };
  } catch {
    return undefined;
  }
}

export interface CacheHit {
  steps: number;
  address: string;
  template: FleetTemplate;
  state: GuestState;
}

/** The longest cached prefix some fresh node holds (as the fleet view shows it). */
export function findCached(nodes: NodeAccess, ns: string, keys: readonly string[]): CacheHit | undefined {
  const fleet = nodes.nodes();
  for (let k = keys.length; k >= 1; k--) {
    const ref = cacheRef(ns, keys[k - 1]!);
    if (!ref) return undefined;
    for (const node of fleet) {
      if (!node.address) continue;
      for (const t of node.templates) {
        if (t.template !== ref) continue;
        const state = stateOf(t.labels);
        if (state) return { steps: k, address: node.address, template: t, state };
      }
    }
  }
  return undefined;
}

/** Promote the build sandbox as the cache entry of `key`, its state in a label. False when it could not. */
export async function saveStep(
  nodes: NodeAccess,
  o: { address: string; claimId: string; ns: string; name: string; key: string; state: GuestState; signal: AbortSignal },
): Promise<boolean> {
  const ref = cacheRef(o.ns, o.key);
  if (!ref) return false;
  const labels = { n: o.name, s: JSON.stringify({ u: o.state.user, w: o.state.workdir, e: o.state.env }) };
  // Labels follow the node's metadata rules (16 pairs, 4 KiB): a bigger state is simply not cached.
  if (metadataProblem(labels)) return false;
  const client = nodes.client(o.address);
  const promoted = await client.promote(o.claimId, { template: ref }, { signal: o.signal });
  await client.putTemplateLabels(promoted.key, labels, { digest: promoted.content_digest, signal: o.signal });
  // The next build of the name looks for it at once: this replica sees its entry, labels included, before the
  // fleet view does (a view polled between the promote and the labels lists it without its state).
  nodes.templateWrites.published(
    o.address,
    { template: promoted.key.template, net: promoted.key.net ?? DEFAULT_NET, size: promoted.key.size ?? DEFAULT_SIZE, contentDigest: promoted.content_digest, createdAt: Date.now(), labels },
  );
  return true;
}

/** Delete the cache entries of `name` that are not on `keep` (the chain of the build that just finished). */
export async function pruneCache(nodes: NodeAccess, log: Logger, ns: string, name: string, keep: ReadonlySet<string>): Promise<void> {
  const prefix = `${BUILT_PREFIX}${ns}/${CACHE_NAME_PREFIX}`;
  const stale = nodes.nodes().flatMap((node) =>
    node.address ? node.templates.filter((t) => t.template.startsWith(prefix) && t.labels?.n === name && !keep.has(t.template)).map((t) => ({ address: node.address, t })) : [],
  );
  const results = await deleteEntries(nodes, stale);
  for (const r of results) if (r instanceof Error) log.debug({ err: r }, "build cache: deleting an old entry failed; the next build of the name retries");
}

/** Delete cache entries on their nodes, each by its digest (NodeAccess.deleteTemplates records the ones gone). */
const deleteEntries = (nodes: NodeAccess, entries: readonly { address: string; t: FleetTemplate }[]) =>
  nodes.deleteTemplates(entries.map(({ address, t }) => ({ address, template: t })), { byDigest: true });

/** The namespace's cache entries on the fleet, each with the node that holds it. */
function entriesOf(nodes: NodeAccess, ns: string): { address: string; t: FleetTemplate }[] {
  const prefix = `${BUILT_PREFIX}${ns}/${CACHE_NAME_PREFIX}`;
  return nodes.nodes().flatMap((node) => (node.address ? node.templates.filter((t) => t.template.startsWith(prefix)).map((t) => ({ address: node.address, t })) : []));
}

/** The number of cache entries the namespace holds (as the fleet view shows them). */
export const cacheEntryCount = (nodes: NodeAccess, ns: string): number => entriesOf(nodes, ns).length;

/**
 * The entries to delete so at most `max` are left: whole chains (entries of one build name), the chain whose newest
 * entry is oldest first; `keepName`'s chain (the build that just finished) is never chosen.
 */
export function overflow<T extends { t: FleetTemplate }>(entries: readonly T[], keepName: string, max: number): T[] {
  if (entries.length <= max) return [];
  const chains = new Map<string, { newest: number; items: T[] }>();
  for (const e of entries) {
    const name = e.t.labels?.n ?? "";
    if (name === keepName) continue;
    const c = chains.get(name) ?? { newest: 0, items: [] };
    c.newest = Math.max(c.newest, e.t.createdAt ?? 0);
    c.items.push(e);
    chains.set(name, c);
  }
  const out: T[] = [];
  let left = entries.length;
  for (const c of [...chains.values()].sort((a, b) => a.newest - b.newest)) {
    if (left <= max) break;
    out.push(...c.items);
    left -= c.items.length;
  }
  return out;
}

/** Delete the namespace's oldest chains until at most CACHE_MAX_ENTRIES entries are left. */
export async function capCache(nodes: NodeAccess, log: Logger, ns: string, keepName: string, max = CACHE_MAX_ENTRIES): Promise<void> {
  const drop = overflow(entriesOf(nodes, ns), keepName, max);
  const results = await deleteEntries(nodes, drop);
  for (const r of results) if (r instanceof Error) log.debug({ err: r }, "build cache: deleting an entry over the namespace's cap failed; the next build retries");
}

/** The built names (not cache entries) the namespace holds on the fleet. */
export function builtNames(nodes: NodeAccess, ns: string): Set<string> {
  const prefix = `${BUILT_PREFIX}${ns}/`;
  const names = new Set<string>();
  for (const node of nodes.nodes())
    for (const t of node.templates) if (t.template.startsWith(prefix) && !t.template.startsWith(`${prefix}${CACHE_NAME_PREFIX}`)) names.add(t.template.slice(prefix.length));
  return names;
}
