// shared/inventory — the NodeInventory wire type (CRD nodeinventories.sandbox.cocoonstack.io, manifests/crds/):
// written by vk-sandbox's publisher (one root object per node, and in the sharded form its NodeInventoryShards:
// docs/inventory.md), read by every fleet view.
export {
  API_VERSION,
  EntryPhase,
  GROUP,
  InventoryEntry,
  InventoryPool,
  InventoryTemplate,
  KIND,
  NodeInventories,
  NodeInventory,
  NodeInventoryShard,
  NodeInventoryShards,
  OwnerReference,
  SHARD_KIND,
  shardName,
  VERSION,
} from "./schema.ts";
