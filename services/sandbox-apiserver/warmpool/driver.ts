// The warm-pool driver (docs/warmpool.md): SandboxWarmPool + SandboxTemplate → per-node pool targets. One global
// work item, triggered by pool create/delete/generation changes, template changes, every NodeInventory event, and a
// requeue --warm-pool-sync-interval after each pass. A pass PUTs every eligible node (fresh, with an address) its
// complete pool set — sandboxd replaces the whole set, so keys nobody wants are drained — and writes each pool's
// status from the warm counts the nodes reported. With an empty sandboxd token it is fail-closed: no PUT at all.
import type { Logger } from "pino";
import type { Clock } from "#shared/clock/index.ts";
import type { DemandMeter, InventoryFleet, InventoryRecord } from "#shared/fleet/index.ts";
import type { EventType, InvolvedObject, KubeClient } from "#shared/kube/index.ts";
import { Informer } from "#shared/kube/index.ts";
import type { ApiserverMetrics } from "../serving/index.ts";
import { type NodeClients, mapBounded } from "../sandboxes/index.ts";
import { NODE_FANOUT } from "../sandboxes/index.ts";
import { type Resolution, type SandboxTemplate, SandboxTemplates, SandboxWarmPools, type WarmPool, keyString, poolSets, resolvePools, selectorOf, statusShares } from "./plan.ts";
import { type AutoscaleParams, Autoscaler } from "./autoscale.ts";
import { DecisionWriter } from "./decisions.ts";
import { planSleep } from "./sleep.ts";
import { SleepStatusWriter } from "./sleep-status.ts";

export { EXTENSIONS_GROUP, SandboxTemplates, SandboxWarmPools } from "./plan.ts";

export interface DriverOptions {
  kube: KubeClient;
  fleet: Pick<InventoryFleet, "fresh" | "onChange">;
  clients: NodeClients;
  token: string;
  syncIntervalMs: number;
  clock: Clock;
  log: Logger;
  metrics?: ApiserverMetrics;
  /** The process's demand measurements; without it no pool autoscales (spec.replicas everywhere). */
  demand?: Pick<DemandMeter, "read">;
  autoscale?: AutoscaleParams;
  /** Where a pool that is not served says why (a Warning Event on the SandboxWarmPool: `kubectl describe`). */
  events?: { record(obj: InvolvedObject, type: EventType, reason: string, message: string): void };
}

/** The Event reasons of a pool the driver does not serve. */
export const REASON_TEMPLATE_REFUSED = "TemplateRefused";
export const REASON_TEMPLATE_UNRESOLVED = "TemplateUnresolved";

const MAX_BACKOFF_MS = 30_000;

export class WarmPoolDriver {
  private wake: (() => void) | undefined;
  private dirty = true;
  private warnedNoToken = false;
  /** Passes completed (tests wait on it). */
  passes = 0;
  private readonly autoscaler: Autoscaler | undefined;
  private readonly decisions: DecisionWriter;
  private readonly sleepStatus: SleepStatusWriter;
  /** Per pool (`<ns>/<name>`): why it was last skipped, so its Event and log line come once per new reason. */
  private readonly skipped = new Map<string, string>();
  /** Per node: the pool set last PUT, so a change of it is logged once (what each node was asked to keep warm). */
  private readonly lastSet = new Map<string, string>();

  constructor(private readonly o: DriverOptions) {
    this.autoscaler = o.demand ? new Autoscaler(o.demand, o.clock, o.autoscale) : undefined;
    this.decisions = new DecisionWriter({ kube: o.kube, clock: o.clock, log: o.log, ...(o.metrics ? { metrics: o.metrics } : {}) });
    this.sleepStatus = new SleepStatusWriter({ kube: o.kube, clock: o.clock, log: o.log, ...(o.metrics ? { metrics: o.metrics } : {}) });
  }

  /** Runs until `signal` aborts: informers, triggers, the reconcile loop. */
  async run(signal: AbortSignal): Promise<void> {
    const pools = new Informer<WarmPool>(this.o.kube, SandboxWarmPools, { log: this.o.log });
    const templates = new Informer<SandboxTemplate>(this.o.kube, SandboxTemplates, { log: this.o.log });
    const trigger = () => {
      this.dirty = true;
      this.wake?.();
    };
    pools.onAdd(trigger);
    pools.onDelete(trigger);
    // Status writes (ours included) leave the generation alone, so they do not retrigger the loop.
    pools.onUpdate((a, b) => {
      if (a.metadata.generation !== b.metadata.generation) trigger();
    });
    templates.onAdd(trigger);
    templates.onUpdate(trigger);
    templates.onDelete(trigger);
    const unsubscribe = this.o.fleet.onChange(trigger);
    const onAbort = () => this.wake?.();
    signal.addEventListener("abort", onAbort, { once: true });
    pools.start();
    templates.start();
    try {
      await Promise.race([Promise.all([pools.synced, templates.synced]), new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }))]);
      let failures = 0;
      while (!signal.aborted) {
        if (!this.dirty) {
          let timer: { cancel(): void } | undefined;
          await new Promise<void>((resolve) => {
            this.wake = resolve;
            timer = this.o.clock.after(failures > 0 ? Math.min(MAX_BACKOFF_MS, 500 * 2 ** failures) : this.o.syncIntervalMs, resolve);
          });
          timer?.cancel();
          this.wake = undefined;
          if (signal.aborted) break;
        }
        this.dirty = false;
        try {
          await this.reconcile(pools.list(), (ns, name) => templates.get(`${ns}/${name}`), signal);
          failures = 0;
        } catch (e) {
          failures++;
          this.o.log.error({ err: (e as Error).message }, "warm-pool reconcile failed; retrying with backoff");
        }
        this.passes++;
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      unsubscribe();
      await Promise.all([pools.stop(), templates.stop()]);
    }
  }

  private logSetChange(node: string, pools: readonly { template: string; net: string; size: string; warm: number }[], eligible: number): void {
    const set = pools.map((p) => `${p.template}/${p.net}/${p.size}=${p.warm}`).join(", ");
    if (this.lastSet.get(node) === set) return;
    this.lastSet.set(node, set);
    if (this.lastSet.size > 4 * Math.max(eligible, 1024)) this.lastSet.clear(); // nodes that left: bounded
    this.o.log.info({ node, pools: set || "(none)", eligibleNodes: eligible }, "warm-pool driver changed the node's pool set");
  }

  async reconcile(poolList: readonly WarmPool[], template: (ns: string, name: string) => SandboxTemplate | undefined, signal?: AbortSignal): Promise<void> {
    const pools = [...poolList].sort((a, b) => {
      const ka = `${a.metadata.namespace}/${a.metadata.name}`;
      const kb = `${b.metadata.namespace}/${b.metadata.name}`;
      return ka < kb ? -1 : ka > kb ? 1 : 0;
    });
    const resolved = resolvePools(pools, template);
    this.reportSkipped(resolved);
    // Autoscaled pools' replicas are the autoscaler's targets from here on (docs/warmpool.md "Autoscaling").
    const nodes = this.o.fleet.fresh().filter((n) => n.address);
    const planned = this.autoscaler?.plan(resolved, nodes.length);
    const resolutions = planned?.resolutions ?? resolved;
    // Pools that sleep (sleep.ts): one policy per key, never one sandboxd would refuse.
    const sleep = planSleep(resolutions, template);
    const sets = poolSets(resolutions, nodes.length, sleep.byKey);
    const warm = new Map<string, Map<string, number>>(nodes.map((n) => [n.name, inventoryWarm(n)]));

    if (!this.o.token) {
      if (!this.warnedNoToken) this.o.log.warn("warm-pool driver has no sandboxd token; skipping pool apply (fail-closed)");
      this.warnedNoToken = true;
    } else {
      await mapBounded(nodes, NODE_FANOUT, async (node) => {
        const i = nodes.indexOf(node);
        const body = { pools: sets[i]! };
        try {
          const info = await this.o.clients.for(node.address).putPools(body, signal ? { signal } : {});
          this.logSetChange(node.name, body.pools, nodes.length);
          // The node's answer replaces its inventory counts for this pass; a key it does not report has 0 warm.
          warm.set(node.name, new Map(info.pools.map((p) => [keyString(p.key), p.warm])));
          this.o.metrics?.driverActions.inc({ action: "put_pools", outcome: "ok" });
        } catch (e) {
          this.o.log.warn({ node: node.name, err: (e as Error).message }, "pool-set PUT failed; keeping the node's inventory warm counts");
          this.o.metrics?.driverActions.inc({ action: "put_pools", outcome: "error" });
        }
      });
    }

    const fleetWarm = new Map<string, number>();
    for (const m of warm.values()) for (const [k, v] of m) fleetWarm.set(k, (fleetWarm.get(k) ?? 0) + v);
    const shares = statusShares(resolutions, fleetWarm);
    for (const r of resolutions) {
      const pool = r.pool;
      const share = shares.get(pool) ?? 0;
      const labels = { namespace: pool.metadata.namespace, pool: pool.metadata.name };
      this.o.metrics?.desiredReplicas.set(labels, "replicas" in r ? r.replicas : 0);
      this.o.metrics?.readyReplicas.set(labels, share);
      const want = { replicas: share, readyReplicas: share, selector: selectorOf(pool) };
      const s = pool.status ?? {};
      if (s.replicas === want.replicas && s.readyReplicas === want.readyReplicas && s.selector === want.selector) continue;
      try {
        await this.o.kube.update(SandboxWarmPools, { ...pool, status: { ...s, ...want } }, { subresource: "status" });
        this.o.metrics?.driverActions.inc({ action: "status_update", outcome: "ok" });
      } catch (e) {
        // A conflict or error waits for the next pass.
        this.o.log.debug({ pool: `${pool.metadata.namespace}/${pool.metadata.name}`, err: (e as Error).message }, "pool status update failed");
        this.o.metrics?.driverActions.inc({ action: "status_update", outcome: "error" });
      }
    }
    if (planned) await this.decisions.publish(resolutions.map((r) => r.pool), planned.decisions, planned.invalid);
    await this.sleepStatus.publish(sleep);
  }

  /** A skipped pool's reason, logged and recorded as a Warning Event on the pool once per new reason. */
  private reportSkipped(resolved: readonly Resolution[]): void {
    const seen = new Set<string>();
    for (const r of resolved) {
      const ref = `${r.pool.metadata.namespace}/${r.pool.metadata.name}`;
      seen.add(ref);
      if (!("skipped" in r)) {
        this.skipped.delete(ref);
        continue;
      }
      if (this.skipped.get(ref) === r.skipped) continue;
      this.skipped.set(ref, r.skipped);
      this.o.log.error({ pool: ref }, r.skipped);
      const { name, namespace, uid, resourceVersion } = r.pool.metadata;
      this.o.events?.record(
        { apiVersion: `${SandboxWarmPools.group}/${SandboxWarmPools.version}`, kind: "SandboxWarmPool", metadata: { name, namespace, ...(uid ? { uid } : {}), ...(resourceVersion ? { resourceVersion } : {}) } },
        "Warning",
        r.refused ? REASON_TEMPLATE_REFUSED : REASON_TEMPLATE_UNRESOLVED,
        `pool not served: ${r.skipped}`,
      );
    }
    for (const ref of this.skipped.keys()) if (!seen.has(ref)) this.skipped.delete(ref);
  }
}

function inventoryWarm(n: InventoryRecord): Map<string, number> {
  const m = new Map<string, number>();
  for (const p of n.inventory.pools ?? []) {
    const k = keyString({ template: p.template, net: (p.net || "none") as "none", size: (p.size || "small") as "small" });
    m.set(k, (m.get(k) ?? 0) + p.warm);
  }
  return m;
}
