// The NodeInventory object (CRD nodeinventories.sandbox.cocoonstack.io, manifests/crds/) as one zod schema: the one
// home of the wire type. vk-sandbox's publisher builds it; the aggregated apiserver's fleet view and the envd proxy
// read it (informer items are safeParsed against NodeInventory).
import { z } from "zod";
import type { ResourceRef } from "../kube/index.ts";

export const GROUP = "sandbox.cocoonstack.io";
export const VERSION = "v1beta1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = "NodeInventory";

export const NodeInventories: ResourceRef = { group: GROUP, version: VERSION, resource: "nodeinventories", namespaced: false };
/** The sharded form's row objects (CRD nodeinventoryshards.sandbox.cocoonstack.io, docs/inventory.md). */
export const SHARD_KIND = "NodeInventoryShard";
export const NodeInventoryShards: ResourceRef = { group: GROUP, version: VERSION, resource: "nodeinventoryshards", namespaced: false };

export const InventoryPool = z.object({
  template: z.string().min(1),
  net: z.string().optional(),
  size: z.string().optional(),
  warm: z.number().int(),
  target: z.number().int(),
});
export type InventoryPool = z.infer<typeof InventoryPool>;

/** A promoted template from /v1/info (vk-sandbox.md open question 4: published now that the CRD defines it). */
export const InventoryTemplate = z.object({
  template: z.string().min(1),
  net: z.string().optional(),
  size: z.string().optional(),
  contentDigest: z.string().optional(),
  tenant: z.string().optional(),
  createdAt: z.string().optional(),
  cpuCount: z.number().int().optional(),
  memoryBytes: z.number().int().optional(),
});
export type InventoryTemplate = z.infer<typeof InventoryTemplate>;

export const EntryPhase = z.enum(["Running", "Hibernated"]);

export const InventoryEntry = z.object({
  /** claim_ref, or the id when the row has none. */
  name: z.string().min(1),
  phase: EntryPhase,
  id: z.string().optional(),
  template: z.string().optional(),
  claimRef: z.string().optional(),
  /** Only for rows this node's provider holds (owner_addr of its claim). */
  addr: z.string().optional(),
  deadline: z.string().optional(),
  claimedAt: z.string().optional(),
  // Newer fields the aggregated API and the e2b surface read (sandbox-apiserver.md §4.1): the claim's caller
  // metadata as one JSON-object string, and the size tier's allocation. Omitted when empty or zero.
  claimMetadata: z.string().optional(),
  cpuCount: z.number().int().optional(),
  memoryBytes: z.number().int().optional(),
});
export type InventoryEntry = z.infer<typeof InventoryEntry>;

export const OwnerReference = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
});

export const NodeInventory = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: z
    .object({
      name: z.string(),
      ownerReferences: z.array(OwnerReference).optional(),
    })
    .passthrough(),
  node: z.string().min(1),
  address: z.string().optional(),
  pools: z.array(InventoryPool).optional(),
  templates: z.array(InventoryTemplate).optional(),
  entries: z.array(InventoryEntry).optional(),
  publishedAt: z.string().optional(),
  /**
   * Present only in the sharded form (docs/inventory.md): the node's rows are in NodeInventoryShard objects, not in
   * `entries`; `generation`/`count` name the set the publisher last completed. Absent: the seed's single-object form
   * (an upstream publisher, or --inventory-format=single), whose rows are `entries`.
   */
  shards: z.object({ generation: z.number().int().min(1), count: z.number().int().min(1) }).optional(),
});
export type NodeInventory = z.infer<typeof NodeInventory>;

/**
 * One slice of a sharded node's rows: NodeInventoryShard `<node>.<generation>.<index>`. A row's shard is fixed for a
 * generation (a hash of its id, modulo `count`), so within one generation a row never moves between shards; a new
 * generation (another count) is written whole before the root names it, and the old one is deleted after.
 */
export const NodeInventoryShard = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(SHARD_KIND),
  metadata: z
    .object({
      name: z.string(),
      ownerReferences: z.array(OwnerReference).optional(),
    })
    .passthrough(),
  node: z.string().min(1),
  generation: z.number().int().min(1),
  index: z.number().int().min(0),
  count: z.number().int().min(1),
  entries: z.array(InventoryEntry).optional(),
});
export type NodeInventoryShard = z.infer<typeof NodeInventoryShard>;

/**
 * The one name a shard may have. Node names are DNS subdomains, so `.<digits>.<digits>` read from the right parses
 * back to exactly one (node, generation, index): no node's shard can take another node's shard name.
 */
export const shardName = (node: string, generation: number, index: number): string => `${node}.${generation}.${index}`;
