// DeletePod (§5.5), behind the stale-UID guard (§5.6, stale-uid.ts).
//
// Pod deletion alone is never VM authority: an eviction or a Node-NotReady storm deletes Pods whose owners
// still want their sandboxes, and a replacement Pod of the same name adopts the preserved claim. The verdict
// table lives in ownership.ts; this file applies it.
import type { V1Pod } from "@kubernetes/client-node";
import type { Core } from "./core.ts";
import { errorMessage } from "#shared/log/index.ts";
import { ProviderError } from "./errors.ts";
import { adoptable, authorizeRelease, ownerRefOf } from "./ownership.ts";
import { controllerRef, podUID } from "./pod-contract.ts";
import { podKey } from "#shared/kube/index.ts";
import { isStale } from "./stale-uid.ts";

export async function deletePod(core: Core, pod: V1Pod): Promise<void> {
  const { st, log } = core;
  const key = podKey(pod);
  if (isStale(core, pod)) {
    log.debug({ pod: key, uid: podUID(pod) }, "delete for a stale pod UID ignored");
    return;
  }
  // The Pod no longer waits for a sandbox (orphan-audit.ts adopts late claims only for waiting Pods).
  if (st.waiting.get(key) === podUID(pod)) st.waiting.delete(key);
  const row = st.claims.get(key);
  if (!row) {
    st.pods.delete(key);
    return;
  }
  // No stored Pod: the controller hands over the deleted object itself (a row loaded at startup, not adopted
  // yet). Act only on a row this Pod could have adopted; a preserved row (owner set) is the re-check's.
  if (!st.pods.has(key) && (row.owner || !adoptable(row, pod))) {
    log.debug({ pod: key, claimId: row.id }, "delete of a Pod that holds no stored entry and does not own the row: nothing to do");
    return;
  }
  const ref = controllerRef(pod);
  const owner = ref ? ownerRefOf(ref) : undefined;
  const verdict = await authorizeRelease(owner, pod.metadata?.namespace || "default", core.ownerReader);
  const plog = log.child({ pod: key, claimId: row.id });

  if (verdict.action === "preserve") {
    const recorded = owner !== undefined && st.update(key, row.id, (c) => ({ ...c, owner }));
    // The owner must be on disk before the pod entry goes: after a restart it is the only thing that lets the
    // owner re-check release this sandbox (a row without owner and without Pod is never looked at again). A
    // failed write therefore fails the delete and keeps the pod entry, so the controller's retry, which
    // reaches the provider through that entry, writes it again.
    try {
      await st.save();
    } catch (e) {
      plog.error({ err: errorMessage(e) }, "claims state write after preserve failed; the delete will be retried");
      throw new ProviderError("state-write-failed", `claim ${row.id} for ${key} preserved, but the claims state write failed: ${errorMessage(e)}`, {
        pod: key,
        claimId: row.id,
      }, { cause: e });
    }
    // A pod of this key that arrived meanwhile keeps its entry.
    if (!isStale(core, pod)) st.pods.delete(key);
    plog.info({ reason: verdict.reason }, recorded ? "pod deleted; claim preserved for its owner" : "pod deleted; claim preserved");
    return;
  }

  let outcome;
  try {
    outcome = await core.release(row);
  } catch (e) {
    throw new ProviderError("release-failed", `releasing sandbox ${row.id} for ${key} failed: ${errorMessage(e)}`, {
      pod: key,
      claimId: row.id,
    }, { cause: e });
  }
  if (st.drop(key, row.id) && !isStale(core, pod)) st.pods.delete(key);
  plog.info({ reason: verdict.reason, outcome }, "pod deleted; sandbox released");
  await st.save().catch((e) => plog.error({ err: errorMessage(e) }, "claims state write after release failed"));
}
