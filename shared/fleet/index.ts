// shared/fleet — the fleet view (docs/fleet.md): types.ts (FleetSource and its snapshot types), view.ts (reads
// every consumer shares: freshness rule, lookups, placement candidates), mesh.ts (the sandboxd-seed source),
// demand.ts (claim rate and refill time per pool key), capacity.ts (the no-capacity answer).
// The Kubernetes NodeInventory source lives beside them in its own file.
export * from "./types.ts";
export * from "./view.ts";
export * from "./fanout.ts";
export { MeshFleet, MISSED_TICKS_BEFORE_LEAVE, entryFromRow, fleetTemplateOf, nodeFromInfo, type MeshFleetOptions } from "./mesh.ts";
export { InventoryFleet, type InventoryRecord } from "./inventory.ts";
export { CANARY_NAMESPACE, DemandMeter, RATE_LONG_WINDOW_MS, RATE_SHORT_WINDOW_MS, REFILL_SAMPLES } from "./demand.ts";
export { DEFAULT_RETRY_AFTER_SECONDS, MAX_RETRY_AFTER_SECONDS, type NoCapacityAnswer, type NoCapacityInput, explainNoCapacity, hiddenByStale, noCapacityForTenant } from "./capacity.ts";
