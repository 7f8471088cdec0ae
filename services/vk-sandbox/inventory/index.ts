export { type BuildInput, buildInventory, inventoryEntry } from "./build.ts";
export {
  FIELD_MANAGER,
  type InventoryKubeClient,
  InventoryPublisher,
  type InventoryPublisherOptions,
  type InventorySandboxd,
  type PublishOutcome,
} from "./publisher.ts";
