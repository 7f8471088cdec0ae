// Kubernetes Events for the aggregated API's sandboxes (docs/events.md): every inventory change the fleet's watch
// index computes (sandboxes/changes.ts) is judged for a lifecycle transition, rate-limited (gate.ts), and written as
// a core/v1 Event whose involvedObject is the Sandbox as this API serves it, so `kubectl describe sandbox` and
// `kubectl get events` show it. Only the active replica writes (the warm-pool driver's leader), so two replicas do
// not record one transition twice; every replica keeps following so a new leader starts from the current state.
import type { Logger } from "pino";
import type { EventType, InvolvedObject } from "#shared/kube/index.ts";
import { API_VERSION, KIND, type SandboxChanges } from "../sandboxes/index.ts";
import type { Counter } from "#shared/metrics/index.ts";
import type { EventGate } from "./gate.ts";
import type { EventOutcome } from "./metrics.ts";
import { transitionOf } from "./transitions.ts";

/** The recorder's one call used here (shared/kube EventRecorder: aggregation of identical events, never blocking). */
export interface EventWriter {
  record(obj: InvolvedObject, type: EventType, reason: string, message: string): void;
}

export interface SandboxEventsOptions {
  changes: Pick<SandboxChanges, "subscribe" | "current">;
  writer: EventWriter;
  gate: EventGate;
  /** Whether this replica writes events now (the driver's leader; always when the driver is off). */
  active: () => boolean;
  log?: Logger;
  /** Namespaces known not to exist: their events are skipped before the rate limits (namespaces.ts). */
  isMissingNamespace?: (namespace: string) => boolean;
  /** Counts each judged transition by reason and outcome (metrics.ts). */
  counter?: Counter<"reason" | "outcome">;
  /** How many lost sandboxes are remembered so their return reads Recovered (oldest forgotten first). */
  maxLost?: number;
}

/** Starts following the fleet's changes; the returned function stops it. */
export function startSandboxEvents(o: SandboxEventsOptions): () => void {
  const maxLost = o.maxLost ?? 8192;
  const lost = new Set<string>();
  let fresh: ReadonlySet<string> = new Set();
  // subscribe() brings the index up to the fleet first, so the sandboxes already there are the starting state: a
  // process (re)start reports nothing for them.
  const unsubscribe = o.changes.subscribe((batch) => {
    const freshAfter = new Set(o.changes.current().map((r) => r.name));
    const moment = { freshBefore: fresh, freshAfter, wasLost: (k: string) => lost.has(k) };
    const writing = o.active();
    for (const c of batch.changes.values()) {
      const t = transitionOf(c, moment);
      if (!t) continue;
      if (t.reason === "Lost") {
        lost.add(c.key);
        while (lost.size > maxLost) lost.delete(lost.values().next().value!);
      } else if (t.reason === "Recovered" || t.reason === "Claimed") {
        lost.delete(c.key);
      }
      if (!writing) continue;
      const count = (outcome: EventOutcome) => o.counter?.inc({ reason: t.reason, outcome });
      if (o.isMissingNamespace?.(c.namespace)) {
        count("namespace_missing");
        continue;
      }
      const message = o.gate.admit(c.key, t.type, t.reason, t.message);
      if (message === undefined) {
        count("rate_limited");
        o.log?.debug({ sandbox: c.key, reason: t.reason }, "sandbox event dropped by the rate limit");
        continue;
      }
      count("recorded");
      const md = t.sandbox.metadata;
      o.writer.record(
        { apiVersion: API_VERSION, kind: KIND, metadata: { name: md.name, namespace: md.namespace, ...(md.uid ? { uid: md.uid } : {}) } },
        t.type,
        t.reason,
        message,
      );
    }
    fresh = freshAfter;
  });
  fresh = new Set(o.changes.current().map((r) => r.name));
  return unsubscribe;
}
