// DeletePod (spec §5.5) and UpdatePod (§5.4), with the stale-UID guard (§5.6).
//
// Pod deletion alone is never VM authority: an eviction or a Node-NotReady storm deletes Pods whose owners
// still want their sandboxes, and a replacement Pod of the same name adopts the preserved claim. The verdict
// table lives in ownership.ts; this file applies it.
import type { V1Pod } from "@kubernetes/client-node";
import type { Core } from "./core.ts";
import { ProviderError, messageOf } from "./errors.ts";
import { authorizeRelease, ownerRefOf } from "./ownership.ts";
import { controllerRef, podKey, podUID, withClaimId } from "./pod-contract.ts";

/** The pod table holds this key under a different UID: the request is about a Pod that no longer exists. */
export function isStale(core: Core, pod: V1Pod): boolean {
  const held = core.st.pods.get(podKey(pod));
  return held !== undefined && podUID(held) !== podUID(pod);
}

export async function deletePod(core: Core, pod: V1Pod): Promise<void> {
  const { st, log } = core;
  const key = podKey(pod);
  if (isStale(core, pod)) {
    log.debug({ pod: key, uid: podUID(pod) }, "delete for a stale pod UID ignored");
    return;
  }
  const row = st.claims.get(key);
  if (!row) {
    st.pods.delete(key);
    return;
  }
  const ref = controllerRef(pod);
  const owner = ref ? ownerRefOf(ref) : undefined;
  const verdict = await authorizeRelease(owner, pod.metadata?.namespace || "default", core.ownerReader);
  const plog = log.child({ pod: key, claimId: row.id });

  if (verdict.action === "preserve") {
    // A pod of this key that arrived while the owner was read keeps its entry.
    if (!isStale(core, pod)) st.pods.delete(key);
    if (owner && st.update(key, row.id, (c) => ({ ...c, owner }))) {
      plog.info({ reason: verdict.reason }, "pod deleted; claim preserved for its owner");
    } else {
      plog.info({ reason: verdict.reason }, "pod deleted; claim preserved");
    }
    await st.save().catch((e) => plog.error({ err: messageOf(e) }, "claims state write after preserve failed"));
    return;
  }

  let outcome;
  try {
    outcome = await core.release(row);
  } catch (e) {
    throw new ProviderError("release-failed", `releasing sandbox ${row.id} for ${key} failed: ${messageOf(e)}`, {
      pod: key,
      claimId: row.id,
    }, { cause: e });
  }
  if (st.drop(key, row.id) && !isStale(core, pod)) st.pods.delete(key);
  plog.info({ reason: verdict.reason, outcome }, "pod deleted; sandbox released");
  await st.save().catch((e) => plog.error({ err: messageOf(e) }, "claims state write after release failed"));
}

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
