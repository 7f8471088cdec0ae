// services/sandbox-apiserver/events — the folder's front door: Kubernetes Events for sandbox lifecycle transitions.
export { COMBINED_PREFIX, EventGate, type EventGateOptions } from "./gate.ts";
export { type EventWriter, type SandboxEventsOptions, startSandboxEvents } from "./record.ts";
export { type FleetMoment, type Transition, type TransitionReason, transitionOf } from "./transitions.ts";
export { MISSING_NAMESPACE_TTL_MS, NamespaceAwareSink, NamespaceMissingError } from "./namespaces.ts";
export { type EventOutcome, sandboxEventsCounter } from "./metrics.ts";
