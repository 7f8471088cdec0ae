// Where a pool's sleep policy shows (docs/warmpool.md "Sleep"): the pool's `sandbox.cocoonstack.io/sleep-status`
// annotation (the `Sleep` column of `kubectl get sandboxwarmpools`; the upstream CRD's status has no field for it,
// and a metadata change leaves the generation alone, so it does not retrigger the driver), written only when it
// changes; a refusal or conflict is logged once per reason. The policy itself goes to the nodes in the PUT.
import type { Logger } from "pino";
import type { Clock } from "#shared/clock/index.ts";
import type { KubeClient } from "#shared/kube/index.ts";
import type { ApiserverMetrics } from "../serving/index.ts";
import { SandboxWarmPools, type WarmPool } from "./plan.ts";
import { ANN_SLEEP_STATUS, type SleepPlan } from "./sleep.ts";

/** A failed write (RBAC on an older chart, a conflict) is retried after this long, not every pass. */
export const SLEEP_STATUS_RETRY_MS = 30_000;

export interface SleepStatusOptions {
  kube: Pick<KubeClient, "patch">;
  clock: Clock;
  log: Logger;
  metrics?: ApiserverMetrics;
}

export class SleepStatusWriter {
  private readonly warned = new Map<string, string>();
  private readonly failed = new Map<string, number>();

  constructor(private readonly o: SleepStatusOptions) {}

  async publish(plan: SleepPlan): Promise<void> {
    const now = this.o.clock.now();
    for (const [pool, want] of plan.status) {
      const ref = `${pool.metadata.namespace}/${pool.metadata.name}`;
      const problem = plan.problems.get(pool);
      if (problem !== undefined && this.warned.get(ref) !== problem) this.o.log.warn({ pool: ref, reason: problem }, "pool sleep annotations not applied; the pool warms without them");
      if (problem !== undefined) this.warned.set(ref, problem);
      else this.warned.delete(ref);

      const current = pool.metadata.annotations?.[ANN_SLEEP_STATUS] ?? null;
      if (current === want) continue;
      const failedAt = this.failed.get(ref);
      if (failedAt !== undefined && now - failedAt < SLEEP_STATUS_RETRY_MS) continue;
      if (await this.patch(pool, want)) this.failed.delete(ref);
      else this.failed.set(ref, now);
    }
  }

  private async patch(pool: WarmPool, value: string | null): Promise<boolean> {
    try {
      await this.o.kube.patch(SandboxWarmPools, pool.metadata.name, { metadata: { annotations: { [ANN_SLEEP_STATUS]: value } } }, { namespace: pool.metadata.namespace, type: "merge" });
      this.o.metrics?.driverActions.inc({ action: "sleep_status", outcome: "ok" });
      return true;
    } catch (e) {
      this.o.log.debug({ pool: `${pool.metadata.namespace}/${pool.metadata.name}`, err: (e as Error).message }, "sleep-status annotation write failed");
      this.o.metrics?.driverActions.inc({ action: "sleep_status", outcome: "error" });
      return false;
    }
  }
}
