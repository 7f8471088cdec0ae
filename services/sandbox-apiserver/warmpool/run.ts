// The driver's life cycle (docs/warmpool.md "Resilience"): wait for the Lease, drive while leading, and when the
// driver stops (typically a lease that could not be renewed during a control-plane outage) wait 5 s, build a fresh
// driver and enter the election again. The process keeps serving the API throughout; only the driver pauses.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Env } from "#shared/config/index.ts";
import { EventRecorder, isNotFound, kubeEventSink } from "#shared/kube/index.ts";
import { type DriverOptions, WarmPoolDriver } from "./driver.ts";
import { LeaderElector, leaseNamespace } from "./leader.ts";

export const REBUILD_DELAY_MS = 5_000;

export interface WarmPoolDriverOptions extends DriverOptions {
  /** Where the Lease namespace comes from (POD_NAMESPACE). */
  env: Env;
}

export interface WarmPoolDriverHandle {
  identity: string;
  isLeader(): boolean;
  /** The driver of the current leadership term, if any (tests read its pass count). */
  current(): WarmPoolDriver | undefined;
  stop(): Promise<void>;
}

export function startWarmPoolDriver(o: WarmPoolDriverOptions): WarmPoolDriverHandle {
  const identity = `${hostname()}_${randomUUID()}`;
  const stop = new AbortController();
  // LeaderElection Events on the Lease (docs/warmpool.md "Leader election"); RBAC: events create, patch.
  const events = new EventRecorder({
    sink: kubeEventSink(o.kube),
    component: "sandbox-apiserver",
    host: hostname(),
    clock: o.clock,
    isNotFound,
    log: o.log.child({ component: "events" }),
  });
  let leading = false;
  let driver: WarmPoolDriver | undefined;
  let elector: LeaderElector | undefined;
  const loop = (async () => {
    const namespace = await leaseNamespace(o.env);
    while (!stop.signal.aborted) {
      elector = new LeaderElector({ client: o.kube, namespace, identity, clock: o.clock, log: o.log, events });
      try {
        await elector.run(stop.signal, async (signal) => {
          leading = true;
          o.metrics?.driverLeader.set(1);
          driver = new WarmPoolDriver({ ...o, events });
          try {
            await driver.run(signal);
          } finally {
            leading = false;
            o.metrics?.driverLeader.set(0);
          }
        });
      } catch (e) {
        o.log.error({ err: (e as Error).message }, "warm-pool driver failed");
      }
      driver = undefined;
      if (stop.signal.aborted) break;
      o.log.warn({ rebuildInMs: REBUILD_DELAY_MS }, "warm-pool driver stopped; rebuilding it and re-entering leader election");
      await o.clock.sleep(REBUILD_DELAY_MS, stop.signal);
    }
  })();
  return {
    identity,
    isLeader: () => leading,
    current: () => driver,
    stop: async () => {
      const wasLeading = leading;
      stop.abort();
      await loop;
      if (wasLeading) await elector?.release();
      // "stopped leading" is on its way: written before the process exits.
      await events.close();
    },
  };
}
