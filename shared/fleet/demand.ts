// What the fleet's pools are asked for and how fast nodes answer (docs/fleet.md "Demand"): per pool key, the claim
// rate and the refill time, measured from successive fleet snapshots (NodeInventories or mesh polls) and from this
// process's own claims. Pure over snapshots and a Clock; the warm-pool autoscaler and the capacity answer read it.
//
// Claims: an entry id a node did not list in its previous snapshot is a claim of the node's pool with that
// template; a warm drop no new entry explains (a claim released before the next publish) counts too. Own claims
// (recordClaim) count at once and are not counted again when their id shows up in an inventory. A claim seen in a
// snapshot is spread evenly over the time since the node's previous snapshot, so a 30 s publish cadence does not
// turn a steady rate into bursts.
//
// Refill: per node and key, each claim opens a deficit stamped with the snapshot's time; each VM the node added
// since (warm' − warm + claims) closes the oldest one, and the time between is one refill sample. A raised target
// opens deficits the same way; creates this process could not serve (recordMiss) count as claims for the rate. Stamps are the
// node's own publishedAt when it has one (both ends on one clock), else this process's clock.
import type { Clock } from "../clock/index.ts";
import { type PoolKey, poolKeyString } from "../sandboxd/index.ts";
import type { DemandReader, DemandReading, FleetNode } from "./types.ts";

/** The rate windows: the short one reacts within seconds, the long one carries a slow publish cadence. */
export const RATE_SHORT_WINDOW_MS = 15_000;
export const RATE_LONG_WINDOW_MS = 60_000;
/**
 * Refill samples kept per key; the estimate is their median. Samples are quantized to the publish cadence, so a high
 * percentile mostly measures that quantization; the autoscaler's safety factor covers the spread.
 */
export const REFILL_SAMPLES = 32;
/** The canary's claim_ref namespace: its claims refill like any other (refill samples) but are not demand. */
export const CANARY_NAMESPACE = "sandbox-canary";
/** Bounds on what one process remembers: own-claim ids (dedupe) and rate intervals per key. */
const OWN_IDS_MAX = 10_000;
const INTERVALS_MAX = 4_096;

interface NodeState {
  /** The snapshot object last observed (an unchanged snapshot is skipped). */
  node: FleetNode;
  /** This process's clock at that observation (rate spreading). */
  seenAt: number;
  /** The node's stamp for it (refill samples). */
  stamp: number;
  ids: Set<string>;
  pools: Map<string, { warm: number; target: number }>;
  /** Per key: the deficits still open, oldest first; `sample` false for a raised target's (not a replacement). */
  open: Map<string, { at: number; sample: boolean }[]>;
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
  private readonly refills = new Map<string, number[]>();
  private readonly ownIds = new Set<string>();

  constructor(private readonly clock: Clock) {}

  /** One claim this process made (the aggregated API's create), counted now. */
  recordClaim(key: PoolKey, id: string): void {
    if (this.ownIds.has(id)) return;
    this.ownIds.add(id);
    if (this.ownIds.size > OWN_IDS_MAX) this.ownIds.delete(this.ownIds.values().next().value!);
    const now = this.clock.now();
    this.addClaims(poolKeyString(key), now, now, 1);
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
        ids: new Set(node.entries.map((e) => e.id)),
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
    const short = this.countSince(k, now - RATE_SHORT_WINDOW_MS, now) / (RATE_SHORT_WINDOW_MS / 1000);
    const long = this.countSince(k, now - RATE_LONG_WINDOW_MS, now) / (RATE_LONG_WINDOW_MS / 1000);
    const samples = this.refills.get(k) ?? [];
    return { claimsPerSecond: Math.max(short, long), refillMs: median(samples), refillSamples: samples.length };
  }

  private compare(prev: NodeState, next: NodeState): void {
    // New ids by the template they were claimed from; a template several keys share goes to the first key in order.
    const byTemplate = new Map<string, string>();
    for (const p of [...next.node.pools].sort((a, b) => (poolKeyString(a) < poolKeyString(b) ? -1 : 1))) {
      if (!byTemplate.has(p.template)) byTemplate.set(p.template, poolKeyString(p));
    }
    const seenClaims = new Map<string, number>();
    const countedClaims = new Map<string, number>();
    for (const e of next.node.entries) {
      if (prev.ids.has(e.id) || !e.template) continue;
      const k = byTemplate.get(e.template);
      if (!k) continue; // not a pool claim (a built template, a snapshot restore)
      seenClaims.set(k, (seenClaims.get(k) ?? 0) + 1);
      if (!this.ownIds.has(e.id) && e.namespace !== CANARY_NAMESPACE) countedClaims.set(k, (countedClaims.get(k) ?? 0) + 1);
    }
    for (const [k, pool] of next.pools) {
      const before = prev.pools.get(k);
      let claims = seenClaims.get(k) ?? 0;
      let counted = countedClaims.get(k) ?? 0;
      const open = next.open.get(k) ?? [];
      if (before) {
        let added = pool.warm - before.warm + claims;
        // A drop no entry explains is a claim released before this snapshot, unless the target went down (a trim).
        if (added < 0) {
          if (pool.target >= before.target) {
            claims += -added;
            counted += -added;
          }
          added = 0;
        }
        // A raised target opens deficits too, so that its provisions do not close (and shorten) the claims' ones.
        const raised = Math.max(0, pool.target - before.target);
        for (let i = 0; i < raised; i++) open.push({ at: next.stamp, sample: false });
        for (let i = 0; i < claims; i++) open.push({ at: next.stamp, sample: true });
        for (; added > 0 && open.length > 0; added--) {
          const opened = open.shift()!;
          if (!opened.sample) continue;
          // Claimed and refilled between two reports: all we know is that it took at most the interval.
          this.addRefill(k, opened.at === next.stamp ? next.stamp - prev.stamp : next.stamp - opened.at);
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

  private addClaims(k: string, from: number, to: number, n: number): void {
    const list = this.rates.get(k) ?? [];
    list.push({ from, to, n });
    const horizon = this.clock.now() - RATE_LONG_WINDOW_MS;
    while (list.length > 0 && (list[0]!.to < horizon || list.length > INTERVALS_MAX)) list.shift();
    this.rates.set(k, list);
  }

  private addRefill(k: string, ms: number): void {
    const list = this.refills.get(k) ?? [];
    list.push(Math.max(0, ms));
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

function median(samples: readonly number[]): number | undefined {
  if (samples.length === 0) return undefined;
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
