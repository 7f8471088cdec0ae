// The seam between the Kubernetes machinery (node, pod controller, queues) and the sandbox logic.
// The machinery knows nothing of sandboxd; the provider knows nothing of queues. (virtual-kubelet's
// PodLifecycleHandler plus PodNotifier, narrowed to what vk-sandbox needs.)
import type { V1Pod, V1PodStatus } from "@kubernetes/client-node";

export interface PodLifecycleProvider {
  /** Claim (or adopt) a sandbox for a Pod bound to this node. Throws on failure; the caller retries with backoff. */
  createPod(pod: V1Pod): Promise<void>;
  /** The Pod spec or metadata changed. Must ignore a stale UID. */
  updatePod(pod: V1Pod): Promise<void>;
  /** Decide release versus preserve for a deleted Pod. Idempotent: may be called again for the same Pod. */
  deletePod(pod: V1Pod): Promise<void>;
  /** The last Pod object the provider accepted for this key, or undefined. Reads memory only. */
  getPod(namespace: string, name: string): V1Pod | undefined;
  /** Every Pod in the provider's table. Reads memory only. */
  getPods(): V1Pod[];
  /** Synthetic status for the key, or undefined when the provider holds no Pod for it. */
  getPodStatus(namespace: string, name: string): V1PodStatus | undefined;
  /**
   * Register the callback the provider uses to push whole Pod objects (status, plus annotations such as
   * sandbox.cocoonstack.io/claim-id). The callback never blocks; the machinery queues the write. A pushed object is
   * given away: the machinery keeps it uncopied until it is written, so the provider never changes it (or anything
   * it shares) afterwards; it builds a fresh object for every push.
   */
  notifyPods(push: (pod: V1Pod) => void): void;
  /**
   * Register the callback the provider uses to ask for a sync of `<namespace>/<name>` now, when something it
   * waited on changed (sandboxd answered again after an outage; a sandbox for a waiting Pod turned up). Optional:
   * without it the controller's own backoff retries get there later.
   */
  notifyRetry?(retry: (key: string) => void): void;
  /**
   * Called once after the pod cache synced, with a lookup of the keys the cache holds: the provider releases what
   * it keeps for Pods deleted while the daemon was down (rows it loaded at startup, never handed over by the
   * dangling pass because its Pod table starts empty). Optional.
   */
  releaseAbsent?(inCache: (key: string) => boolean): Promise<void>;
}
