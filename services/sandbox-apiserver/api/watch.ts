// Watch (docs/api.md "Watch"): the current view as ADDED events (whatever resourceVersion the request names), a
// BOOKMARK marking the end of the initial events when the client asked for a watch-list, then, on every NodeInventory
// event, the changed keys (sandboxes/changes.ts computes them once for every watch) as this watch's selectors see
// them: new → ADDED, changed resourceVersion → MODIFIED, gone → DELETED with the last known object. A pinned watch
// (namespace + exact metadata.name) prefers the node that held its entry, and asks that node live before reporting
// DELETED, so a publish that raced the claim does not flap.
import type { Logger } from "pino";
import type { Clock, Timer } from "#shared/clock/index.ts";
import { API_VERSION, KIND, type Sandbox } from "../sandboxes/index.ts";
import { type ChangeBatch, type SandboxChanges, type SandboxReader, keyOf } from "../sandboxes/index.ts";
import type { FieldSelector, LabelSelector } from "./selectors.ts";
import { ApiError, statusBody } from "./status.ts";
import { type TableRequest, toTable } from "./table.ts";

/** How often a pinned watch re-asks its node while it reports an object no inventory holds (created, not yet published). */
export const PINNED_RECHECK_MS = 1000;

export interface WatchRequest {
  namespace?: string;
  labels: LabelSelector;
  fields: FieldSelector;
  table?: TableRequest;
  sendInitialEvents: boolean;
  /** From timeoutSeconds; undefined = until the client or the server ends it. */
  timeoutMs?: number;
}

export interface WatchDeps {
  reader: SandboxReader;
  changes: SandboxChanges;
  clock: Clock;
  log?: Logger;
  /** Aborted when shutdown begins: open watches end at once (well within the 2 s the spec allows). */
  shutdown: AbortSignal;
  /** Overrides WATCH_QUEUE_LIMIT_BYTES (tests). */
  queueLimitBytes?: number;
}

type EventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK";

/**
 * The most bytes of events a watch holds for a client that does not read them (the bound of issue 22): past it the
 * queued events are dropped, the watch ends with an ERROR event (410 Expired: what it missed is gone, list again, as
 * client-go's reflectors do on 410) and closes. The initial state is not counted: it is encoded only as the client
 * reads, from the objects the view already holds.
 */
export const WATCH_QUEUE_LIMIT_BYTES = 4 * 1024 * 1024;
/** Bytes handed to the response stream ahead of the client's reads; the rest waits in the watch's own queue. */
const STREAM_HIGH_WATER_BYTES = 64 * 1024;

const utf8 = new TextEncoder();

interface Queued {
  type: EventType;
  obj: Sandbox;
  /** Encoded without table column headers (shared by every watch asking the same encoding, `batch.memo`). */
  bytes: Uint8Array;
}

export function watchStream(deps: WatchDeps, req: WatchRequest, clientSignal: AbortSignal): ReadableStream<Uint8Array> {
  const pinnedName = req.namespace !== undefined ? req.fields.exactName : undefined;
  const matches = (s: Sandbox) => req.labels.matches(s.metadata.labels) && req.fields.matches(s);
  const limit = deps.queueLimitBytes ?? WATCH_QUEUE_LIMIT_BYTES;
  let headersSent = false;
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  clientSignal.addEventListener("abort", onAbort, { once: true });
  deps.shutdown.addEventListener("abort", onAbort, { once: true });

  /** One event line; a Table with column headers when `withHeaders`. */
  const encode = (type: EventType, obj: Sandbox, withHeaders: boolean): Uint8Array => {
    const t = req.table && type !== "BOOKMARK" ? req.table : undefined;
    return utf8.encode(`${JSON.stringify({ type, object: t ? toTable([obj], t, !withHeaders) : obj })}\n`);
  };
  const encodeShared = (type: EventType, obj: Sandbox, batch?: ChangeBatch): Uint8Array => {
    if (!batch) return encode(type, obj, false);
    const t = req.table && type !== "BOOKMARK" ? req.table : undefined;
    return batch.memo(obj, t ? `${type}|${t.version}|${t.includeObject}|false` : type, () => encode(type, obj, false));
  };
  /** The bytes to write for an event about to reach the client: the first Table event carries the column headers. */
  const onTheWire = (type: EventType, obj: Sandbox, bytes: Uint8Array | undefined): Uint8Array => {
    if (req.table && type !== "BOOKMARK" && !headersSent) {
      headersSent = true;
      if (!req.table.noHeaders) return encode(type, obj, true);
    }
    return bytes ?? encode(type, obj, false);
  };

  let pullHook = () => {};
  return new ReadableStream<Uint8Array>(
    {
      start: (controller) => {
        /** The initial ADDED events, encoded as the client reads them. */
        let initial: Sandbox[] = [];
        let initialAt = 0;
        const pending: Queued[] = [];
        let pendingHead = 0;
        let queuedBytes = 0;
        let ending = false;
        let closed = false;
        const closeStream = () => {
          if (closed) return;
          closed = true;
          try {
            controller.close();
          } catch {
            // the client already went away
          }
        };
        /** Moves events into the response stream while it wants more; closes it once an ended watch is drained. */
        const deliver = () => {
          while (!closed && (controller.desiredSize ?? 0) > 0) {
            if (initialAt < initial.length) {
              controller.enqueue(onTheWire("ADDED", initial[initialAt]!, undefined));
              initial[initialAt++] = undefined as unknown as Sandbox; // let the reference go
            } else if (pendingHead < pending.length) {
              const e = pending[pendingHead]!;
              pending[pendingHead++] = undefined as unknown as Queued;
              queuedBytes -= e.bytes.byteLength;
              controller.enqueue(onTheWire(e.type, e.obj, e.bytes));
            } else break;
          }
          if (pendingHead > 1024 && pendingHead * 2 > pending.length) {
            pending.splice(0, pendingHead);
            pendingHead = 0;
          }
          if (ending && initialAt >= initial.length && pendingHead >= pending.length) closeStream();
        };
        pullHook = deliver;
        /** The client does not keep up: drop what it has not read, tell it why, and end the watch. */
        const overflow = () => {
          const dropped = pending.length - pendingHead + initial.length - initialAt;
          const bytes = queuedBytes;
          initial = [];
          initialAt = 0;
          pending.length = 0;
          pendingHead = 0;
          queuedBytes = 0;
          deps.log?.info({ namespace: req.namespace, droppedEvents: dropped, droppedBytes: bytes, limitBytes: limit }, "watch: closing a watcher that does not read its events");
          const status = statusBody(
            new ApiError(
              410,
              `the watch was closed because the client did not read its events: ${dropped} events (${bytes} bytes) were queued, over the limit of ${limit} bytes; list again and start a new watch`,
              "Expired",
            ),
          );
          try {
            controller.enqueue(utf8.encode(`${JSON.stringify({ type: "ERROR", object: status })}\n`));
          } catch {
            // the client already went away
          }
          closeStream();
          stop.abort();
        };
        const send = (type: EventType, obj: Sandbox, batch?: ChangeBatch) => {
          if (stop.signal.aborted || closed) return;
          const bytes = encodeShared(type, obj, batch);
          pending.push({ type, obj, bytes });
          queuedBytes += bytes.byteLength;
          deliver();
          if (queuedBytes > limit) overflow();
        };
        const bookmark = () => {
          if (!req.sendInitialEvents) return;
          send("BOOKMARK", {
            apiVersion: API_VERSION,
            kind: KIND,
            metadata: { resourceVersion: "", annotations: { "k8s.io/initial-events-end": "true" } },
            spec: {},
            status: {},
          });
        };
        // Bun sends the response headers with the first body chunk. A watch with nothing to report yet must still
        // answer at once (clients and the aggregator wait for headers), so it starts with a newline, which every
        // JSON stream decoder skips as whitespace between objects.
        controller.enqueue(utf8.encode("\n"));

        let unsubscribe = () => {};
        let timeout: Timer | undefined;
        let recheck: Timer | undefined;
        const finish = () => {
          unsubscribe();
          timeout?.cancel();
          recheck?.cancel();
          clientSignal.removeEventListener("abort", onAbort);
          deps.shutdown.removeEventListener("abort", onAbort);
          // What is queued still goes out (a timeoutSeconds end keeps its last events); then the stream closes.
          ending = true;
          deliver();
        };

        if (pinnedName !== undefined && req.namespace !== undefined) {
          const ns = req.namespace;
          const key = `${ns}/${pinnedName}`;
          let pinnedNode: string | undefined;
          let last: Sandbox | undefined;
          // Events are judged one at a time, in order: the initial resolve and a DELETED's live check are async.
          let chain: Promise<void> = Promise.resolve();
          const judge = async (holders: readonly Sandbox[], batch?: ChangeBatch) => {
            recheck?.cancel();
            recheck = undefined;
            const hit = (pinnedNode !== undefined ? holders.find((s) => s.status.nodeName === pinnedNode) : undefined) ?? holders[0];
            pinnedNode = hit?.status.nodeName ?? pinnedNode;
            const next = hit && matches(hit) ? hit : undefined;
            if (next) {
              if (!last) send("ADDED", next, batch);
              else if (last.metadata.resourceVersion !== next.metadata.resourceVersion) send("MODIFIED", next, batch);
              last = next;
              return;
            }
            if (!last) return;
            if (await stillHeld(deps, ns, pinnedName, last, matches)) {
              // No inventory holds it but its node does: ask again until a publish settles it either way.
              scheduleRecheck();
              return;
            }
            send("DELETED", last);
            last = undefined;
          };
          const queue = (fn: () => Promise<void>) => {
            chain = chain.then(fn).catch((err: unknown) => deps.log?.warn({ err: (err as Error).message, sandbox: key }, "watch: judging a change failed; keeping the watch open"));
          };
          const scheduleRecheck = () => {
            if (stop.signal.aborted) return;
            recheck = deps.clock.after(PINNED_RECHECK_MS, () => queue(() => judge(deps.changes.holdersOf(key))));
          };
          unsubscribe = deps.changes.subscribe((batch) => {
            const c = batch.changes.get(key);
            if (c) queue(() => judge(c.after, batch));
          });
          // The initial state resolves like a Get (live lookups included): a sandbox created a moment ago on another
          // replica is there from the first event. Changes arriving meanwhile queue behind it.
          queue(async () => {
            const hit = await deps.reader.resolve(ns, pinnedName).catch(() => undefined);
            if (hit) pinnedNode = hit.node;
            if (hit && matches(hit.sandbox)) {
              last = hit.sandbox;
              send("ADDED", hit.sandbox);
              if (!deps.changes.holdersOf(key).some((s) => s.status.nodeName === hit.node)) scheduleRecheck();
            }
            bookmark();
          });
        } else {
          // Subscribing first fixes the state the first batch diffs from; the initial view is read from that same state.
          const pick = (holders: readonly Sandbox[]): Sandbox | undefined => {
            for (let i = holders.length - 1; i >= 0; i--) if (matches(holders[i]!)) return holders[i];
            return undefined;
          };
          unsubscribe = deps.changes.subscribe((batch) => {
            for (const c of batch.changes.values()) {
              if (req.namespace !== undefined && c.namespace !== req.namespace) continue;
              const prev = pick(c.before);
              const next = pick(c.after);
              if (next) {
                if (!prev) send("ADDED", next, batch);
                else if (prev.metadata.resourceVersion !== next.metadata.resourceVersion) send("MODIFIED", next, batch);
              } else if (prev) {
                send("DELETED", prev, batch);
              }
            }
          });
          // Duplicates across nodes: the last matching copy in node order is the one reported (as pick does).
          const view = new Map<string, Sandbox>();
          for (const s of deps.reader.list(req.namespace, deps.changes.current())) if (matches(s)) view.set(keyOf(s), s);
          initial = [...view.values()];
          bookmark();
        }

        if (req.timeoutMs !== undefined) timeout = deps.clock.after(req.timeoutMs, () => stop.abort());
        if (stop.signal.aborted) finish();
        else stop.signal.addEventListener("abort", finish, { once: true });
      },
      pull: () => pullHook(),
      cancel: () => stop.abort(),
    },
    new ByteLengthQueuingStrategy({ highWaterMark: STREAM_HIGH_WATER_BYTES }),
  );
}

/** Before a pinned watch reports DELETED: does the owning node still hold it (claim_ref lookup, 500 ms)? */
async function stillHeld(deps: WatchDeps, namespace: string, name: string, last: Sandbox, matches: (s: Sandbox) => boolean): Promise<boolean> {
  const node = last.status.nodeName;
  if (!node) return false;
  const rec = deps.reader.fleet.freshNode(node);
  if (!rec) return false;
  const hit = await deps.reader.live(rec, namespace, name).catch(() => undefined);
  return hit !== undefined && matches(hit.sandbox);
}
