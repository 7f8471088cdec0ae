export { type BuildInput, buildEntries, buildInventory, buildRoot, buildShard, inventoryEntry } from "./build.ts";
export { fnv1a, layoutShards, MAX_SHARDS, rowBytes, SHARD_MAX_BYTES, SHARD_TARGET_BYTES, shardOf, type ShardLayout } from "./shards.ts";
export {
  DEFAULT_WARN_OBJECT_BYTES,
  FIELD_MANAGER,
  INVENTORY_FORMATS,
  type InventoryFormat,
  type InventorySizes,
  type InventoryWarnings,
  type InventoryKubeClient,
  InventoryPublisher,
  type InventoryPublisherOptions,
  type InventorySandboxd,
  type PublishOutcome,
  SHARD_RESYNC_PUBLISHES,
} from "./publisher.ts";
