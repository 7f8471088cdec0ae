// What the fleet's pools are asked for and how fast nodes answer (docs/fleet.md "Demand"): per pool key, the claim
// rate and the refill time, measured from successive fleet snapshots (NodeInventories or mesh polls) and from this
// process's own claims. Pure over snapshots and a Clock; the warm-pool autoscaler and the capacity answer read it.
//
// Claims: an entry id a node did not list in its previous snapshot is a claim of the node's pool with that
// template; a warm drop no new entry explains (a claim released before the next publish) counts too, unless one of
// this process's own or canary claims of that key explains it. Own claims (recordClaim) count at once and are not
// counted again when their id shows up in an inventory; canary claims (recordCanary) never count. A claim seen in a
// snapshot is spread evenly over the time since the node's previous snapshot, so a 30 s publish cadence does not
// turn a steady rate into bursts. The short rate window starts where the demand did (at most 15 s, at least 5 s
// back), so a step from idle shows its rate within one publish instead of ramping over the window.
//
// Refill: per node and key, each claim opens a deficit stamped with the entry's claimedAt (the node's clock), else
// the interval since the previous snapshot; each VM the node added since (warm' − warm + claims) closes the oldest
// one, and the sample is the interval the refill time must lie in (a snapshot tells that a VM came up between two
// reports, not when); the estimate is the time most samples contain. A raised target opens deficits the same way,
// without a sample (nor for claims queued behind it: that wait is the driver's transient); creates this process could not serve (recordMiss) count as claims for the rate. Stamps are the node's own
// publishedAt when it has one (both ends on one clock), else this process's clock.
import type { Clock } from "../clock/index.ts";
import { type PoolKey, poolKeyString } from "../sandboxd/index.ts";
import type { DemandReader, DemandReading, FleetNode } from "./types.ts";

/** The rate windows: the short one reacts within seconds, the long one carries a slow publish cadence. */
export const RATE_SHORT_WINDOW_MS = 15_000;
export const RATE_LONG_WINDOW_MS = 60_000;
/** The shortest span the short window divides by (one claim after idle is not a burst). */
export const RATE_MIN_SPAN_MS = 5_000;
/**
 * Refill samples kept per key. Each is an interval (a snapshot says a VM came up between two reports, not when); the
 * estimate is the time most of them contain (mostCovered), so a coarse publish cadence widens the samples, not the
 * estimate.
 */
export const REFILL_SAMPLES = 32;
/** The canary's claim_ref namespace: its claims refill like any other (refill samples) but are not demand. */
export const CANARY_NAMESPACE = "sandbox-canary";
/** Bounds on what one process remembers: own-claim ids (dedupe) and rate intervals per key. */
const OWN_IDS_MAX = 10_000;
const INTERVALS_MAX = 4_096;
/** Own/canary claims not yet seen in a snapshot, kept to explain a warm drop, for this long at most. */
const PENDING_MS = 120_000;
const PENDING_MAX = 4_096;

/** A claim this process made (or the canary's) that no snapshot has listed yet. */
interface Pending {
  id: string;
  key: string;
  /** The node's name when the caller knows it; else any node's drop of the key may be explained by it. */
  node: string | undefined;
  at: number;
}

interface NodeState {
  /** The snapshot object last observed (an unchanged snapshot is skipped). */
  node: FleetNode;
  /** This process's clock at that observation (rate spreading). */
  seenAt: number;
  /** The node's stamp for it (refill samples). */
  stamp: number;
  ids: Set<string>;
  pools: Map<string, { warm: number; target: number }>;
  /**
   * Per key: the deficits still open, oldest first. `raise`: a raised target's (not a replacement); `sample` false
   * for those and for claims queued behind them.
   */
  open: Map<string, Deficit[]>;
}

/** A VM a node lacks since a claim (or a raise) made in [from, to] (node stamps; equal when the node said when). */
interface Deficit {
  from: number;
  to: number;
  sample: boolean;
  raise: boolean;
}

/** One refill time, known only to lie in [lo, hi] (ms): snapshots show that it happened, not when. */
interface RefillSample {
  lo: number;
  hi: number;
}

/** `n` claims spread evenly over (from, to]. */
interface Interval {
  from: number;
  to: number;
  n: number;
}

export class DemandMeter implements DemandReader {
  private readonly nodes = new Map<string, NodeState>();
  private readonly rates = new Map<string, Interval[]>();
  private readonly refills = new Map<string, RefillSample[]>();
  private readonly ownIds = new Set<string>();
  /** By id, oldest first (insertion order): settling a listed id is a lookup, not a pass over every pending claim. */
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly clock: Clock) {}

  /** One claim this process made (the aggregated API's or the e2b surface's create), counted now, once per id. */
  recordClaim(key: PoolKey, id: string, node?: string): void {
    if (!this.remember(key, id, node)) return;
    const now = this.clock.now();
    this.addClaims(poolKeyString(key), now, now, 1);
  }

  /** A canary claim: never demand, neither when listed nor when released before the next publish. */
  recordCanary(key: PoolKey, id: string, node?: string): void {
    this.remember(key, id, node);
  }

  /** False when the id is already known (a replayed create). */
  private remember(key: PoolKey, id: string, node: string | undefined): boolean {
    if (this.ownIds.has(id)) return false;
    this.ownIds.add(id);
    if (this.ownIds.size > OWN_IDS_MAX) this.ownIds.delete(this.ownIds.values().next().value!);
    this.pending.set(id, { id, key: poolKeyString(key), node, at: this.clock.now() });
    if (this.pending.size > PENDING_MAX) this.pending.delete(this.pending.keys().next().value!);
    return true;
  }

  /**
   * One create this process could not serve for lack of a warm VM: demand too. Without it a dry pool would measure
   * only what it manages to hand out, and never grow past its refill throughput. A client's retry counts again
   * (a slight overestimate while the pool is dry, gone with the window).
   */
  recordMiss(key: PoolKey): void {
    const now = this.clock.now();
    this.addClaims(poolKeyString(key), now, now, 1);
  }

  /** A fleet snapshot (fresh nodes). Nodes absent from it are forgotten. */
  observe(nodes: readonly FleetNode[]): void {
    const now = this.clock.now();
    // Oldest first (insertion order, stamped on insert): stop at the first one still pending. A scan of the whole
    // map on every poll was the meter's share of a create -> kill cycle's CPU.
    for (const [id, p] of this.pending) {
      if (p.at > now - PENDING_MS) break;
      this.pending.delete(id);
    }
    const present = new Set<string>();
    for (const node of nodes) {
      present.add(node.name);
      const prev = this.nodes.get(node.name);
      if (prev && (prev.node === node || (node.publishedAt !== undefined && node.publishedAt === prev.stamp))) continue;
      const stamp = node.publishedAt ?? now;
      const next: NodeState = {
        node,
        seenAt: now,
        stamp,
        // The same rows array as last time (a publish that changed only the root): the same ids, not rebuilt per row.
        ids: prev && prev.node.entries === node.entries ? prev.ids : new Set(node.entries.map((e) => e.id)),
        pools: new Map(node.pools.map((p) => [poolKeyString(p), { warm: p.warm, target: p.target }])),
        open: prev?.open ?? new Map(),
      };
      if (prev) this.compare(prev, next);
      this.nodes.set(node.name, next);
    }
    for (const name of [...this.nodes.keys()]) if (!present.has(name)) this.nodes.delete(name);
  }

  read(key: PoolKey): DemandReading {
    const k = poolKeyString(key);
    const now = this.clock.now();
    // Each window divides by the time since its demand began (at most the window), so a step from idle reads its
    // level at once in both. The long window is the estimate; the short one replaces it only when it counted
    // significantly more than the long rate predicts (3 Poisson standard deviations): a step up shows within a
    // publish, while the short window's noise (±18 % at 2/s) does not ratchet the target up (it is held for the
    // scale-down window, so a noisy maximum would stay).
    const shortSpan = this.span(k, now, RATE_SHORT_WINDOW_MS, 2 * RATE_SHORT_WINDOW_MS) / 1000;
    const long = this.countSince(k, now - RATE_LONG_WINDOW_MS, now) / (this.span(k, now, RATE_LONG_WINDOW_MS, RATE_LONG_WINDOW_MS) / 1000);
    const shortCount = this.countSince(k, now - RATE_SHORT_WINDOW_MS, now);
    const expected = long * shortSpan;
    const stepUp = shortCount > expected + 3 * Math.sqrt(Math.max(1, expected));
    const samples = this.refills.get(k) ?? [];
    return { claimsPerSecond: stepUp ? shortCount / shortSpan : long, refillMs: mostCovered(samples), refillSamples: samples.length };
  }

  private compare(prev: NodeState, next: NodeState): void {
    // New ids by the template they were claimed from; a template several keys share goes to the first key in order.
    const byTemplate = new Map<string, string>();
    for (const p of [...next.node.pools].sort((a, b) => (poolKeyString(a) < poolKeyString(b) ? -1 : 1))) {
      if (!byTemplate.has(p.template)) byTemplate.set(p.template, poolKeyString(p));
    }
    const seenClaims = new Map<string, number>();
    const countedClaims = new Map<string, number>();
    const claimedAt = new Map<string, { from: number; to: number }[]>();
    const unknown = { from: prev.stamp, to: next.stamp };
    for (const e of next.ids === prev.ids ? [] : next.node.entries) {
      if (prev.ids.has(e.id) || !e.template) continue;
      const k = byTemplate.get(e.template);
      if (!k) continue; // not a pool claim (a built template, a snapshot restore)
      seenClaims.set(k, (seenClaims.get(k) ?? 0) + 1);
      if (!this.ownIds.has(e.id) && e.namespace !== CANARY_NAMESPACE) countedClaims.set(k, (countedClaims.get(k) ?? 0) + 1);
      // The node's claim stamp when it is inside the interval (same clock as publishedAt), else the whole interval.
      const at = e.claimedAt !== undefined && e.claimedAt > prev.stamp && e.claimedAt <= next.stamp ? { from: e.claimedAt, to: e.claimedAt } : unknown;
      let stamped = claimedAt.get(k);
      if (!stamped) claimedAt.set(k, (stamped = []));
      stamped.push(at);
    }
    // Own and canary claims listed now are settled; the rest may explain a drop below.
    // Whichever is smaller is walked: the pending claims (at most PENDING_MAX) or the node's rows (2,000 at capacity).
    if (this.pending.size < next.ids.size) {
      for (const id of [...this.pending.keys()]) if (next.ids.has(id)) this.pending.delete(id);
    } else for (const id of next.ids) this.pending.delete(id);
    for (const [k, pool] of next.pools) {
      const before = prev.pools.get(k);
      let claims = seenClaims.get(k) ?? 0;
      let counted = countedClaims.get(k) ?? 0;
      const open = next.open.get(k) ?? [];
      if (before) {
        let added = pool.warm - before.warm + claims;
        // A drop no entry explains is a claim released before this snapshot, unless the target went down (a trim).
        const stamps = [...(claimedAt.get(k) ?? [])].sort((a, b) => a.from - b.from);
        if (added < 0) {
          if (pool.target >= before.target) {
            const drop = -added;
            claims += drop;
            counted += drop - this.explain(k, next.node.name, prev.ids, drop);
            for (let i = 0; i < drop; i++) stamps.push(unknown);
          }
          added = 0;
        }
        // A raised target opens deficits too, so that its provisions do not close (and shorten) the claims' ones.
        const raised = Math.max(0, pool.target - before.target);
        for (let i = 0; i < raised; i++) open.push({ ...unknown, sample: false, raise: true });
        // A claim queued behind a raise's provisions waits for them: that wait is the driver's own transient (it ends
        // once the pool is up), not the refill time the rule needs, so such a claim gives no sample.
        const behindRaise = open.some((d) => d.raise);
        for (const at of stamps) open.push({ ...at, sample: !behindRaise, raise: false });
        for (; added > 0 && open.length > 0; added--) {
          const opened = open.shift()!;
          if (!opened.sample) continue;
          // Claimed in [from, to], up in (previous report, this report]: the refill lies between these bounds.
          this.addRefill(k, { lo: Math.max(0, prev.stamp - opened.to), hi: Math.max(0, next.stamp - opened.from) });
        }
      }
      // More open deficits than the pool lacks: refills this comparison could not see; the oldest are the ones done.
      const deficit = Math.max(0, pool.target - pool.warm);
      if (open.length > deficit) open.splice(0, open.length - deficit);
      next.open.set(k, open);
      if (counted > 0) this.addClaims(k, prev.seenAt, next.seenAt, counted);
    }
    for (const k of [...next.open.keys()]) if (!next.pools.has(k)) next.open.delete(k);
  }

  /**
   * How many of `drop` unexplained warm drops of key `k` on `node` are own or canary claims no snapshot listed
   * (claimed and released between two); those are consumed. The rest are claims nobody here made.
   */
  private explain(k: string, node: string, prevIds: ReadonlySet<string>, drop: number): number {
    let n = 0;
    for (const [id, p] of this.pending) {
      if (n >= drop) break;
      if (p.key !== k || (p.node !== undefined && p.node !== node) || prevIds.has(id)) continue;
      this.pending.delete(id);
      n++;
    }
    return n;
  }

  /**
   * A window's span: back to where its demand began (the earliest claim interval ending in the last `lookback`),
   * within [5 s, window]. Continuous demand spans the whole window; demand after an idle gap, the time since.
   */
  private span(k: string, now: number, window: number, lookback: number): number {
    let start = now;
    for (const iv of this.rates.get(k) ?? []) if (iv.to > now - lookback) start = Math.min(start, iv.from);
    return Math.min(window, Math.max(RATE_MIN_SPAN_MS, now - start));
  }

  private addClaims(k: string, from: number, to: number, n: number): void {
    const list = this.rates.get(k) ?? [];
    list.push({ from, to, n });
    const horizon = this.clock.now() - RATE_LONG_WINDOW_MS;
    while (list.length > 0 && (list[0]!.to < horizon || list.length > INTERVALS_MAX)) list.shift();
    this.rates.set(k, list);
  }

  private addRefill(k: string, sample: RefillSample): void {
    const list = this.refills.get(k) ?? [];
    list.push(sample);
    if (list.length > REFILL_SAMPLES) list.shift();
    this.refills.set(k, list);
  }

  /** Claims in (since, now], an interval counted in proportion to its overlap. */
  private countSince(k: string, since: number, now: number): number {
    let n = 0;
    for (const iv of this.rates.get(k) ?? []) {
      if (iv.to <= since) continue;
      const span = iv.to - iv.from;
      if (span <= 0) {
        if (iv.to <= now) n += iv.n;
        continue;
      }
      const overlap = Math.max(0, Math.min(iv.to, now) - Math.max(iv.from, since));
      n += (iv.n * overlap) / span;
    }
    return n;
  }
}

/**
 * The refill time most samples agree on: the middle of the span covered by the most [lo, hi] intervals (the latest
 * such span on a tie: a longer refill is the safe side). A constant refill time lies in every interval, so the
 * estimate tightens with each sample, however coarse the publish cadence; a few outliers (a claim queued behind
 * others) do not move it, as they would a mean.
 */
export function mostCovered(samples: readonly RefillSample[]): number | undefined {
  if (samples.length === 0) return undefined;
  // Starts before ends at one coordinate, so touching intervals overlap (closed intervals).
  const events = samples.flatMap((s) => [{ x: s.lo, d: 1 }, { x: s.hi, d: -1 }]).sort((a, b) => a.x - b.x || b.d - a.d);
  let depth = 0;
  let best = -1;
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    depth += e.d;
    if (e.d === 1 && depth >= best) {
      // The span runs from here to the next event (an end, or a further start that only deepens it).
      best = depth;
      lo = e.x;
      hi = events[i + 1]?.x ?? e.x;
    }
  }
  return (lo + hi) / 2;
}
