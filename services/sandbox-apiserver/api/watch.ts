// Watch (docs/api.md "Watch"): the current view as ADDED events (whatever resourceVersion the request names), a
// BOOKMARK marking the end of the initial events when the client asked for a watch-list, then every second the view
// is derived again and diffed by <ns>/<name>: new → ADDED, changed resourceVersion → MODIFIED, gone → DELETED with
// the last known object. A pinned watch (namespace + exact metadata.name) reads only its node while it holds the
// entry, and asks that node live before reporting DELETED, so a publish that raced the claim does not flap.
import type { Logger } from "pino";
import type { Clock } from "#shared/clock/index.ts";
import { API_VERSION, KIND, type Sandbox } from "../sandboxes/index.ts";
import type { Resolved, SandboxReader } from "../sandboxes/index.ts";
import type { FieldSelector, LabelSelector } from "./selectors.ts";
import { type TableRequest, toTable } from "./table.ts";

export const WATCH_POLL_MS = 1000;

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
  clock: Clock;
  log?: Logger;
  /** Aborted when shutdown begins: open watches end at once (well within the 2 s the spec allows). */
  shutdown: AbortSignal;
}

type EventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK";

const keyOf = (s: Sandbox) => `${s.metadata.namespace}/${s.metadata.name}`;

export function watchStream(deps: WatchDeps, req: WatchRequest, clientSignal: AbortSignal): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const pinnedName = req.namespace !== undefined ? req.fields.exactName : undefined;
  const matches = (s: Sandbox) => req.labels.matches(s.metadata.labels) && req.fields.matches(s);
  let pinnedNode: string | undefined;
  let headersSent = false;
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  clientSignal.addEventListener("abort", onAbort, { once: true });
  deps.shutdown.addEventListener("abort", onAbort, { once: true });

  const encode = (type: EventType, obj: Sandbox): Uint8Array => {
    let object: object = obj;
    if (req.table && type !== "BOOKMARK") {
      object = toTable([obj], req.table, req.table.noHeaders || headersSent);
      headersSent = true;
    }
    return enc.encode(`${JSON.stringify({ type, object })}\n`);
  };

  /** The current view: pinned reads one node (or scans while holding nothing), fleet lists every fresh node. */
  const view = (): Map<string, Sandbox> => {
    const out = new Map<string, Sandbox>();
    if (pinnedName !== undefined && req.namespace !== undefined) {
      let hit: Resolved | undefined;
      if (pinnedNode !== undefined) hit = deps.reader.inInventory(pinnedNode, req.namespace, pinnedName);
      hit ??= deps.reader.scan(req.namespace, pinnedName);
      pinnedNode = hit?.node ?? pinnedNode;
      if (hit && matches(hit.sandbox)) out.set(keyOf(hit.sandbox), hit.sandbox);
      return out;
    }
    for (const s of deps.reader.list(req.namespace)) if (matches(s)) out.set(keyOf(s), s);
    return out;
  };

  return new ReadableStream<Uint8Array>({
    start: async (controller) => {
      const send = (type: EventType, obj: Sandbox) => {
        if (!stop.signal.aborted) controller.enqueue(encode(type, obj));
      };
      // Bun sends the response headers with the first body chunk. A watch with nothing to report yet must still
      // answer at once (clients and the aggregator wait for headers), so it starts with a newline, which every
      // JSON stream decoder skips as whitespace between objects.
      controller.enqueue(enc.encode("\n"));
      let last = new Map<string, Sandbox>();
      try {
        if (pinnedName !== undefined && req.namespace !== undefined) {
          // The initial state of a pinned watch resolves like a Get (live lookups included): a sandbox created a
          // moment ago on another replica is there from the first event.
          const hit = await deps.reader.resolve(req.namespace, pinnedName).catch(() => undefined);
          if (hit) pinnedNode = hit.node;
          if (hit && matches(hit.sandbox)) last.set(keyOf(hit.sandbox), hit.sandbox);
        } else {
          last = view();
        }
      } catch (err) {
        deps.log?.warn({ err: (err as Error).message }, "watch: initial view failed; starting empty");
      }
      for (const s of last.values()) send("ADDED", s);
      if (req.sendInitialEvents) {
        send("BOOKMARK", {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { resourceVersion: "", annotations: { "k8s.io/initial-events-end": "true" } },
          spec: {},
          status: {},
        });
      }
      const deadline = req.timeoutMs !== undefined ? deps.clock.now() + req.timeoutMs : undefined;
      while (!stop.signal.aborted) {
        const wait = deadline === undefined ? WATCH_POLL_MS : Math.min(WATCH_POLL_MS, deadline - deps.clock.now());
        if (wait <= 0) break;
        await deps.clock.sleep(wait, stop.signal);
        if (stop.signal.aborted) break;
        try {
          const next = view();
          for (const [k, s] of next) {
            const prev = last.get(k);
            if (!prev) send("ADDED", s);
            else if (prev.metadata.resourceVersion !== s.metadata.resourceVersion) send("MODIFIED", s);
          }
          for (const [k, s] of last) {
            if (next.has(k)) continue;
            if (pinnedName !== undefined && req.namespace !== undefined && (await stillHeld(deps, req.namespace, pinnedName, s, matches))) {
              next.set(k, s);
              continue;
            }
            send("DELETED", s);
          }
          last = next;
        } catch (err) {
          deps.log?.warn({ err: (err as Error).message }, "watch: poll failed; keeping the watch open");
        }
      }
      clientSignal.removeEventListener("abort", onAbort);
      deps.shutdown.removeEventListener("abort", onAbort);
      try {
        controller.close();
      } catch {
        // the client already went away
      }
    },
    cancel: () => stop.abort(),
  });
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
