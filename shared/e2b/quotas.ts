// Per-namespace quotas of the e2b surface (docs/e2b.md "Quotas"): how many sandboxes a namespace holds (running or
// paused: a paused claim still takes its node's claim cap) and how many it starts per second (creates, fork
// children, snapshot restores, resumes); how many snapshots it keeps (full-VM checkpoints, which outlive their
// sandbox) and how many it takes per second. Checked before any claim or checkpoint; over any is 429 with the e2b
// error body and Retry-After. Counts are per replica: the fleet view of the namespace, plus this replica's claims the
// view does not list yet, plus the starts in flight; snapshots are counted from the nodes' live checkpoint lists, plus
// this replica's checkpoints in flight or finished after that count was read.
import { type Clock, realClock } from "../clock/index.ts";
import { TokenBucket } from "../kube/index.ts";
import { Counter, Gauge, Registry } from "../metrics/index.ts";
import { E2bError } from "./errors.ts";
import type { QuotaLimits } from "./keys.ts";

/** Retry-After of a refusal by count: a slot frees only when a sandbox of the namespace ends. */
export const COUNT_RETRY_AFTER_S = 5;
/** How long a finished checkpoint of this replica is added to counts read before it finished (a fan-out's length). */
const RECENT_SNAPSHOT_MS = 60_000;

export type StartKind = "create" | "fork" | "resume";

export interface QuotaOptions {
  /** Namespaces whose key-file lines set limits; a field they leave out takes the default. */
  limits: ReadonlyMap<string, Partial<QuotaLimits>>;
  defaults: QuotaLimits;
  /** Namespaces to report on /metrics from the start (every namespace a key names). */
  namespaces: Iterable<string>;
  /** Sandboxes the namespace holds now (fleet view plus unlisted claims of this replica). */
  live: (namespace: string) => number;
  clock?: Clock;
  /** The registry the series join (sandbox-apiserver's own); default: one of their own. */
  registry?: Registry;
}

export class NamespaceQuotas {
  readonly registry: Registry;
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly snapshotBuckets = new Map<string, TokenBucket>();
  private readonly inFlight = new Map<string, number>();
  /**
   * Per namespace: checkpoints this replica is taking, and when its recent ones finished. Kept (never deleted: a
   * caller may hold the entry across its count's await); namespaces come from the key file, so it is as bounded as
   * the keys.
   */
  private readonly snapshotsTaking = new Map<string, { running: number; finished: number[] }>();
  private readonly known: Set<string>;
  private readonly clock: Clock;
  private readonly rejected: Counter<"namespace" | "quota">;
  private readonly started: Counter<"namespace" | "kind">;
  private readonly startedChildren = new Map<string, ReturnType<Counter<"namespace" | "kind">["labels"]>>();

  constructor(private readonly o: QuotaOptions) {
    this.clock = o.clock ?? realClock;
    this.registry = o.registry ?? new Registry();
    this.known = new Set(o.namespaces);
    const self = this;
    new Gauge({
      name: "e2b_namespace_sandboxes",
      help: "Sandboxes a namespace holds through the e2b surface, as this replica counts them for its quota.",
      labelNames: ["namespace"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const ns of self.known) this.set({ namespace: ns }, self.o.live(ns) + (self.inFlight.get(ns) ?? 0));
      },
    });
    new Gauge({
      name: "e2b_namespace_quota_max_sandboxes",
      help: "The namespace's max-sandboxes quota (0: no limit).",
      labelNames: ["namespace"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const ns of self.known) this.set({ namespace: ns }, self.limitsOf(ns).maxSandboxes);
      },
    });
    new Gauge({
      name: "e2b_namespace_quota_creates_per_second",
      help: "The namespace's creates-per-second quota (0: no limit).",
      labelNames: ["namespace"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const ns of self.known) this.set({ namespace: ns }, self.limitsOf(ns).createsPerSecond);
      },
    });
    new Gauge({
      name: "e2b_namespace_quota_max_snapshots",
      help: "The namespace's max-snapshots quota (0: no limit).",
      labelNames: ["namespace"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const ns of self.known) this.set({ namespace: ns }, self.limitsOf(ns).maxSnapshots);
      },
    });
    new Gauge({
      name: "e2b_namespace_quota_snapshots_per_second",
      help: "The namespace's snapshots-per-second quota (0: no limit).",
      labelNames: ["namespace"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const ns of self.known) this.set({ namespace: ns }, self.limitsOf(ns).snapshotsPerSecond);
      },
    });
    this.rejected = new Counter({
      name: "e2b_quota_rejections_total",
      help: "Starts and snapshots refused with 429 by a namespace quota, by namespace and quota (max-sandboxes, creates-per-second, max-snapshots, snapshots-per-second).",
      labelNames: ["namespace", "quota"] as const,
      registers: [this.registry],
    });
    this.started = new Counter({
      name: "e2b_quota_admitted_total",
      help: "Sandbox starts admitted by the namespace quotas, by namespace and kind (create, fork, resume).",
      labelNames: ["namespace", "kind"] as const,
      registers: [this.registry],
    });
  }

  /**
   * The admitted counter's child of one namespace and kind, kept: prom-client hashes the label set on every `inc`
   * with labels, a per-create cost. Namespaces come from the key file, so the map is as bounded as the keys.
   */
  private startedIn(namespace: string, kind: StartKind) {
    const key = `${namespace}\0${kind}`;
    let child = this.startedChildren.get(key);
    if (!child) this.startedChildren.set(key, (child = this.started.labels({ namespace, kind })));
    return child;
  }

  limitsOf(namespace: string): QuotaLimits {
    const own = this.o.limits.get(namespace);
    const d = this.o.defaults;
    return {
      maxSandboxes: own?.maxSandboxes ?? d.maxSandboxes,
      createsPerSecond: own?.createsPerSecond ?? d.createsPerSecond,
      maxSnapshots: own?.maxSnapshots ?? d.maxSnapshots,
      snapshotsPerSecond: own?.snapshotsPerSecond ?? d.snapshotsPerSecond,
    };
  }

  /**
   * Admit one snapshot of `namespace` or throw the 429: the rate first (no node call), then the count, read by
   * `held` (the namespace's checkpoints on every node that answers) only when max-snapshots is set. Checkpoints this
   * replica is taking, or finished after the count was read, are added to it, so a burst of concurrent snapshots
   * cannot all pass one stale count. The returned function ends the reservation: call it once the checkpoint call
   * settled, with whether it made a checkpoint.
   */
  async admitSnapshot(namespace: string, held: () => Promise<number>): Promise<(made: boolean) => void> {
    this.known.add(namespace);
    const limits = this.limitsOf(namespace);
    if (limits.snapshotsPerSecond > 0 && !this.snapshotBucketOf(namespace, limits.snapshotsPerSecond).tryAcquire()) {
      this.rejected.inc({ namespace, quota: "snapshots-per-second" });
      throw tooMany(
        `namespace quota exceeded: more than ${limits.snapshotsPerSecond} snapshots per second (snapshots-per-second); retry later`,
        Math.max(1, Math.ceil(1 / limits.snapshotsPerSecond)),
      );
    }
    const mine = this.snapshotsTaking.get(namespace) ?? { running: 0, finished: [] };
    this.snapshotsTaking.set(namespace, mine);
    if (limits.maxSnapshots > 0) {
      const readAt = this.clock.now();
      const listed = await held();
      const now = this.clock.now();
      mine.finished = mine.finished.filter((t) => now - t < RECENT_SNAPSHOT_MS);
      const count = listed + mine.running + mine.finished.filter((t) => t >= readAt).length;
      if (count + 1 > limits.maxSnapshots) {
        this.rejected.inc({ namespace, quota: "max-snapshots" });
        throw tooMany(
          `namespace quota exceeded: ${count} of ${limits.maxSnapshots} snapshots kept (max-snapshots); delete one (Sandbox.deleteSnapshot) or retry later`,
          COUNT_RETRY_AFTER_S,
        );
      }
    }
    mine.running++;
    let done = false;
    return (made) => {
      if (done) return;
      done = true;
      mine.running--;
      if (made && limits.maxSnapshots > 0) mine.finished.push(this.clock.now());
    };
  }

  /**
   * Admit `count` starts of `kind` in `namespace` or throw the 429. `resume` wakes a sandbox the namespace already
   * holds (rate only); the others add sandboxes. The returned function ends the in-flight reservation: call it once
   * the claim is settled (remembered by the surface, or failed).
   */
  admit(namespace: string, kind: StartKind, count = 1): () => void {
    this.known.add(namespace);
    const limits = this.limitsOf(namespace);
    const adds = kind === "resume" ? 0 : count;
    const pending = this.inFlight.get(namespace) ?? 0;
    if (limits.maxSandboxes > 0 && adds > 0) {
      const held = this.o.live(namespace) + pending;
      if (held + adds > limits.maxSandboxes) {
        this.rejected.inc({ namespace, quota: "max-sandboxes" });
        throw tooMany(
          `namespace quota exceeded: ${held} of ${limits.maxSandboxes} sandboxes held, ${adds} more asked (max-sandboxes); kill one or retry later`,
          COUNT_RETRY_AFTER_S,
        );
      }
    }
    if (limits.createsPerSecond > 0) {
      const bucket = this.bucketOf(namespace, limits.createsPerSecond);
      // A fork of more children than one burst could never pass: it takes at most a full burst.
      const need = Math.min(count, bucket.burst);
      for (let i = 0; i < need; i++) {
        if (!bucket.tryAcquire()) {
          this.rejected.inc({ namespace, quota: "creates-per-second" });
          throw tooMany(
            `namespace quota exceeded: more than ${limits.createsPerSecond} sandbox starts per second (creates-per-second); retry later`,
            Math.max(1, Math.ceil(1 / limits.createsPerSecond)),
          );
        }
      }
    }
    this.startedIn(namespace, kind).inc(count);
    if (adds === 0) return () => undefined;
    this.inFlight.set(namespace, pending + adds);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.inFlight.get(namespace) ?? adds) - adds;
      if (left > 0) this.inFlight.set(namespace, left);
      else this.inFlight.delete(namespace);
    };
  }

  private snapshotBucketOf(namespace: string, rate: number): TokenBucket {
    let b = this.snapshotBuckets.get(namespace);
    if (!b) this.snapshotBuckets.set(namespace, (b = new TokenBucket(rate, Math.max(1, Math.ceil(rate)), this.clock)));
    return b;
  }

  private bucketOf(namespace: string, rate: number): TokenBucket {
    let b = this.buckets.get(namespace);
    if (!b) {
      // Burst: one second's worth, at least one start.
      b = new TokenBucket(rate, Math.max(1, Math.ceil(rate)), this.clock);
      this.buckets.set(namespace, b);
    }
    return b;
  }
}

function tooMany(message: string, retryAfterSeconds: number): E2bError {
  return new E2bError(429, message, { "retry-after": String(retryAfterSeconds) });
}
