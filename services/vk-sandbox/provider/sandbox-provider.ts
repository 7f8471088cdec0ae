// The sandboxd-backed PodLifecycleProvider: wiring of the verb and loop modules around one state.
//
// Startup (§1.1 step 7), run by `ready`: load the table (fatal if unreadable or malformed), quarantine
// every loaded row, one verification listing (a failure is tolerated: rows stay quarantined), then one
// write, whose failure is fatal: without a writable table every claim would leak on the next restart.
import type { V1Pod, V1PodStatus } from "@kubernetes/client-node";
import type { PodLifecycleProvider } from "../pods/index.ts";
import { ClaimsStateError } from "../claims/index.ts";
import { Core } from "./core.ts";
import { createPod } from "./create.ts";
import { deletePod } from "./delete.ts";
import { updatePod } from "./update.ts";
import { errorMessage } from "#shared/log/index.ts";
import { KeyedMutex } from "./keyed-mutex.ts";
import { leaseWatchTick } from "./lease-watch.ts";
import { orphanAuditTick } from "./orphan-audit.ts";
import { drainReleasing, ownerRecheckTick } from "./owner-recheck.ts";
import { podUID } from "./pod-contract.ts";
import { releaseAbsentPods } from "./absent-pods.ts";
import { podKey } from "#shared/kube/index.ts";
import { Verifier } from "./verifier.ts";
import { ProviderState } from "./state.ts";
import { expiredStatus, pastDeadline, runningStatus } from "./status.ts";
import { realClock } from "#shared/clock/index.ts";
import { PeriodicLoop } from "#shared/lifecycle/index.ts";
import { DEFAULT_INTERVALS, type ProviderIntervals, type SandboxProviderDeps } from "./types.ts";

/** How long a stop may spend on the pending releases (the shutdown step allows 10 s). */
const STOP_DRAIN_MS = 5_000;

export class SandboxProvider implements PodLifecycleProvider {
  readonly core: Core;
  readonly verifier: Verifier;
  readonly intervals: ProviderIntervals;
  private readonly locks = new KeyedMutex();
  private readonly loops: PeriodicLoop[];
  private startup: Promise<void> | undefined;

  /** No side effects: nothing is read, written or listed until `ready` is awaited. */
  constructor(private readonly deps: SandboxProviderDeps) {
    const clock = deps.clock ?? realClock;
    const log = deps.log.child({ component: "provider" });
    this.core = new Core({
      nodeName: deps.nodeName,
      claimer: deps.claimer,
      releaser: deps.releaser,
      lister: deps.lister,
      reader: deps.reader,
      ownerReader: deps.ownerReader,
      clock,
      log,
      st: new ProviderState(deps.store),
      events: deps.events,
    });
    this.verifier = new Verifier(this.core);
    this.intervals = { ...DEFAULT_INTERVALS, ...deps.intervals };
    const i = this.intervals;
    this.loops = [
      new PeriodicLoop({ name: "claim-verification", clock, intervalMs: i.verifyMs, tick: () => this.verifier.tick(), log }),
      new PeriodicLoop({ name: "lease-watch", clock, intervalMs: i.leaseWatchMs, tick: () => leaseWatchTick(this.core), log }),
      new PeriodicLoop({ name: "owner-recheck", clock, intervalMs: i.ownerRecheckMs, tick: () => ownerRecheckTick(this.core), log }),
      new PeriodicLoop({ name: "orphan-scan", clock, intervalMs: i.orphanScanMs, tick: () => orphanAuditTick(this.core, this.verifier), log }),
    ];
  }

  /** Startup; rejects with ClaimsStateError, which main treats as fatal. Idempotent. */
  get ready(): Promise<void> {
    this.startup ??= this.init();
    return this.startup;
  }

  private async init(): Promise<void> {
    const { st, log } = this.core;
    const loaded = await this.deps.store.load(this.core.now());
    for (const [key, c] of loaded.claims) {
      st.claims.set(key, c);
      st.quarantined.add(key);
    }
    st.releasing = loaded.releasing.map((claim) => ({ claim, durable: true }));
    log.info(
      { path: this.deps.store.path, claims: st.claims.size, releasing: st.releasing.length, claimedAtFilled: loaded.claimedAtFilled },
      "claims table loaded; every row quarantined until sandboxd lists it",
    );
    await this.verifier.verifyAtStartup();
    try {
      await st.save();
    } catch (e) {
      if (e instanceof ClaimsStateError) throw e;
      throw new ClaimsStateError("unwritable", this.deps.store.path, errorMessage(e), e);
    }
  }

  /** Start the loops (after `ready`). The verification loop stops itself once nothing is quarantined. */
  start(): void {
    for (const l of this.loops) l.start();
  }

  /**
   * Stops the loops, then tries the pending releases once (bounded): they are releases already authorized, and a
   * swap back to the upstream Go daemon would drop the releasing list it does not know (README, "Migrating").
   * Nothing else is released on shutdown (§1.3).
   */
  async stop(): Promise<void> {
    await Promise.all(this.loops.map((l) => l.stop()));
    if (this.core.st.releasing.length > 0) {
      let timer: { cancel(): void } | undefined;
      const bound = new Promise<void>((resolve) => (timer = realClock.after(STOP_DRAIN_MS, resolve)));
      await Promise.race([drainReleasing(this.core).catch(() => undefined), bound]);
      timer?.cancel();
    }
    await this.core.st.idle();
  }

  // Every verb waits for startup: acting on a table that has not been loaded would claim over live rows.
  async createPod(pod: V1Pod): Promise<void> {
    await this.ready;
    const key = podKey(pod);
    return this.locks.run(key, async () => {
      try {
        await createPod(this.core, this.verifier, pod);
      } catch (e) {
        this.core.st.waiting.set(key, podUID(pod));
        throw e;
      }
      this.core.st.waiting.delete(key);
    });
  }

  async updatePod(pod: V1Pod): Promise<void> {
    await this.ready;
    return this.locks.run(podKey(pod), () => updatePod(this.core, pod, (p) => createPod(this.core, this.verifier, p)));
  }

  async deletePod(pod: V1Pod): Promise<void> {
    await this.ready;
    const key = podKey(pod);
    return this.locks.run(key, async () => {
      try {
        await deletePod(this.core, pod);
      } catch (e) {
        this.core.st.deleteFailed.add(key);
        throw e;
      }
      this.core.st.deleteFailed.delete(key);
    });
  }

  /** Once the pod cache synced: release bare Pods' rows whose Pod was deleted while the daemon was down. */
  async releaseAbsent(inCache: (key: string) => boolean): Promise<void> {
    await this.ready;
    await releaseAbsentPods(this.core, this.locks, inCache);
  }

  getPod(namespace: string, name: string): V1Pod | undefined {
    return this.core.st.pods.get(`${namespace}/${name}`);
  }

  getPods(): V1Pod[] {
    return [...this.core.st.pods.values()];
  }

  /** sandboxd owner_addr of every row this provider holds, by claim id (rows without one are left out). */
  ownAddresses(): Map<string, string> {
    const out = new Map<string, string>();
    for (const c of this.core.st.claims.values()) if (c.address) out.set(c.id, c.address);
    return out;
  }

  getPodStatus(namespace: string, name: string): V1PodStatus | undefined {
    const { st } = this.core;
    const key = `${namespace}/${name}`;
    const pod = st.pods.get(key);
    if (!pod) return undefined;
    const claim = st.claims.get(key);
    if (!claim || !st.settled(key)) return { ...pod.status, phase: "Pending" };
    if (pastDeadline(claim, this.core.now())) return expiredStatus(pod, claim);
    return runningStatus(pod, claim);
  }

  notifyPods(push: (pod: V1Pod) => void): void {
    this.core.setPush(push);
  }

  notifyRetry(retry: (key: string) => void): void {
    this.core.setRetry(retry);
  }

  /** A loop by name, for tests that drive the clock and wait for ticks. */
  loop(name: "claim-verification" | "lease-watch" | "owner-recheck" | "orphan-scan"): PeriodicLoop {
    return this.loops.find((l) => l.name === name)!;
  }

  /** Run one tick of a loop now (tests, and an operator-triggered audit). */
  tick(loop: "verify" | "lease-watch" | "owner-recheck" | "orphan-scan"): Promise<unknown> {
    switch (loop) {
      case "verify":
        return this.verifier.tick();
      case "lease-watch":
        return leaseWatchTick(this.core);
      case "owner-recheck":
        return ownerRecheckTick(this.core);
      case "orphan-scan":
        return orphanAuditTick(this.core, this.verifier);
    }
  }
}

export interface SandboxProviderHandle {
  provider: PodLifecycleProvider;
  /** Startup (load, quarantine, verify, write); rejects with a fatal ClaimsStateError. */
  readonly ready: Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

export function createSandboxProvider(deps: SandboxProviderDeps): SandboxProviderHandle & { impl: SandboxProvider } {
  const impl = new SandboxProvider(deps);
  return {
    provider: impl,
    impl,
    get ready() {
      return impl.ready;
    },
    start: () => impl.start(),
    stop: () => impl.stop(),
  };
}
