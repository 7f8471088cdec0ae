// Event recorder: core/v1 Events on the involved object, the way client-go's record package writes them, minus
// the broadcaster. Recording never blocks the caller (a controller must not stall on an event write), and a
// failed write is only logged: events are advisory.
//
// Aggregation is the simple client-side kind: an event identical to one already written (same object UID,
// type, reason, message, source) patches `count` and `lastTimestamp` of that Event instead of creating another,
// so a pod retrying a failing create every backoff step does not flood etcd.
import PQueue from "p-queue";
import type { CoreV1Event, V1ObjectReference } from "@kubernetes/client-node";
import { type Clock, formatRfc3339Seconds, realClock } from "../clock/index.ts";
import type { KubeClient } from "./client.ts";
import { Events } from "./resources.ts";

/** The two calls the recorder makes; consumers wire them to the shared KubeClient (RBAC: events create, patch). */
export interface EventSink {
  create(namespace: string, event: CoreV1Event): Promise<unknown>;
  /** A JSON merge patch of `count`/`lastTimestamp`; rejects with a 404-classified error if the Event is gone. */
  patch(namespace: string, name: string, patch: Partial<CoreV1Event>): Promise<unknown>;
}

/** The sink on a KubeClient: core/v1 Events, created, and merge-patched when repeated. */
export function kubeEventSink(client: KubeClient): EventSink {
  return {
    create: (namespace, event) => client.create(Events, event, { namespace }),
    patch: (namespace, name, patch) => client.patch(Events, name, patch, { namespace, type: "merge" }),
  };
}

export type EventType = "Normal" | "Warning";

/** The parts of an object an Event refers to (a V1Pod fits). */
export interface InvolvedObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export interface EventRecorderOptions {
  sink: EventSink;
  /** `source.component`, e.g. `<node>/pod-controller`. */
  component: string;
  /** `source.host`, the node name. */
  host?: string;
  /** --disable-pod-events: Normal events are dropped, Warnings still go out. */
  dropNormal?: boolean;
  /** How many distinct events are remembered for aggregation (oldest forgotten first). */
  cacheSize?: number;
  /** Stamps firstTimestamp/lastTimestamp (whole seconds, metav1.Time) and the name suffix. */
  clock?: Clock;
  isNotFound?: (err: unknown) => boolean;
  log?: { warn(obj: object, msg: string): void };
}

interface Seen {
  name: string;
  namespace: string;
  count: number;
}

export class EventRecorder {
  private readonly opts: EventRecorderOptions;
  private readonly seen = new Map<string, Seen>();
  private readonly writes = new PQueue({ concurrency: 4 });
  /**
   * The last write queued per aggregation key. Writes of one key run one after another: two in flight at once
   * would both miss `seen` and create two Events, or both patch the same count and lose one.
   */
  private readonly lastWrite = new Map<string, Promise<void>>();
  private closed = false;
  private seq = 0;
  /** Counters for tests and the bench: what was asked versus what reached the sink. */
  readonly counts = { recorded: 0, dropped: 0, created: 0, patched: 0, failed: 0 };

  private readonly clock: Clock;

  constructor(opts: EventRecorderOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
  }

  normal(obj: InvolvedObject, reason: string, message: string): void {
    this.record(obj, "Normal", reason, message);
  }

  warning(obj: InvolvedObject, reason: string, message: string): void {
    this.record(obj, "Warning", reason, message);
  }

  record(obj: InvolvedObject, type: EventType, reason: string, message: string): void {
    if (this.closed || (type === "Normal" && this.opts.dropNormal)) {
      this.counts.dropped++;
      return;
    }
    const md = obj.metadata ?? {};
    if (!md.name) return;
    this.counts.recorded++;
    const namespace = md.namespace || "default";
    const involved: V1ObjectReference = {
      apiVersion: obj.apiVersion ?? "v1",
      kind: obj.kind ?? "Pod",
      namespace: md.namespace,
      name: md.name,
      uid: md.uid,
      resourceVersion: md.resourceVersion,
    };
    const key = [md.uid ?? `${namespace}/${md.name}`, type, reason, message].join("\u0000");
    const before = this.lastWrite.get(key);
    // An earlier write of the key was queued first, so it holds a slot before this one does: waiting cannot stall.
    const done: Promise<void> = this.writes
      .add(async () => {
        await before;
        await this.write(key, namespace, involved, type, reason, message);
      })
      .finally(() => {
        if (this.lastWrite.get(key) === done) this.lastWrite.delete(key);
      });
    this.lastWrite.set(key, done);
  }

  /** Resolves once every event recorded so far has been written (or has failed). */
  flush(): Promise<void> {
    return this.writes.onIdle();
  }

  /** Stop recording; pending writes finish. */
  async close(): Promise<void> {
    this.closed = true;
    await this.writes.onIdle();
  }

  private async write(
    key: string,
    namespace: string,
    involved: V1ObjectReference,
    type: EventType,
    reason: string,
    message: string,
  ): Promise<void> {
    const now = formatRfc3339Seconds(this.clock.now());
    const prev = this.seen.get(key);
    try {
      if (prev) {
        try {
          await this.opts.sink.patch(prev.namespace, prev.name, { count: prev.count + 1, lastTimestamp: now as never });
          prev.count++;
          this.counts.patched++;
          // Refresh recency so the LRU keeps hot events.
          this.seen.delete(key);
          this.seen.set(key, prev);
          return;
        } catch (err) {
          // The Event expired (TTL) or was deleted: start a fresh one.
          if (!this.opts.isNotFound?.(err)) throw err;
          this.seen.delete(key);
        }
      }
      const name = `${involved.name}.${eventSuffix(this.clock.now(), ++this.seq)}`;
      const event: CoreV1Event = {
        apiVersion: "v1",
        kind: "Event",
        metadata: { name, namespace },
        involvedObject: involved,
        reason,
        message,
        type,
        source: { component: this.opts.component, host: this.opts.host },
        firstTimestamp: now as never,
        lastTimestamp: now as never,
        count: 1,
        reportingComponent: this.opts.component,
        reportingInstance: this.opts.host ?? "",
      };
      await this.opts.sink.create(namespace, event);
      this.counts.created++;
      this.seen.set(key, { name, namespace, count: 1 });
      const cap = this.opts.cacheSize ?? 4096;
      while (this.seen.size > cap) this.seen.delete(this.seen.keys().next().value!);
    } catch (err) {
      this.counts.failed++;
      this.opts.log?.warn({ reason, object: `${namespace}/${involved.name}`, err: String(err) }, "event write failed");
    }
  }
}

// client-go names events `<object>.<hex nanoseconds>`; a per-process counter keeps two events in one
// nanosecond (possible with performance.now granularity) from colliding.
function eventSuffix(nowMs: number, seq: number): string {
  const ns = BigInt(nowMs) * 1_000_000n + BigInt(seq % 1_000_000);
  return ns.toString(16);
}
