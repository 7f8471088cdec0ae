// UpdatePod (§5.4): the Pod's spec or metadata changed. Nothing is claimed or released here; a tentative key
// retries its create, which releases a stranded claim.
import type { V1Pod } from "@kubernetes/client-node";
import { podKey } from "#shared/kube/index.ts";
import type { Core } from "./core.ts";
import { podUID, withClaimId } from "./pod-contract.ts";
import { isStale } from "./stale-uid.ts";

/** UpdatePod: ignore a stale UID; a tentative key retries the create (which releases the stranded claim). */
export async function updatePod(core: Core, pod: V1Pod, create: (pod: V1Pod) => Promise<void>): Promise<void> {
  const key = podKey(pod);
  if (isStale(core, pod)) {
    core.log.debug({ pod: key, uid: podUID(pod) }, "update for a stale pod UID ignored");
    return;
  }
  if (core.st.tentative.has(key)) return create(pod);
  const row = core.st.claims.get(key);
  // Keep the claim-id annotation on the stored copy so GetPod stays equal to what the status push sent.
  core.st.pods.set(key, row && core.st.pods.has(key) ? withClaimId(pod, row.id) : pod);
}
