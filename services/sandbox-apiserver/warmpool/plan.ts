// The warm-pool driver's arithmetic, pure (docs/warmpool.md): resolve each SandboxWarmPool to a pool key through its
// SandboxTemplate, spread its replicas evenly over the eligible nodes, build each node's complete pool set, and split
// the fleet's warm count of a key back over the pools that share it.
import type { ResourceRef } from "#shared/kube/index.ts";
import type { PoolKey } from "#shared/sandboxd/index.ts";
import { ANN_NET } from "../sandboxes/index.ts";
import { PoolKeyError, type PodTemplateLike, poolKeyOf } from "../sandboxes/index.ts";
import { builtTemplateRefusal } from "#shared/built-templates/index.ts";

export const EXTENSIONS_GROUP = "extensions.agents.x-k8s.io";
export const SandboxWarmPools: ResourceRef = { group: EXTENSIONS_GROUP, version: "v1beta1", resource: "sandboxwarmpools", namespaced: true };
export const SandboxTemplates: ResourceRef = { group: EXTENSIONS_GROUP, version: "v1beta1", resource: "sandboxtemplates", namespaced: true };

export interface WarmPool {
  metadata: { name: string; namespace: string; generation?: number; resourceVersion?: string; uid?: string; annotations?: Record<string, string> };
  spec?: { replicas?: number; sandboxTemplateRef?: { name?: string } };
  status?: { replicas?: number; readyReplicas?: number; selector?: string };
}

export interface SandboxTemplate {
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec?: { podTemplate?: PodTemplateLike };
}

/** The sleep fields of a pool-set entry. */
export type SleepFields = Pick<PoolSetEntry, "idle_hibernate_seconds" | "archive_after_seconds" | "archive_delete_after_seconds">;

/** `refused`: the template names another namespace's built template, a step cache entry or a malformed `e2b/` name. */
export type Resolution = { pool: WarmPool; key: PoolKey; replicas: number } | { pool: WarmPool; skipped: string; refused?: boolean };

export const keyString = (k: PoolKey) => `${k.template}\u0000${k.net}\u0000${k.size}`;

/** `spec.replicas`, 1 when unset, negative as 0. */
export function replicasOf(pool: WarmPool): number {
  const r = pool.spec?.replicas;
  if (r === undefined || r === null) return 1;
  return Math.max(0, Math.trunc(r));
}

/** Resolves every pool; `template(ns, name)` answers the template or undefined when it does not exist. */
export function resolvePools(pools: readonly WarmPool[], template: (namespace: string, name: string) => SandboxTemplate | undefined): Resolution[] {
  return pools.map((pool) => {
    const ref = pool.spec?.sandboxTemplateRef?.name;
    if (!ref) return { pool, skipped: "spec.sandboxTemplateRef.name is required" };
    const t = template(pool.metadata.namespace, ref);
    if (!t) return { pool, skipped: `SandboxTemplate ${pool.metadata.namespace}/${ref} not found` };
    try {
      const pt = t.spec?.podTemplate;
      const key = poolKeyOf(pt, [pt?.metadata?.annotations?.[ANN_NET]], `SandboxTemplate ${pool.metadata.namespace}/${ref} spec.podTemplate`);
      if (!key.template) return { pool, skipped: `SandboxTemplate ${pool.metadata.namespace}/${ref} names no container image` };
      // A built template only of the pool's own namespace (shared/built-templates); the template's own namespace
      // is the pool's, since a pool refers to a SandboxTemplate of its namespace only.
      const refused = builtTemplateRefusal(key.template, pool.metadata.namespace);
      if (refused) return { pool, skipped: `SandboxTemplate ${pool.metadata.namespace}/${ref}: ${refused.message}`, refused: true };
      return { pool, key, replicas: replicasOf(pool) };
    } catch (e) {
      if (e instanceof PoolKeyError) return { pool, skipped: e.message };
      throw e;
    }
  });
}

/** `replicas` over `n` nodes in name order: the first `replicas mod n` get one more. */
export function spread(replicas: number, n: number): number[] {
  if (n <= 0) return [];
  const base = Math.floor(replicas / n);
  const extra = replicas % n;
  return Array.from({ length: n }, (_, i) => base + (i < extra ? 1 : 0));
}

export interface PoolSetEntry {
  template: string;
  net: PoolKey["net"];
  size: PoolKey["size"];
  warm: number;
  /** The key's sleep policy (sleep.ts), sent only when set. */
  idle_hibernate_seconds?: number;
  archive_after_seconds?: number;
  archive_delete_after_seconds?: number;
}

/**
 * Per node (index in `nodeCount` name order), the complete pool set: targets summed by key across pools, one entry
 * per desired key including zero targets, sorted by template, net, size; a key with a sleep policy (`sleep`, by
 * keyString: sleep.ts) carries its fields.
 */
export function poolSets(resolutions: readonly Resolution[], nodeCount: number, sleep: ReadonlyMap<string, SleepFields> = new Map()): PoolSetEntry[][] {
  const perNode: Map<string, PoolSetEntry>[] = Array.from({ length: nodeCount }, () => new Map());
  for (const r of resolutions) {
    if (!("key" in r)) continue;
    const share = spread(r.replicas, nodeCount);
    for (let i = 0; i < nodeCount; i++) {
      const k = keyString(r.key);
      const e = perNode[i]!.get(k) ?? { template: r.key.template, net: r.key.net, size: r.key.size, warm: 0, ...sleep.get(k) };
      e.warm += share[i]!;
      perNode[i]!.set(k, e);
    }
  }
  return perNode.map((m) =>
    [...m.values()].sort((a, b) => (a.template !== b.template ? (a.template < b.template ? -1 : 1) : a.net !== b.net ? (a.net < b.net ? -1 : 1) : a.size < b.size ? -1 : a.size > b.size ? 1 : 0)),
  );
}

/**
 * Each pool's share of its key's fleet warm count: in proportion to the pools' targets (floor), leftovers one at a
 * time in pool order; when the key's targets sum to 0 the first pool of the key gets all of it. Skipped pools get 0.
 */
export function statusShares(resolutions: readonly Resolution[], fleetWarm: ReadonlyMap<string, number>): Map<WarmPool, number> {
  const out = new Map<WarmPool, number>();
  const byKey = new Map<string, { pool: WarmPool; replicas: number }[]>();
  for (const r of resolutions) {
    if (!("key" in r)) {
      out.set(r.pool, 0);
      continue;
    }
    const k = keyString(r.key);
    const list = byKey.get(k) ?? [];
    list.push({ pool: r.pool, replicas: r.replicas });
    byKey.set(k, list);
  }
  for (const [k, pools] of byKey) {
    const warm = fleetWarm.get(k) ?? 0;
    const total = pools.reduce((s, p) => s + p.replicas, 0);
    if (total === 0) {
      pools.forEach((p, i) => out.set(p.pool, i === 0 ? warm : 0));
      continue;
    }
    let given = 0;
    const shares = pools.map((p) => {
      const s = Math.floor((warm * p.replicas) / total);
      given += s;
      return s;
    });
    for (let i = 0; given < warm && pools.length > 0; i = (i + 1) % pools.length, given++) shares[i]!++;
    pools.forEach((p, i) => out.set(p.pool, shares[i]!));
  }
  return out;
}

export const selectorOf = (pool: WarmPool) => `agents.x-k8s.io/warm-pool=${pool.metadata.name}`;
