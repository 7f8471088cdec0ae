// Object keys, client-go's MetaNamespaceKeyFunc: "<namespace>/<name>" for a namespaced object, "<name>" for a
// cluster-scoped one. The informer's store, the work queues and the provider's tables all key by these.
import type { V1Pod } from "@kubernetes/client-node";

export type Obj = { metadata?: { name?: string; namespace?: string; resourceVersion?: string; uid?: string } };

/** The store key of any object: "<namespace>/<name>", or "<name>" when it has no namespace (cluster-scoped). */
export function objectKey(obj: Obj): string {
  const m = obj.metadata ?? {};
  return m.namespace ? `${m.namespace}/${m.name ?? ""}` : (m.name ?? "");
}

/**
 * The key of a Pod, always "<namespace>/<name>": a Pod is namespaced, and one read without a namespace (a
 * manifest, a test object) is in "default", as the apiserver would have put it.
 */
export function podKey(pod: V1Pod): string {
  return `${pod.metadata?.namespace || "default"}/${pod.metadata?.name ?? ""}`;
}

/** The inverse of podKey/objectKey: [namespace, name]; a key without "/" is a cluster-scoped name. */
export function splitKey(key: string): [namespace: string, name: string] {
  const i = key.indexOf("/");
  return i < 0 ? ["", key] : [key.slice(0, i), key.slice(i + 1)];
}
