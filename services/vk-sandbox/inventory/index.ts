export { type BuildInput, buildInventory, inventoryEntry } from "./build.ts";
export {
  FIELD_MANAGER,
  type InventoryKubeClient,
  InventoryPublisher,
  type InventoryPublisherOptions,
  type InventorySandboxd,
  type PublishOutcome,
} from "./publisher.ts";
export { API_VERSION, GROUP, InventoryEntry, InventoryPool, InventoryTemplate, KIND, NodeInventories, NodeInventory, VERSION } from "./schema.ts";
