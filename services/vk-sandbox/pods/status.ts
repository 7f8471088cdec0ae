// §3.5: the status queue's handler. The provider pushes whole Pod objects; we PUT pods/<name>/status with the
// pushed object at the live resourceVersion. Labels and annotations ride along on the status subresource,
// which is how sandbox.cocoonstack.io/claim-id reaches the Pod. GetPodStatus is never polled.
import type { V1Pod } from "@kubernetes/client-node";
import { isTerminal } from "./compare.ts";
import type { ErrorClassifier, PodSource, PodWriter } from "./dependencies.ts";

export interface StatusDeps {
  pods: PodSource;
  api: PodWriter;
  errors: ErrorClassifier;
  pushed: Map<string, V1Pod>;
}

/** Writes the pushed status; true when a write landed. */
export async function pushStatus(key: string, d: StatusDeps): Promise<boolean> {
  const live = d.pods.get(key);
  const pushed = d.pushed.get(key);
  if (!live || !pushed || isTerminal(live)) return false;
  // A push for an earlier generation of this name must not land on its replacement.
  if (pushed.metadata?.uid && live.metadata?.uid && pushed.metadata.uid !== live.metadata.uid) return false;
  // managedFields stay out: a PUT that carries them replaces the server's field-ownership record.
  const { managedFields: _mf, ...metadata } = pushed.metadata ?? {};
  const body: V1Pod = {
    ...pushed,
    apiVersion: "v1",
    kind: "Pod",
    metadata: { ...metadata, resourceVersion: live.metadata?.resourceVersion },
  };
  try {
    await d.api.updateStatus(body);
    return true;
  } catch (err) {
    if (d.errors.isNotFound(err)) return false;
    // A 409 means the cache is behind the live object; the retry reads the newer resourceVersion once the watch
    // delivers it.
    throw err;
  }
}
