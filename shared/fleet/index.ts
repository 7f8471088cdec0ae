// shared/fleet — the fleet view (docs/fleet.md): types.ts (FleetSource and its snapshot types), view.ts (reads
// every consumer shares: freshness rule, lookups, placement candidates), mesh.ts (the sandboxd-seed source).
// The Kubernetes NodeInventory source lives beside them in its own file.
export * from "./types.ts";
export * from "./view.ts";
export * from "./fanout.ts";
export { MeshFleet, MISSED_TICKS_BEFORE_LEAVE, entryFromRow, nodeFromInfo, type MeshFleetOptions } from "./mesh.ts";
export { InventoryFleet, type InventoryRecord } from "./inventory.ts";
