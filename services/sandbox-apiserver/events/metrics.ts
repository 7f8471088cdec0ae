// What became of each sandbox transition this replica judged while it writes events, on the server's /metrics: an
// operator sees the rate limits at work (docs/events.md "Rate limits") without reading debug logs.
import { Counter, type Registry } from "#shared/metrics/index.ts";

export type EventOutcome = "recorded" | "rate_limited" | "namespace_missing";

export function sandboxEventsCounter(registry: Registry): Counter<"reason" | "outcome"> {
  return new Counter({
    name: "sandbox_apiserver_sandbox_events_total",
    help: "Sandbox lifecycle transitions seen in inventory changes, by event reason and outcome (recorded, rate_limited, namespace_missing).",
    labelNames: ["reason", "outcome"] as const,
    registers: [registry],
  });
}
