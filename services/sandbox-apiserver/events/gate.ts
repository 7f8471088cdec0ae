// The rate limits in front of the Event writes (docs/events.md "Rate limits"), the kubelet's event correlator in
// spirit: a flapping sandbox, or a fleet-wide burst, must not flood etcd.
//   1. per object: a token bucket per `<ns>/<name>` (burst 25, one token back every 5 minutes); an empty bucket drops.
//   2. per object and reason: past 10 events in 10 minutes the message becomes one constant "(combined from similar
//      events): …" text, so the recorder counts them on one Event (a patch of `count`) instead of creating more.
//   3. per namespace: a token bucket per namespace (default 5/s, burst 40), so one namespace's churn (an e2b key
//      creating and killing sandboxes, each a new object with a full bucket) cannot spend the whole process bucket
//      and starve the `Lost` warnings of every other namespace.
//   4. per process: one token bucket (default 10/s, burst 50) over every object; an empty bucket drops.
// Objects are remembered in insertion order up to a bound; the oldest is forgotten first (its bucket starts full).
// Namespaces are remembered least recently used first out, up to their own bound.
import type { Clock } from "#shared/clock/index.ts";
import { TokenBucket } from "#shared/kube/index.ts";

export interface EventGateOptions {
  clock: Pick<Clock, "monotonic" | "after">;
  processQps?: number;
  processBurst?: number;
  objectBurst?: number;
  /** ms for one token to return to an object's bucket. */
  objectRefillMs?: number;
  namespaceQps?: number;
  namespaceBurst?: number;
  /** How many namespaces' buckets are kept (least recently used forgotten first; a forgotten one starts full). */
  maxNamespaces?: number;
  similarWindowMs?: number;
  similarMax?: number;
  /** How many objects' state is kept. */
  maxObjects?: number;
}

interface Similar {
  windowStart: number;
  count: number;
  /** The message every combined event of this window carries, once combining started. */
  combined?: string;
}

interface ObjectState {
  bucket: TokenBucket;
  similar: Map<string, Similar>;
}

export const COMBINED_PREFIX = "(combined from similar events): ";

export class EventGate {
  private readonly o: Required<EventGateOptions>;
  private readonly process: TokenBucket;
  private readonly objects = new Map<string, ObjectState>();
  private readonly namespaces = new Map<string, TokenBucket>();
  readonly counts = { admitted: 0, combined: 0, droppedObject: 0, droppedNamespace: 0, droppedProcess: 0 };

  constructor(o: EventGateOptions) {
    this.o = {
      processQps: 10,
      processBurst: 50,
      objectBurst: 25,
      objectRefillMs: 300_000,
      namespaceQps: 5,
      namespaceBurst: 40,
      maxNamespaces: 1024,
      similarWindowMs: 600_000,
      similarMax: 10,
      maxObjects: 8192,
      ...o,
    };
    this.process = new TokenBucket(this.o.processQps, this.o.processBurst, this.o.clock);
  }

  /** The message to write for this event, or undefined when a limit drops it. `objectKey` is `<ns>/<name>`. */
  admit(objectKey: string, type: string, reason: string, message: string): string | undefined {
    const state = this.stateOf(objectKey);
    if (!state.bucket.tryAcquire()) {
      this.counts.droppedObject++;
      return undefined;
    }
    const now = this.o.clock.monotonic();
    const key = `${type}\u0000${reason}`;
    let sim = state.similar.get(key);
    if (!sim || now - sim.windowStart > this.o.similarWindowMs) {
      sim = { windowStart: now, count: 0 };
      state.similar.set(key, sim);
    }
    sim.count++;
    let text = message;
    if (sim.count > this.o.similarMax) {
      sim.combined ??= `${COMBINED_PREFIX}${message}`;
      text = sim.combined;
      this.counts.combined++;
    }
    if (!this.namespaceBucket(objectKey).tryAcquire()) {
      this.counts.droppedNamespace++;
      return undefined;
    }
    if (!this.process.tryAcquire()) {
      this.counts.droppedProcess++;
      return undefined;
    }
    this.counts.admitted++;
    return text;
  }

  /** How many objects' limits are held (bounded by maxObjects). */
  get size(): number {
    return this.objects.size;
  }

  /** How many namespaces' buckets are held (bounded by maxNamespaces). */
  get namespaceCount(): number {
    return this.namespaces.size;
  }

  private namespaceBucket(objectKey: string): TokenBucket {
    const slash = objectKey.indexOf("/");
    const ns = slash < 0 ? "" : objectKey.slice(0, slash);
    let b = this.namespaces.get(ns);
    if (b) {
      // Move to the end: the map's order is least recently used first.
      this.namespaces.delete(ns);
    } else {
      b = new TokenBucket(this.o.namespaceQps, this.o.namespaceBurst, this.o.clock);
    }
    this.namespaces.set(ns, b);
    while (this.namespaces.size > this.o.maxNamespaces) this.namespaces.delete(this.namespaces.keys().next().value!);
    return b;
  }

  private stateOf(key: string): ObjectState {
    let s = this.objects.get(key);
    if (s) return s;
    s = { bucket: new TokenBucket(1000 / this.o.objectRefillMs, this.o.objectBurst, this.o.clock), similar: new Map() };
    this.objects.set(key, s);
    while (this.objects.size > this.o.maxObjects) this.objects.delete(this.objects.keys().next().value!);
    return s;
  }
}
