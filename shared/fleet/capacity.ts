// The capacity answer (docs/fleet.md "No capacity"): when no warm VM and no node can serve a create, say why in
// terms an operator can act on — the pool key, how many nodes were known, how many of them were stale (left out),
// the warm/target counts the fresh ones reported — and when to retry, from the measured refill time. Both create
// paths (the aggregated API and the e2b surface) use it. Counts only: node names are never shown to tenants.
import type { PoolKey } from "../sandboxd/index.ts";
import type { FleetNode, FleetSource } from "./types.ts";

/** Retry-After when no refill has been measured yet (the sandboxd refill loop's tick and a boot, roughly). */
export const DEFAULT_RETRY_AFTER_SECONDS = 5;
/**
 * The cap: client-go honours Retry-After on a 503 by retrying the request up to 10 times, so `kubectl create` waits
 * out a dry spell by itself; the cap bounds how long it can wait before it reports the failure.
 */
export const MAX_RETRY_AFTER_SECONDS = 30;
/** At most this many per-node counts are spelled out; the rest are summed (bounded message size). */
const NODES_SPELLED = 8;

export interface NoCapacityInput {
  key: PoolKey;
  /** The fresh nodes the create looked at. */
  fresh: readonly Pick<FleetNode, "address" | "pools">[];
  /** How many nodes are known but left out as stale; undefined when the source cannot tell (the phrase is left out). */
  stale?: number | undefined;
  /** The measured refill time of the key (ms), if any. */
  refillMs?: number | undefined;
  /** What the message names; default `pool (template="…" net="…" size="…")`. */
  subject?: string;
}

export interface NoCapacityAnswer {
  message: string;
  /**
   * Undefined when no fresh node holds a warm target for the key: nothing will refill, so the client is not told
   * to retry (and client-go does not sit through ten retries of a create that cannot succeed).
   */
  retryAfterSeconds: number | undefined;
  /** Warm VMs of the key across the fresh nodes, and their targets. */
  warm: number;
  target: number;
}

export function explainNoCapacity(o: NoCapacityInput): NoCapacityAnswer {
  const { key } = o;
  const staleCount = o.stale ?? 0;
  const counts = o.fresh.map((n) => {
    const p = n.pools.find((x) => x.template === key.template && x.net === key.net && x.size === key.size);
    return { usable: n.address !== "", warm: p?.warm ?? 0, target: p?.target ?? 0, pooled: p !== undefined };
  });
  const warm = counts.reduce((s, c) => s + c.warm, 0);
  const target = counts.reduce((s, c) => s + c.target, 0);
  const noAddress = counts.filter((c) => !c.usable).length;
  const spelled = counts.slice(0, NODES_SPELLED).map((c) => (c.pooled ? `${c.warm}/${c.target}` : "-"));
  if (counts.length > NODES_SPELLED) spelled.push(`+${counts.length - NODES_SPELLED} more`);

  const pooled = counts.some((c) => c.usable && c.target > 0);
  let retryAfterSeconds: number | undefined;
  let when: string;
  if (!pooled) {
    when = "no fresh node holds a warm target for this pool (is a SandboxWarmPool for it configured?)";
  } else if (o.refillMs !== undefined && Number.isFinite(o.refillMs)) {
    retryAfterSeconds = clampSeconds(Math.ceil(o.refillMs / 1000));
    when = `a node refills one in about ${(o.refillMs / 1000).toFixed(1)}s (measured)`;
  } else {
    retryAfterSeconds = DEFAULT_RETRY_AFTER_SECONDS;
    when = "no refill time measured yet";
  }

  const parts = [
    `${o.fresh.length + staleCount} node(s) considered`,
    ...(o.stale === undefined ? [] : [`${staleCount} stale (left out)`]),
    ...(noAddress > 0 ? [`${noAddress} without an address`] : []),
    `warm/target per fresh node [${spelled.join(", ")}]`,
  ];
  const message =
    `no warm sandbox available for ${o.subject ?? `pool (template="${key.template}" net="${key.net}" size="${key.size}")`}: ` +
    `${parts.join(", ")}; ${when}` +
    (retryAfterSeconds === undefined ? "" : `; retry after ${retryAfterSeconds}s`);
  return { message, retryAfterSeconds, warm, target };
}

/**
 * The e2b surface's answer: the same explanation over its fleet source (stale count and measured refill when the
 * source has them), naming the tenant's template id rather than the image; Retry-After as a header. It also tells
 * the source's demand meter about the miss, so a pool run dry is sized by what was asked, not by what it served.
 */
export function noCapacityForTenant(templateID: string, key: PoolKey, source: FleetSource): { message: string; headers?: Record<string, string> } {
  source.demand?.recordMiss?.(key);
  const a = explainNoCapacity({
    key,
    fresh: source.nodes(),
    stale: source.staleCount?.(),
    refillMs: source.demand?.read(key).refillMs,
    subject: `template "${templateID}" (net="${key.net}" size="${key.size}")`,
  });
  return { message: a.message, ...(a.retryAfterSeconds === undefined ? {} : { headers: { "retry-after": String(a.retryAfterSeconds) } }) };
}

/** Sandboxes the stale nodes list: hidden from every read until their node publishes again (a gauge). */
export function hiddenByStale(stale: readonly Pick<FleetNode, "entries">[]): number {
  return stale.reduce((s, n) => s + n.entries.length, 0);
}

function clampSeconds(s: number): number {
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, s));
}
