// shared/inventory — the NodeInventory wire type (CRD nodeinventories.sandbox.cocoonstack.io, manifests/crds/):
// written by vk-sandbox's publisher (one object per node, server-side apply), read by every fleet view.
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
  OwnerReference,
  VERSION,
} from "./schema.ts";
