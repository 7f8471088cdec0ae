// The pod controller (§3): one informer on the Pods bound to this node feeds three queues —
// sync (API → provider), delete (the final grace-0 delete) and status (provider → API). It knows the provider
// only through the PodLifecycleProvider seam and nothing of sandboxd.
//
// Startup order (§1.1 step 11): handlers registered → informer started → cache synced → dangling pass →
// queue workers. Nothing runs before the pod cache syncs.
import type { V1Pod } from "@kubernetes/client-node";
import type { EventRecorder } from "#shared/kube/index.ts";
import { type Clock, realClock } from "#shared/clock/index.ts";
import { backoffDelay, DEFAULT_MAX_ATTEMPTS, type QueueRate, WorkQueue } from "#shared/kube/index.ts";
import type { PodLifecycleProvider } from "./lifecycle-provider.ts";
import type { Log } from "#shared/log/index.ts";
import type { ErrorClassifier, PodSource, PodWriter } from "./dependencies.ts";
import { liveShowsPush, providerFieldsEqual, updateNeedsSync } from "./compare.ts";
import { podKey } from "#shared/kube/index.ts";
import { syncPod, type SyncState } from "./sync.ts";
import { forceDeletePod } from "./force-delete.ts";
import { pushStatus } from "./status.ts";

export interface PodControllerOptions {
  nodeName: string;
  provider: PodLifecycleProvider;
  pods: PodSource;
  api: PodWriter;
  errors: ErrorClassifier;
  events: EventRecorder;
  log: Log;
  /** Workers per queue; virtual-kubelet uses the CPU count. */
  workers: number;
  /** The queues' token bucket from --kube-api-qps/--kube-api-burst, already normalised; undefined = none. */
  rate?: QueueRate;
  clock?: Clock;
  /**
   * True for a provider error that says "cannot tell right now" (sandboxd unreachable, a listing failed) rather
   * than "this Pod cannot be served". Such an error never moves a Pod holding a claim to Pending or Failed, and
   * never makes a restartPolicy-Never Pod terminal (docs/decisions.md#outage-never-moves-a-pod).
   */
  isTransient?: (err: unknown) => boolean;
  /**
   * True for a failure caused by sandboxd being unreachable or failing (transport error, 5xx, a transient
   * provider error). Such a sync is never dropped after the attempt cap: an outage, however long, must not
   * strand a Pod or a release. Its retries are spaced at most OUTAGE_RETRY_MAX_MS apart.
   */
  isOutage?: (err: unknown) => boolean;
  /**
   * Called as a key's handler starts with how long it waited since it was queued (plain and immediate enqueues;
   * a deliberate delay such as a grace period is not waiting). The daemon's queue-wait histogram (metrics.ts).
   */
  onQueueWait?: (queue: string, waitedMs: number) => void;
  /**
   * Called once per Pod when its first Running status write lands, with the ms since the informer first delivered
   * it: the whole path a user waits for (the daemon's pod-running histogram, metrics.ts).
   */
  onPodRunning?: (ms: number) => void;
  /** How long a status push waits for its key to appear in the cache (virtual-kubelet: ~3 s in 151 ms polls). */
  notifyWaitMs?: number;
  notifyPollMs?: number;
}

/** The longest wait between retries of a sync that failed because sandboxd was down (never dropped). */
export const OUTAGE_RETRY_MAX_MS = 30_000;

export class PodController {
  private readonly o: PodControllerOptions;
  private readonly clock: Clock;
  readonly syncQueue: WorkQueue;
  readonly deleteQueue: WorkQueue;
  readonly statusQueue: WorkQueue;
  /** Keys the informer has delivered and not yet deleted; a status push waits for its key to be here. */
  private readonly known = new Set<string>();
  private readonly state: SyncState = { lastHandled: new Map(), deleted: new Map() };
  /** The last pushed object per key, and the keys whose latest push was dropped as a duplicate. */
  private readonly pushed = new Map<string, V1Pod>();
  private readonly skippedDuplicate = new Set<string>();
  /** `<key>/<uid>` whose final delete was answered, until the watch reports the Pod gone (force-delete.ts). */
  private readonly finalDeletes = new Set<string>();
  private started = false;
  private stopping = false;
  /** `<queue>\0<key>` -> when it was first queued since its last run (queue-wait measurement). */
  private readonly queuedAt = new Map<string, number>();
  /** When the informer first delivered each Pod not yet written Running (pod-running measurement). */
  private readonly firstSeen = new Map<string, number>();
  /**
   * The sync handler's events. A Normal event of a Pod whose status write is pending goes out once that write has
   * landed (or given up): sent together, the event's POST and the status PUT compete at the apiserver, and the
   * status is what a user waits for while the event is a record (docs/performance.md, "The single-Pod path").
   * Warnings are not held back.
   */
  private readonly syncEvents: Pick<EventRecorder, "normal" | "warning"> = {
    normal: (pod, reason, message) => {
      const key = podKey(pod);
      if (!this.statusQueue.has(key)) return this.o.events.normal(pod, reason, message);
      void this.statusQueue.whenSettled(key).then(() => this.o.events.normal(pod, reason, message));
    },
    warning: (pod, reason, message) => this.o.events.warning(pod, reason, message),
  };
  private resolveReady!: () => void;
  /** Resolves once the cache synced, the dangling pass ran and the workers started. */
  readonly ready: Promise<void> = new Promise((r) => (this.resolveReady = r));

  constructor(o: PodControllerOptions) {
    this.o = o;
    this.clock = o.clock ?? realClock;
    const common = { workers: o.workers, clock: this.clock, log: o.log };
    const isOutage = o.isOutage ?? (() => false);
    this.syncQueue = new WorkQueue({
      ...common,
      name: "sync",
      rate: o.rate,
      handler: (k) => (this.waited("sync", k), this.handleSync(k)),
      retryPolicy: (_key, err, failures) => {
        if (isOutage(err)) return Math.min(backoffDelay(failures), OUTAGE_RETRY_MAX_MS);
        return failures >= DEFAULT_MAX_ATTEMPTS ? undefined : backoffDelay(failures);
      },
    });
    this.deleteQueue = new WorkQueue({ ...common, name: "delete", rate: o.rate, handler: (k) => (this.waited("delete", k), this.handleForceDelete(k)) });
    this.statusQueue = new WorkQueue({ ...common, name: "status", rate: o.rate, handler: (k) => (this.waited("status", k), this.handleStatus(k)) });
  }

  async start(): Promise<void> {
    if (this.started) return this.ready;
    this.started = true;
    const { pods, provider } = this.o;
    pods.onAdd((pod) => this.onAdd(pod));
    pods.onUpdate((oldPod, newPod) => this.onUpdate(oldPod, newPod));
    pods.onDelete((pod) => this.onDelete(pod));
    provider.notifyPods((pod) => this.onProviderPush(pod));
    // A provider's "try this key now" skips both the backoff and the bucket: it is rare and it ends a wait.
    provider.notifyRetry?.((key) => this.queue(this.syncQueue, key, true));
    await pods.startAndSync();
    await this.danglingPass();
    this.syncQueue.start();
    this.deleteQueue.start();
    this.statusQueue.start();
    this.resolveReady();
  }

  /** Stops dispatching and waits for running handlers. Nothing is released (§1.3). */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all([this.syncQueue.stop(), this.deleteQueue.stop(), this.statusQueue.stop()]);
  }

  /** Resolves when all three queues are empty (tests and the bench). */
  async idle(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      await Promise.all([this.syncQueue.idle(), this.deleteQueue.idle(), this.statusQueue.idle()]);
    }
  }

  private onAdd(pod: V1Pod): void {
    const key = podKey(pod);
    this.known.add(key);
    this.state.deleted.delete(key);
    if (this.o.onPodRunning && !this.firstSeen.has(key)) this.firstSeen.set(key, this.clock.now());
    this.queue(this.syncQueue, key);
  }

  private onUpdate(oldPod: V1Pod, newPod: V1Pod): void {
    const key = podKey(newPod);
    this.known.add(key);
    if (updateNeedsSync(oldPod, newPod) && !this.providerHolds(newPod)) this.queue(this.syncQueue, key);
    // The provider is the only writer of pod status: if someone else changed what our dropped-as-duplicate
    // push would have written, write it again.
    const last = this.pushed.get(key);
    if (last && this.skippedDuplicate.has(key) && !liveShowsPush(last, newPod)) {
      this.skippedDuplicate.delete(key);
      this.queue(this.statusQueue, key);
    }
  }

  /**
   * True when the provider's own copy of this Pod already shows every field the update filter compares (same UID,
   * not being deleted). That is the echo of our own status write: the claim-id annotation the provider pushed
   * comes back through the watch as an annotation change. Its sync would find nothing to do, but queueing it
   * spends a sync-queue token, so under a steady stream of new Pods each cost two and the queue admitted half of
   * --kube-api-qps (docs/performance.md, Throughput).
   */
  private providerHolds(pod: V1Pod): boolean {
    if (pod.metadata?.deletionTimestamp) return false;
    const held = this.o.provider.getPod(pod.metadata?.namespace ?? "", pod.metadata?.name ?? "");
    return held !== undefined && held.metadata?.uid === pod.metadata?.uid && providerFieldsEqual(held, pod);
  }

  private onDelete(pod: V1Pod): void {
    const key = podKey(pod);
    this.known.delete(key);
    this.firstSeen.delete(key);
    // The last object seen, for the sync that decides about a claim the provider holds without a stored Pod
    // (a row loaded at startup and still quarantined when the Pod went).
    this.state.deleted.set(key, pod);
    this.pushed.delete(key);
    this.skippedDuplicate.delete(key);
    this.queue(this.syncQueue, key);
    if (pod.metadata?.uid) {
      this.deleteQueue.remove(`${key}/${pod.metadata.uid}`);
      this.finalDeletes.delete(`${key}/${pod.metadata.uid}`);
    }
  }

  /**
   * NotifyPods: never blocks the provider; waits up to ~3 s for the informer to know the key. The pushed object is
   * kept as it is, not copied: the provider gives it away (lifecycle-provider.ts), and a deep copy per push was
   * 0.17 ms on the single-Pod path at load 5 (docs/performance.md).
   */
  private onProviderPush(pod: V1Pod): void {
    const key = podKey(pod);
    if (this.known.has(key)) {
      this.acceptPush(key, pod);
      return;
    }
    const waitMs = this.o.notifyWaitMs ?? 3000;
    const pollMs = this.o.notifyPollMs ?? 151;
    const started = this.clock.monotonic();
    const poll = () => {
      if (this.stopping) return;
      if (this.known.has(key)) this.acceptPush(key, pod);
      else if (this.clock.monotonic() - started < waitMs) this.clock.after(pollMs, poll);
      else this.o.log.debug({ pod: key }, "status push dropped: pod never appeared in the cache");
    };
    this.clock.after(pollMs, poll);
  }

  private acceptPush(key: string, pod: V1Pod): void {
    const prev = this.pushed.get(key);
    if (prev && Bun.deepEquals(prev, pod)) {
      this.skippedDuplicate.add(key);
      return;
    }
    this.pushed.set(key, pod);
    this.skippedDuplicate.delete(key);
    this.queue(this.statusQueue, key);
  }

  /** Enqueue, remembering when the key started waiting (the first enqueue since its last run counts). */
  private queue(q: WorkQueue, key: string, now = false): void {
    if (this.o.onQueueWait) {
      const mark = `${q.name}\0${key}`;
      if (!this.queuedAt.has(mark)) this.queuedAt.set(mark, this.clock.now());
    }
    if (now) q.enqueueNow(key);
    else q.enqueue(key);
  }

  private waited(queue: string, key: string): void {
    const mark = `${queue}\0${key}`;
    const at = this.queuedAt.get(mark);
    if (at === undefined) return;
    this.queuedAt.delete(mark);
    this.o.onQueueWait?.(queue, this.clock.now() - at);
  }

  private handleSync(key: string): Promise<void> {
    return syncPod(key, {
      provider: this.o.provider,
      pods: this.o.pods,
      api: this.o.api,
      events: this.syncEvents,
      log: this.o.log,
      isTransient: this.o.isTransient ?? defaultIsTransient,
      state: this.state,
      forceDeleteNow: (k) => this.queue(this.deleteQueue, k, true),
      forceDeleteAfter: (k, ms) => this.deleteQueue.enqueueAfter(k, ms),
    });
  }

  private handleForceDelete(key: string): Promise<void> {
    return forceDeletePod(key, { pods: this.o.pods, api: this.o.api, errors: this.o.errors, log: this.o.log, done: this.finalDeletes });
  }

  private async handleStatus(key: string): Promise<void> {
    const wrote = await pushStatus(key, { pods: this.o.pods, api: this.o.api, errors: this.o.errors, pushed: this.pushed });
    if (!wrote || this.pushed.get(key)?.status?.phase !== "Running") return;
    const seen = this.firstSeen.get(key);
    if (seen === undefined) return;
    this.firstSeen.delete(key);
    this.o.onPodRunning?.(this.clock.now() - seen);
  }

  /**
   * §3.6: pods the provider holds but the cache lacks (deleted while we were down) get DeletePod, best effort;
   * then the provider's own rows whose Pod the cache lacks (releaseAbsent).
   */
  private async danglingPass(): Promise<void> {
    for (const pod of this.o.provider.getPods()) {
      const key = podKey(pod);
      if (this.o.pods.get(key)) continue;
      try {
        await this.o.provider.deletePod(pod);
      } catch (err) {
        this.o.log.warn({ pod: key, err: String(err) }, "dangling pod delete failed");
      }
    }
    // The provider's table starts empty, so rows for Pods deleted while the daemon was down are handed over here,
    // judged against this synced cache (docs/scenarios.md, "Pods deleted while the daemon was down").
    try {
      await this.o.provider.releaseAbsent?.((key) => this.o.pods.get(key) !== undefined);
    } catch (err) {
      this.o.log.warn({ err: String(err) }, "release of rows for pods deleted while down failed");
    }
  }
}

/** Fallback classifier when wire supplies none: an error that declares itself transient (ProviderError does). */
export function defaultIsTransient(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { transient?: unknown }).transient === true;
}
