// The body of the PATCH on nodes/<name>/status: three-way from what we applied last time (kept in two annotations
// on the Node itself, so a restarted daemon remembers), what we want now, and what the apiserver holds. Labels and
// annotations travel in the same patch: the status subresource keeps metadata changes, and only resets the spec,
// which is why taints edited by an operator survive.
import type { V1Node, V1NodeStatus } from "@kubernetes/client-node";
import { type Json, type JsonObject, threeWayMergePatch, toJson } from "./three-way-patch.ts";

export const LAST_APPLIED_STATUS = "virtual-kubelet.io/last-applied-node-status";
export const LAST_APPLIED_META = "virtual-kubelet.io/last-applied-object-meta";

export interface DesiredNodeState {
  labels: Record<string, string>;
  status: V1NodeStatus;
}

function parseAnnotation(raw: string | undefined): JsonObject | undefined {
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as Json;
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : undefined;
  } catch {
    // A mangled annotation only costs us the deletion of fields we dropped since; never a reason to stop.
    return undefined;
  }
}

/**
 * The part of a last-applied meta annotation this daemon manages: `labels` only. The annotation may have been
 * written by the upstream Go daemon (virtual-kubelet), which records `{"name","uid","labels"}`: read whole, a
 * three-way patch would take name and uid for fields we applied and no longer want, send `metadata.name: null`,
 * and the apiserver answers 400 "name must be provided" (node-by-node migration, issue 7 case 10). Identity is
 * never ours to patch, so only labels take part.
 */
function ownMeta(meta: JsonObject | undefined): JsonObject {
  return meta && "labels" in meta ? { labels: meta.labels ?? null } : {};
}

/** Stamps lastHeartbeatTime = now on every condition: each patch is the heartbeat. */
export function withHeartbeat(status: V1NodeStatus, now: Date): V1NodeStatus {
  return { ...status, conditions: (status.conditions ?? []).map((c) => ({ ...c, lastHeartbeatTime: now })) };
}

/** Returns the strategic-merge patch that moves `live` to `desired`, leaving other writers' fields alone. */
export function nodeStatusPatch(desired: DesiredNodeState, live: V1Node): JsonObject {
  const status = toJson(desired.status) as JsonObject;
  const meta = { labels: toJson(desired.labels) } as JsonObject;
  const annotations = live.metadata?.annotations ?? {};
  const original: JsonObject = {
    metadata: ownMeta(parseAnnotation(annotations[LAST_APPLIED_META])),
    status: parseAnnotation(annotations[LAST_APPLIED_STATUS]) ?? {},
  };
  const modified: JsonObject = {
    metadata: {
      ...meta,
      annotations: { [LAST_APPLIED_STATUS]: JSON.stringify(status), [LAST_APPLIED_META]: JSON.stringify(meta) },
    },
    status,
  };
  const current = toJson({ metadata: live.metadata ?? {}, status: live.status ?? {} }) as JsonObject;
  return threeWayMergePatch(original, modified, current);
}
