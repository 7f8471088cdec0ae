// Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics (docs/warmpool.md "Leader
// election"): lease 15 s, renew deadline 10 s, retry 2 s. Expiry is judged on this process's clock from when it last
// saw the record change (never by comparing another host's renewTime with our clock), and every write carries the
// resourceVersion it read, so two candidates cannot both win. As client-go's LeaseLock, each change of leadership is
// recorded as a Normal `LeaderElection` Event on the Lease: "<identity> became leader", "<identity> stopped leading".
import type { Logger } from "pino";
import type { Clock } from "#shared/clock/index.ts";
import type { InvolvedObject, KubeClient } from "#shared/kube/index.ts";
import { isConflict, isNotFound } from "#shared/kube/index.ts";
import { Leases } from "#shared/kube/index.ts";

// The chart grants GET/PUT of this one Lease (resourceNames) and admits a create of no other name: rename both with it.
export const LEASE_NAME = "cocoon-warmpool-driver";
export const LEASE_DURATION_MS = 15_000;
export const RENEW_DEADLINE_MS = 10_000;
export const RETRY_PERIOD_MS = 2_000;

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; uid?: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

/** Where leadership changes are recorded (an EventRecorder; it never blocks and only logs a failed write). */
export interface LeaderEvents {
  normal(obj: InvolvedObject, reason: string, message: string): void;
}

export const LEADER_ELECTION_REASON = "LeaderElection";

export interface LeaderElectorOptions {
  client: KubeClient;
  namespace: string;
  identity: string;
  clock: Clock;
  log: Logger;
  name?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  events?: LeaderEvents;
}

/** Microsecond RFC 3339, as MicroTime marshals. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

export class LeaderElector {
  private observed: { key: string; at: number } | undefined;
  /** The Lease as last read or written: the Events' involved object. */
  private lease: Lease["metadata"] | undefined;
  private readonly name: string;
  private readonly leaseMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryMs: number;

  constructor(private readonly o: LeaderElectorOptions) {
    this.name = o.name ?? LEASE_NAME;
    this.leaseMs = o.leaseDurationMs ?? LEASE_DURATION_MS;
    this.renewDeadlineMs = o.renewDeadlineMs ?? RENEW_DEADLINE_MS;
    this.retryMs = o.retryPeriodMs ?? RETRY_PERIOD_MS;
  }

  /**
   * Waits until this process holds the lease, then runs `lead(signal)`; the signal aborts when a renewal has not
   * succeeded for the renew deadline (or `signal` aborts). Resolves when leadership ended.
   */
  async run(signal: AbortSignal, lead: (signal: AbortSignal) => Promise<void>): Promise<void> {
    while (!signal.aborted && !(await this.tryAcquireOrRenew())) await this.o.clock.sleep(this.retryMs, signal);
    if (signal.aborted) return;
    this.o.log.info({ lease: `${this.o.namespace}/${this.name}`, identity: this.o.identity }, "became the warm-pool driver leader");
    this.record("became leader");
    const leading = new AbortController();
    const stopLeading = () => leading.abort();
    signal.addEventListener("abort", stopLeading, { once: true });
    const renewing = (async () => {
      let lastRenew = this.o.clock.monotonic();
      while (!leading.signal.aborted) {
        await this.o.clock.sleep(this.retryMs, leading.signal);
        if (leading.signal.aborted) break;
        if (await this.tryAcquireOrRenew()) {
          lastRenew = this.o.clock.monotonic();
        } else if (this.o.clock.monotonic() - lastRenew >= this.renewDeadlineMs) {
          this.o.log.warn({ lease: `${this.o.namespace}/${this.name}` }, "could not renew the warm-pool driver lease within the renew deadline; stopping the driver");
          leading.abort();
        }
      }
    })();
    try {
      await lead(leading.signal);
    } finally {
      leading.abort();
      signal.removeEventListener("abort", stopLeading);
      await renewing;
      this.record("stopped leading");
    }
  }

  /** client-go's LeaseLock.RecordEvent: a Normal LeaderElection Event on the Lease. */
  private record(what: string): void {
    if (!this.o.events || !this.lease) return;
    this.o.events.normal(
      { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: this.lease },
      LEADER_ELECTION_REASON,
      `${this.o.identity} ${what}`,
    );
  }

  /** One attempt: create the lease, renew ours, or take an expired one. True when we hold it afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const now = this.o.clock.now();
    const mine: LeaseSpec = { holderIdentity: this.o.identity, leaseDurationSeconds: Math.round(this.leaseMs / 1000), renewTime: microTime(now) };
    let lease: Lease;
    try {
      lease = await this.o.client.get<Lease>(Leases, this.name, { namespace: this.o.namespace });
    } catch (e) {
      if (!isNotFound(e)) {
        this.o.log.debug({ err: (e as Error).message }, "reading the leader lease failed");
        return false;
      }
      try {
        const created = await this.o.client.create<Lease>(Leases, {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: { name: this.name, namespace: this.o.namespace },
          spec: { ...mine, acquireTime: microTime(now), leaseTransitions: 0 },
        });
        this.lease = created.metadata;
        this.observe({ ...mine }, now);
        return true;
      } catch (err) {
        this.o.log.debug({ err: (err as Error).message }, "creating the leader lease failed");
        return false;
      }
    }
    const spec = lease.spec ?? {};
    // Seen when the answer arrived, not when this attempt began: a slow read (a loaded apiserver) must not make a
    // renewal that landed meanwhile look older and let us take over before the holder's renew deadline ran out.
    this.observe(spec, this.o.clock.now());
    const held = !!spec.holderIdentity && spec.holderIdentity !== this.o.identity;
    const durationMs = (spec.leaseDurationSeconds ?? this.leaseMs / 1000) * 1000;
    if (held && this.observed!.at + durationMs > now) return false;
    const next: Lease = {
      ...lease,
      spec: {
        ...spec,
        ...mine,
        acquireTime: spec.holderIdentity === this.o.identity && spec.acquireTime ? spec.acquireTime : microTime(now),
        leaseTransitions: (spec.leaseTransitions ?? 0) + (spec.holderIdentity === this.o.identity ? 0 : 1),
      },
    };
    try {
      const updated = await this.o.client.update<Lease>(Leases, next);
      this.lease = updated.metadata;
      this.observe(updated.spec ?? next.spec!, now);
      return true;
    } catch (e) {
      if (!isConflict(e)) this.o.log.debug({ err: (e as Error).message }, "updating the leader lease failed");
      return false;
    }
  }

  /** Gives the lease up on a clean stop, so another replica need not wait out the duration. */
  async release(): Promise<void> {
    try {
      const lease = await this.o.client.get<Lease>(Leases, this.name, { namespace: this.o.namespace });
      if (lease.spec?.holderIdentity !== this.o.identity) return;
      await this.o.client.update(Leases, { ...lease, spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: microTime(this.o.clock.now()) } });
    } catch (e) {
      this.o.log.debug({ err: (e as Error).message }, "releasing the leader lease failed");
    }
  }

  private observe(spec: LeaseSpec, now: number): void {
    const key = `${spec.holderIdentity ?? ""}|${spec.renewTime ?? ""}`;
    if (this.observed?.key !== key) this.observed = { key, at: now };
  }
}

/** POD_NAMESPACE, else the service account's namespace file, else sandbox-system (spec README decision). */
export async function leaseNamespace(env: Record<string, string | undefined>, saNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"): Promise<string> {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE;
  try {
    const ns = (await Bun.file(saNamespaceFile).text()).trim();
    if (ns) return ns;
  } catch {
    // not in a cluster
  }
  return "sandbox-system";
}
