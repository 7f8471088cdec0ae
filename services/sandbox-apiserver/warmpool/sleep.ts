// Pools that sleep (docs/warmpool.md "Sleep"; issue 28 item 2): a SandboxWarmPool (or its SandboxTemplate) asks
// sandboxd to hibernate the pool's idle sandboxes through three annotations in the `sandbox.cocoonstack.io/` family
// the autoscaler uses (the CRD is upstream's, so its settings are annotations):
//   sandbox.cocoonstack.io/idle-hibernate-seconds        -> idle_hibernate_seconds
//   sandbox.cocoonstack.io/archive-after-seconds         -> archive_after_seconds
//   sandbox.cocoonstack.io/archive-delete-after-seconds  -> archive_delete_after_seconds
// Each is read from the pool first, else from its SandboxTemplate (its metadata, then spec.podTemplate.metadata,
// where the net annotation lives). Validated as sandboxd validates a PUT /v1/pools entry (shared/sandboxd's
// PoolEntry: non-negative, archive after > idle, no idle time on an egress pool) plus a bound: a refused setting is
// never sent (sandboxd would answer the node's whole PUT 400); the pool still warms, without sleeping, and says why.
// sandboxd's policy is per pool key, so pools sharing a key must agree: the first pool (namespace/name order) that
// sets one decides for the key; a pool that asks for another gets "not applied" with the reason.
// Pure: the driver applies the result (PUT fields) and writes each pool's `sandbox.cocoonstack.io/sleep-status`.
import { PoolEntry, type PoolKey } from "#shared/sandboxd/index.ts";
import { type Resolution, type SandboxTemplate, type WarmPool, keyString } from "./plan.ts";

export const ANN_IDLE_HIBERNATE = "sandbox.cocoonstack.io/idle-hibernate-seconds";
export const ANN_ARCHIVE_AFTER = "sandbox.cocoonstack.io/archive-after-seconds";
export const ANN_ARCHIVE_DELETE_AFTER = "sandbox.cocoonstack.io/archive-delete-after-seconds";
/** What the pool's sandboxes do when idle, as applied (or why not): the `Sleep` column of `kubectl get`. */
export const ANN_SLEEP_STATUS = "sandbox.cocoonstack.io/sleep-status";

/** A bound on each setting: ten years. sandboxd has none, but an absurd value is a typo, not a policy. */
export const MAX_SLEEP_SECONDS = 315_360_000;

export interface SleepPolicy {
  idle_hibernate_seconds?: number;
  archive_after_seconds?: number;
  archive_delete_after_seconds?: number;
}

const FIELDS = [
  [ANN_IDLE_HIBERNATE, "idle_hibernate_seconds"],
  [ANN_ARCHIVE_AFTER, "archive_after_seconds"],
  [ANN_ARCHIVE_DELETE_AFTER, "archive_delete_after_seconds"],
] as const;

export type SleepRead = { policy: SleepPolicy | undefined } | { refused: string };

/**
 * One pool's requested policy: undefined when neither it nor its template sets any annotation (or all are 0), else
 * the policy or why it is refused.
 */
export function sleepOf(pool: WarmPool, template: SandboxTemplate | undefined, key: PoolKey): SleepRead {
  const sources = [pool.metadata.annotations, template?.metadata.annotations, template?.spec?.podTemplate?.metadata?.annotations];
  const policy: SleepPolicy = {};
  for (const [ann, field] of FIELDS) {
    const raw = sources.find((a) => a?.[ann] !== undefined)?.[ann];
    if (raw === undefined) continue;
    const text = raw.trim();
    if (!/^\d+$/.test(text) || Number(text) > MAX_SLEEP_SECONDS) {
      return { refused: `${ann}: ${JSON.stringify(raw)} is not a whole number of seconds between 0 and ${MAX_SLEEP_SECONDS}` };
    }
    const v = Number(text);
    if (v > 0) policy[field] = v;
  }
  if (Object.keys(policy).length === 0) return { policy: undefined };
  if (key.net === "egress" && policy.idle_hibernate_seconds) {
    return { refused: `${ANN_IDLE_HIBERNATE} is not allowed on an egress pool (net=egress): sandboxd cannot hibernate an egress-lane sandbox` };
  }
  // The node's own rules, so nothing it would refuse is ever sent.
  const r = PoolEntry.safeParse({ ...key, warm: 0, ...policy });
  if (!r.success) return { refused: r.error.issues.map((i) => annotationWords(i.message)).join("; ") };
  return { policy };
}

/** sandboxd's field names in a message, as the annotations a user wrote. */
function annotationWords(message: string): string {
  let out = message;
  for (const [ann, field] of FIELDS) out = out.replaceAll(field, ann);
  return out;
}

export const samePolicy = (a: SleepPolicy, b: SleepPolicy) => FIELDS.every(([, f]) => (a[f] ?? 0) === (b[f] ?? 0));

/** The policy as the `Sleep` column shows it: `hibernate 300s, archive 3600s, delete 86400s`. */
export function describePolicy(p: SleepPolicy): string {
  const parts: string[] = [];
  if (p.idle_hibernate_seconds) parts.push(`hibernate ${p.idle_hibernate_seconds}s`);
  if (p.archive_after_seconds) parts.push(`archive ${p.archive_after_seconds}s`);
  if (p.archive_delete_after_seconds) parts.push(`delete ${p.archive_delete_after_seconds}s`);
  return parts.join(", ");
}

export interface SleepPlan {
  /** Per pool key (keyString): the policy its PUT entry carries. */
  byKey: Map<string, SleepPolicy>;
  /** Per pool: its sleep-status annotation, or null for none (no policy for its key, none asked). */
  status: Map<WarmPool, string | null>;
  /** Per pool: a refusal or conflict to log. */
  problems: Map<WarmPool, string>;
}

/** Every resolved pool's policy, decided per key in pool order (the resolutions arrive sorted by namespace/name). */
export function planSleep(resolutions: readonly Resolution[], template: (namespace: string, name: string) => SandboxTemplate | undefined): SleepPlan {
  const plan: SleepPlan = { byKey: new Map(), status: new Map(), problems: new Map() };
  const decidedBy = new Map<string, string>();
  const reads = new Map<WarmPool, SleepRead>();
  for (const r of resolutions) {
    if (!("key" in r)) continue;
    const ref = r.pool.spec?.sandboxTemplateRef?.name;
    const read = sleepOf(r.pool, ref ? template(r.pool.metadata.namespace, ref) : undefined, r.key);
    reads.set(r.pool, read);
    if (!("policy" in read) || !read.policy) continue;
    const k = keyString(r.key);
    if (!plan.byKey.has(k)) {
      plan.byKey.set(k, read.policy);
      decidedBy.set(k, `${r.pool.metadata.namespace}/${r.pool.metadata.name}`);
    }
  }
  for (const r of resolutions) {
    if (!("key" in r)) {
      plan.status.set(r.pool, null);
      continue;
    }
    const read = reads.get(r.pool)!;
    const k = keyString(r.key);
    const applied = plan.byKey.get(k);
    if ("refused" in read) {
      plan.status.set(r.pool, `refused: ${read.refused}`);
      plan.problems.set(r.pool, read.refused);
    } else if (read.policy && applied && !samePolicy(read.policy, applied)) {
      const why = `the pool key ${r.key.template}/${r.key.net}/${r.key.size} sleeps as ${decidedBy.get(k)} sets it (${describePolicy(applied)}); sandboxd takes one policy per key`;
      plan.status.set(r.pool, `not applied: ${why}`);
      plan.problems.set(r.pool, why);
    } else {
      plan.status.set(r.pool, applied ? describePolicy(applied) : null);
    }
  }
  return plan;
}
