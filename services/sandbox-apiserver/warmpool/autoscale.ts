// Pools that size themselves (docs/warmpool.md "Autoscaling"), pure over a DemandMeter and a Clock: per pool whose
// annotations turn it on, target = the queueing rule below over the eligible nodes (0 without claims), clamped to
// the pool's [min, max], raised at once and lowered only when every target of the last stabilization window is
// lower (HPA's scale-down stabilization). A pool without autoscaling keeps spec.replicas (hand-set or an HPA's).
import { z } from "zod";
import type { Clock } from "#shared/clock/index.ts";
import type { DemandMeter } from "#shared/fleet/index.ts";
import type { Resolution, WarmPool } from "./plan.ts";
import { keyString } from "./plan.ts";

/** Operator bounds live in annotations: the SandboxWarmPool CRD is upstream's. */
export const ANN_AUTOSCALE_ENABLED = "sandbox.cocoonstack.io/autoscale-enabled";
export const ANN_AUTOSCALE_MIN = "sandbox.cocoonstack.io/autoscale-min";
export const ANN_AUTOSCALE_MAX = "sandbox.cocoonstack.io/autoscale-max";
/** Written by the driver: its last decision, as JSON (the CRD's status has no field for it). */
export const ANN_AUTOSCALE_STATUS = "sandbox.cocoonstack.io/autoscale-status";

export const AUTOSCALE_DEFAULTS = {
  min: 1,
  max: 64,
  /** On the measured mean (rate and refill estimates err). */
  safety: 1,
  /** Standard normal quantile of the per-node Poisson margin: 2.33 ≈ a node's pool dry ≤ 1 % of the time. */
  z: 2.33,
  headroom: 2,
  /** Refill time assumed until one is measured. */
  defaultRefillMs: 10_000,
  /** Scale-down stabilization window. */
  downWindowMs: 300_000,
} as const;
/** An upper bound on any pool's max: a typo must not ask the fleet for millions of VMs. */
export const AUTOSCALE_MAX_LIMIT = 10_000;

export interface AutoscaleParams {
  safety: number;
  z: number;
  headroom: number;
  defaultRefillMs: number;
  downWindowMs: number;
}

export type Policy = { mode: "manual" } | { mode: "auto"; min: number; max: number } | { mode: "invalid"; reason: string };

const count = z
  .string()
  .regex(/^\d+$/, "want a non-negative integer")
  .transform(Number)
  .refine((n) => n <= AUTOSCALE_MAX_LIMIT, `at most ${AUTOSCALE_MAX_LIMIT}`);
const Annotations = z.object({
  enabled: z.enum(["true", "false"]).optional(),
  min: count.optional(),
  max: count.optional(),
});

/** The pool's policy from its annotations; a bad value turns autoscaling off for it (spec.replicas), with the reason. */
export function policyOf(pool: WarmPool): Policy {
  const a = pool.metadata.annotations ?? {};
  const parsed = Annotations.safeParse({ enabled: a[ANN_AUTOSCALE_ENABLED], min: a[ANN_AUTOSCALE_MIN], max: a[ANN_AUTOSCALE_MAX] });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = { enabled: ANN_AUTOSCALE_ENABLED, min: ANN_AUTOSCALE_MIN, max: ANN_AUTOSCALE_MAX }[String(issue.path[0]) as "enabled" | "min" | "max"];
    return { mode: "invalid", reason: `${name}=${JSON.stringify(a[name])}: ${issue.message}` };
  }
  if (parsed.data.enabled !== "true") return { mode: "manual" };
  const min = parsed.data.min ?? AUTOSCALE_DEFAULTS.min;
  const max = parsed.data.max ?? Math.max(min, AUTOSCALE_DEFAULTS.max);
  if (min > max) return { mode: "invalid", reason: `${ANN_AUTOSCALE_MIN}=${min} is above ${ANN_AUTOSCALE_MAX}=${max}` };
  return { mode: "auto", min, max };
}

/**
 * The queueing rule (docs/warmpool.md "Autoscaling"): the VMs a node is replacing at any moment are Poisson with
 * mean m = rate × refill × safety / nodes (M/G/∞: claims arrive at random, each replacement takes the refill time),
 * and the node's pool is dry exactly when they reach its share of the target. Each node's share is therefore
 * m + z·√m rounded up (the driver splits the target evenly), plus a fleet-wide headroom.
 */
export function demandTarget(claimsPerSecond: number, refillMs: number, p: Pick<AutoscaleParams, "safety" | "z" | "headroom">, nodes = 1): number {
  if (!(claimsPerSecond > 0)) return 0;
  const n = Math.max(1, Math.floor(nodes));
  const m = (claimsPerSecond * (refillMs / 1000) * p.safety) / n;
  return n * Math.ceil(m + p.z * Math.sqrt(m)) + p.headroom;
}

export interface Decision {
  target: number;
  /** The target before stabilization and bounds. */
  demand: number;
  claimsPerSecond: number;
  refillSeconds: number;
  refillMeasured: boolean;
  min: number;
  max: number;
}

/** One pool's stabilization: the bounded targets of the window, newest last. */
interface History {
  samples: { at: number; target: number }[];
}

export class Autoscaler {
  private readonly history = new Map<string, History>();

  constructor(
    private readonly meter: Pick<DemandMeter, "read">,
    private readonly clock: Clock,
    private readonly params: AutoscaleParams = AUTOSCALE_DEFAULTS,
  ) {}

  /**
   * The resolutions with each autoscaled pool's replicas replaced by its decision, and the decisions. Several
   * autoscaled pools of one key: the first (pool order) carries the key's demand, the others hold their minimum.
   * `invalid` lists the pools whose annotations were refused (they keep spec.replicas). `nodes`: how many nodes the
   * target is split over (the per-node margin of the queueing rule).
   */
  plan(resolutions: readonly Resolution[], nodes = 1): { resolutions: Resolution[]; decisions: Map<WarmPool, Decision>; invalid: Map<WarmPool, string> } {
    const now = this.clock.now();
    const decisions = new Map<WarmPool, Decision>();
    const invalid = new Map<WarmPool, string>();
    const carried = new Set<string>();
    const live = new Set<string>();
    const out = resolutions.map((r): Resolution => {
      if (!("key" in r)) return r;
      const policy = policyOf(r.pool);
      if (policy.mode === "invalid") invalid.set(r.pool, policy.reason);
      if (policy.mode !== "auto") return r;
      const id = poolId(r.pool);
      live.add(id);
      const k = keyString(r.key);
      const reading = this.meter.read(r.key);
      const refillMs = reading.refillMs ?? this.params.defaultRefillMs;
      const demand = carried.has(k) ? 0 : demandTarget(reading.claimsPerSecond, refillMs, this.params, nodes);
      carried.add(k);
      const bounded = Math.min(policy.max, Math.max(policy.min, demand));
      const h = this.history.get(id) ?? { samples: seed(r.pool, now, policy) };
      h.samples.push({ at: now, target: bounded });
      while (h.samples.length > 0 && h.samples[0]!.at <= now - this.params.downWindowMs) h.samples.shift();
      this.history.set(id, h);
      // Up at once (the newest sample is in the max); down only once the higher samples left the window. Bounds
      // changed by the operator apply at once both ways.
      const target = Math.min(policy.max, Math.max(policy.min, ...h.samples.map((s) => s.target)));
      decisions.set(r.pool, {
        target,
        demand,
        claimsPerSecond: reading.claimsPerSecond,
        refillSeconds: refillMs / 1000,
        refillMeasured: reading.refillMs !== undefined,
        min: policy.min,
        max: policy.max,
      });
      return { ...r, replicas: target };
    });
    for (const id of [...this.history.keys()]) if (!live.has(id)) this.history.delete(id);
    return { resolutions: out, decisions, invalid };
  }
}

/** The status annotation's value (compact JSON; numbers rounded so an unchanged decision writes nothing). */
export function statusAnnotation(d: Decision): string {
  return JSON.stringify({
    target: d.target,
    demand: d.demand,
    claimsPerSecond: Math.round(d.claimsPerSecond * 100) / 100,
    refillSeconds: Math.round(d.refillSeconds * 10) / 10,
    refillMeasured: d.refillMeasured,
    min: d.min,
    max: d.max,
  });
}

const StatusAnnotation = z.object({ target: z.number().int().nonnegative() }).passthrough();

/**
 * A new leader has no history: the target the previous leader last wrote is taken as a sample of now, so a hand-over
 * under load does not drop the pool to its minimum before the rate is measured again.
 */
function seed(pool: WarmPool, now: number, policy: { min: number; max: number }): { at: number; target: number }[] {
  const raw = pool.metadata.annotations?.[ANN_AUTOSCALE_STATUS];
  if (!raw) return [];
  try {
    const parsed = StatusAnnotation.safeParse(JSON.parse(raw));
    if (!parsed.success) return [];
    return [{ at: now, target: Math.min(policy.max, Math.max(policy.min, parsed.data.target)) }];
  } catch {
    return [];
  }
}

const poolId = (pool: WarmPool) => pool.metadata.uid ?? `${pool.metadata.namespace}/${pool.metadata.name}`;
