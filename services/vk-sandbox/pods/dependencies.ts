// What the pod controller depends on from the outside, declared by the consumer (style item 3): the pod cache fed
// by the informer, two pod writes and the error classifiers. (The logger is shared/log's Log; keys are shared/kube's
// podKey/splitKey.) wire.ts adapts the shared KubeClient and Informer to these, so the
// controller's unit tests run on plain fakes.
import type { V1Pod } from "@kubernetes/client-node";

/** The informer on Pods bound to this node (`fieldSelector=spec.nodeName=<node>`), keyed `<namespace>/<name>`. */
export interface PodSource {
  get(key: string): V1Pod | undefined;
  list(): V1Pod[];
  onAdd(fn: (pod: V1Pod) => void): void;
  onUpdate(fn: (oldPod: V1Pod, newPod: V1Pod) => void): void;
  onDelete(fn: (pod: V1Pod) => void): void;
  /** Starts list+watch (idempotent) and resolves once the first LIST has been delivered. */
  startAndSync(): Promise<void>;
}

/** The two pod writes the controller makes. Errors carry the HTTP status the classifiers read. */
export interface PodWriter {
  /** PUT pods/<name>/status with the given object (its resourceVersion, if any, is the precondition). */
  updateStatus(pod: V1Pod): Promise<V1Pod>;
  /** DELETE with gracePeriodSeconds 0 and a UID precondition. */
  forceDelete(namespace: string, name: string, uid: string): Promise<void>;
}

/** The slice of the shared error classifiers the controller reads. */
export interface ErrorClassifier {
  isNotFound(err: unknown): boolean;
  isConflict(err: unknown): boolean;
}
