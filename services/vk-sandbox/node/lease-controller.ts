// The Node Lease heartbeat in kube-node-lease (§2.3), the cheap liveness signal the node lifecycle controller
// reads: one PUT every 10 s instead of a status patch.
//
// A round: PUT from the last object the apiserver returned. Without one (first round, or that PUT failed): GET, or
// create when NotFound, retrying GET/create with backoff (100 ms doubling to 7 s) until it works or we stop; then up
// to 5 immediate PUTs, re-reading on a 409. The Lease is never created without its ownerReference to the Node (GC
// then removes it with the Node), and one missing it gains it on the next update.
import type { V1Lease, V1MicroTime, V1OwnerReference } from "@kubernetes/client-node";
import type { KubeClient } from "#shared/kube/index.ts";
import { isConflict, isNotFound } from "#shared/kube/index.ts";
import { Leases } from "#shared/kube/index.ts";
import { type Clock, formatMicroTime, realClock } from "#shared/clock/index.ts";
import { PeriodicLoop } from "#shared/lifecycle/index.ts";
import { errorMessage, type Log } from "#shared/log/index.ts";
import type { NodeRef } from "./node-controller.ts";

export type LeaseKubeClient = Pick<KubeClient, "get" | "create" | "update">;

export const LEASE_NAMESPACE = "kube-node-lease";
export const LEASE_DURATION_SECONDS = 40;
/** The kubelet renews at a quarter of the duration: three renewals can fail before the Node is considered gone. */
export const DEFAULT_RENEW_INTERVAL_MS = (LEASE_DURATION_SECONDS * 1000) / 4;
const MAX_UPDATE_RETRIES = 5;
const BACKOFF_START_MS = 100;
const BACKOFF_CAP_MS = 7_000;

export interface LeaseControllerOptions {
  client: LeaseKubeClient;
  nodeName: string;
  /** The registered Node, for the ownerReference; undefined before registration. */
  nodeRef: () => NodeRef | undefined;
  /** True once the Node was found deleted: renewal stops so the Lease is not re-created for a Node that is gone. */
  nodeGone?: () => boolean;
  log: Log;
  clock?: Clock;
  renewIntervalMs?: number;
}

class Stopped extends Error {}

export class LeaseController {
  private readonly o: Required<Omit<LeaseControllerOptions, "nodeGone">> & { nodeGone: () => boolean };
  private latest: V1Lease | undefined;
  private readonly loop: PeriodicLoop;
  private renewals = 0;

  constructor(opts: LeaseControllerOptions) {
    this.o = {
      ...opts,
      clock: opts.clock ?? realClock,
      renewIntervalMs: opts.renewIntervalMs ?? DEFAULT_RENEW_INTERVAL_MS,
      nodeGone: opts.nodeGone ?? (() => false),
    };
    this.loop = new PeriodicLoop({ name: "node-lease", clock: this.o.clock, intervalMs: this.o.renewIntervalMs, first: "now", tick: () => this.tick() });
  }

  /** Successful renewals (creates included) since start; tests wait on it. */
  get renewCount(): number {
    return this.renewals;
  }

  /** The last Lease object the apiserver returned. */
  get lease(): V1Lease | undefined {
    return this.latest;
  }

  /** Starts renewing now and then every interval. Call after the Node exists. Idempotent. */
  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One renewal round, now and then an interval after the previous; ends the loop once the Node is gone. */
  private async tick(): Promise<boolean> {
    if (this.o.nodeGone()) return true;
    try {
      await this.sync();
    } catch (e) {
      if (e instanceof Stopped) return true;
      this.o.log.warn({ node: this.o.nodeName, err: errorMessage(e) }, "lease renewal failed");
    }
    return false;
  }

  /** One round; exported behaviour for tests through `start()`. */
  private async sync(): Promise<void> {
    if (this.latest) {
      try {
        return this.accept(await this.put(this.latest));
      } catch (e) {
        this.o.log.debug({ node: this.o.nodeName, err: errorMessage(e) }, "lease update from the cached object failed; re-reading");
        this.latest = undefined;
      }
    }
    let { lease, created } = await this.ensureWithBackoff();
    if (created) return this.accept(lease);
    let lastErr: unknown;
    for (let i = 0; i < MAX_UPDATE_RETRIES; i++) {
      try {
        return this.accept(await this.put(lease));
      } catch (e) {
        lastErr = e;
        if (isConflict(e)) ({ lease, created } = await this.ensureWithBackoff());
        if (created) return this.accept(lease);
      }
    }
    throw lastErr;
  }

  private accept(lease: V1Lease): void {
    this.latest = lease;
    this.renewals++;
  }

  private put(base: V1Lease): Promise<V1Lease> {
    return this.o.client.update<V1Lease>(Leases, this.renewed(base), { namespace: LEASE_NAMESPACE });
  }

  /** GET, or create when NotFound; other errors back off 100 ms, doubling to 7 s, until it works or we stop. */
  private async ensureWithBackoff(): Promise<{ lease: V1Lease; created: boolean }> {
    let delay = BACKOFF_START_MS;
    const signal = this.loop.signal;
    for (;;) {
      if (signal.aborted || this.o.nodeGone()) throw new Stopped();
      try {
        return await this.ensure();
      } catch (e) {
        this.o.log.warn({ node: this.o.nodeName, err: errorMessage(e), retryInMs: delay }, "cannot read or create the node lease");
      }
      await this.o.clock.sleep(delay, signal);
      delay = Math.min(delay * 2, BACKOFF_CAP_MS);
    }
  }

  private async ensure(): Promise<{ lease: V1Lease; created: boolean }> {
    try {
      const lease = await this.o.client.get<V1Lease>(Leases, this.o.nodeName, { namespace: LEASE_NAMESPACE });
      return { lease, created: false };
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    if (!this.o.nodeRef()) throw new Error("the Node is not registered yet; a Lease is never created without its owner");
    const fresh: V1Lease = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: this.o.nodeName, namespace: LEASE_NAMESPACE },
      spec: {},
    };
    const lease = await this.o.client.create<V1Lease>(Leases, this.renewed(fresh), { namespace: LEASE_NAMESPACE });
    return { lease, created: true };
  }

  /** A copy of `base` with holder, duration, renewTime = now and the Node ownerReference. */
  private renewed(base: V1Lease): V1Lease {
    const ref = this.o.nodeRef();
    const owners = [...(base.metadata?.ownerReferences ?? [])];
    if (ref && !owners.some((o) => o.kind === "Node" && o.uid === ref.uid)) {
      const owner: V1OwnerReference = { apiVersion: "v1", kind: "Node", name: ref.name, uid: ref.uid };
      owners.push(owner);
    }
    return {
      ...base,
      metadata: { ...base.metadata, ownerReferences: owners.length > 0 ? owners : undefined },
      spec: {
        ...base.spec,
        holderIdentity: this.o.nodeName,
        leaseDurationSeconds: LEASE_DURATION_SECONDS,
        // Sent as a string: V1MicroTime is a Date in the types, but Date.toJSON would drop to milliseconds.
        renewTime: formatMicroTime(this.o.clock.now()) as unknown as V1MicroTime,
      },
    };
  }
}
