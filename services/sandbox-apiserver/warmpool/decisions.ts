// Where the autoscaler's decisions show (docs/warmpool.md "Autoscaling"): /metrics gauges per pool, and the pool's
// `sandbox.cocoonstack.io/autoscale-status` annotation (the upstream CRD's status has no field for it; a metadata
// change leaves the generation alone, so it does not retrigger the driver). An annotation is rewritten at once when
// the target changes and at most every STATUS_REFRESH_MS otherwise, so a drifting rate does not write every pass.
import type { Logger } from "pino";
import type { Clock } from "#shared/clock/index.ts";
import type { KubeClient } from "#shared/kube/index.ts";
import type { ApiserverMetrics } from "../serving/index.ts";
import { ANN_AUTOSCALE_STATUS, type Decision, statusAnnotation } from "./autoscale.ts";
import { SandboxWarmPools, type WarmPool } from "./plan.ts";

export const STATUS_REFRESH_MS = 30_000;

export interface DecisionWriterOptions {
  kube: Pick<KubeClient, "patch">;
  clock: Clock;
  log: Logger;
  metrics?: ApiserverMetrics;
}

export class DecisionWriter {
  /** Per pool: when its annotation was last written, and which invalid-annotation reason was last logged. */
  private readonly written = new Map<string, number>();
  /** Per pool: when a write last failed (refused by RBAC on an older chart, say): retried every STATUS_REFRESH_MS. */
  private readonly failed = new Map<string, number>();
  private readonly warned = new Map<string, string>();

  constructor(private readonly o: DecisionWriterOptions) {}

  async publish(pools: readonly WarmPool[], decisions: ReadonlyMap<WarmPool, Decision>, invalid: ReadonlyMap<WarmPool, string>): Promise<void> {
    const now = this.o.clock.now();
    for (const pool of pools) {
      const ref = `${pool.metadata.namespace}/${pool.metadata.name}`;
      const labels = { namespace: pool.metadata.namespace, pool: pool.metadata.name };
      const reason = invalid.get(pool);
      if (reason !== undefined && this.warned.get(ref) !== reason) {
        this.o.log.warn({ pool: ref, reason }, "autoscaling annotations refused; the pool keeps spec.replicas");
      }
      if (reason !== undefined) this.warned.set(ref, reason);
      else this.warned.delete(ref);

      const d = decisions.get(pool);
      const current = pool.metadata.annotations?.[ANN_AUTOSCALE_STATUS];
      if (!d) {
        for (const g of [this.o.metrics?.autoscaleTarget, this.o.metrics?.claimRate, this.o.metrics?.refillSeconds]) g?.remove(labels);
        // Autoscaling turned off: the stale decision goes, so nobody reads it as current.
        if (current !== undefined) await this.patch(pool, null);
        this.written.delete(ref);
        continue;
      }
      this.o.metrics?.autoscaleTarget.set(labels, d.target);
      this.o.metrics?.claimRate.set(labels, d.claimsPerSecond);
      this.o.metrics?.refillSeconds.set(labels, d.refillSeconds);
      const want = statusAnnotation(d);
      if (want === current) continue;
      const targetChanged = current === undefined || targetOf(current) !== d.target;
      const last = this.written.get(ref);
      if (!targetChanged && last !== undefined && now - last < STATUS_REFRESH_MS) continue;
      const failedAt = this.failed.get(ref);
      if (failedAt !== undefined && now - failedAt < STATUS_REFRESH_MS) continue;
      if (await this.patch(pool, want)) {
        this.written.set(ref, now);
        this.failed.delete(ref);
      } else {
        if (failedAt === undefined) this.o.log.warn({ pool: ref }, "cannot write the autoscale-status annotation (does the chart grant patch sandboxwarmpools?); retrying every 30s");
        this.failed.set(ref, now);
      }
    }
  }

  private async patch(pool: WarmPool, value: string | null): Promise<boolean> {
    try {
      await this.o.kube.patch(SandboxWarmPools, pool.metadata.name, { metadata: { annotations: { [ANN_AUTOSCALE_STATUS]: value } } }, { namespace: pool.metadata.namespace, type: "merge" });
      this.o.metrics?.driverActions.inc({ action: "autoscale_status", outcome: "ok" });
      return true;
    } catch (e) {
      this.o.log.debug({ pool: `${pool.metadata.namespace}/${pool.metadata.name}`, err: (e as Error).message }, "autoscale status annotation write failed");
      this.o.metrics?.driverActions.inc({ action: "autoscale_status", outcome: "error" });
      return false;
    }
  }
}

function targetOf(annotation: string): number | undefined {
  try {
    const v = JSON.parse(annotation) as { target?: unknown };
    return typeof v.target === "number" ? v.target : undefined;
  } catch {
    return undefined;
  }
}
