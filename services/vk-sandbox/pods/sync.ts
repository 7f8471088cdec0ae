// §3.3: the sync queue's handler, steps 1–8, for one pod key. Step 6 (container env resolution) is skipped on
// purpose: microVM Pods never consume container env, so the daemon runs no Secret/ConfigMap/Service informers
// and a Pod referencing a missing ConfigMap is served like any other (docs/decisions.md#no-env-resolution).
import type { V1Pod } from "@kubernetes/client-node";
import type { EventRecorder } from "#shared/kube/index.ts";
import type { PodLifecycleProvider } from "./lifecycle-provider.ts";
import { errorMessage, type Log } from "#shared/log/index.ts";
import type { PodSource, PodWriter } from "./dependencies.ts";
import { effectivelyEqual, isTerminal, noContainerRunning, providerFieldsEqual } from "./compare.ts";
import { podKey, splitKey } from "#shared/kube/index.ts";

export interface SyncState {
  /** The last Pod the provider accepted per key; an effectively equal update is a no-op (step 3). */
  lastHandled: Map<string, V1Pod>;
  /** The object of each Pod deleted from the cache, until its deletion has been handed to the provider. */
  deleted: Map<string, V1Pod>;
}

export interface SyncDeps {
  provider: PodLifecycleProvider;
  pods: PodSource;
  api: PodWriter;
  /** Normal events may be held back until the Pod's pending status write lands (controller.ts). */
  events: Pick<EventRecorder, "normal" | "warning">;
  log: Log;
  isTransient: (err: unknown) => boolean;
  state: SyncState;
  forceDeleteNow(key: string): void;
  forceDeleteAfter(key: string, ms: number): void;
}

export async function syncPod(key: string, d: SyncDeps): Promise<void> {
  const [namespace, name] = splitKey(key);
  const pod = d.pods.get(key);

  // 1. Gone from the cache: let the provider decide about what it stored (release versus preserve). With no
  // stored Pod (a restart while sandboxd was down leaves rows quarantined and unadopted) the deleted object
  // itself goes to the provider, which acts only on a row that belongs to it. A failure (sandboxd down) keeps
  // the object for the retry.
  if (!pod) {
    const last = d.state.lastHandled.get(key);
    const deleted = d.state.deleted.get(key);
    // Step 4 already handed this very deletion to the provider: do not ask twice.
    const handedOver = !!last?.metadata?.deletionTimestamp && !!deleted && last.metadata?.uid === deleted.metadata?.uid;
    d.state.lastHandled.delete(key);
    const gone = d.provider.getPod(namespace, name) ?? (handedOver ? undefined : deleted);
    if (gone) await d.provider.deletePod(gone);
    d.state.deleted.delete(key);
    return;
  }
  const uid = pod.metadata?.uid ?? "";

  // 2. Being deleted and nothing runs: no provider call, straight to the final delete.
  if (pod.metadata?.deletionTimestamp && noContainerRunning(pod)) {
    d.forceDeleteNow(`${key}/${uid}`);
    return;
  }

  // 2b. Same name, new UID: the Pod the provider holds was deleted and recreated before this sync ran, so no
  // sync ever saw its deletion. Run that deletion first, with the delete authorization on the stored Pod (release
  // or preserve), then serve the new Pod as a create. Without this the provider ignores the new Pod as a stale
  // update forever, and the old Pod's VM is never released.
  const stored = d.provider.getPod(namespace, name);
  if (stored && (stored.metadata?.uid ?? "") !== uid) {
    d.log.info({ pod: key, oldUid: stored.metadata?.uid, uid }, "pod replaced under the same name; deleting the stored one first");
    await d.provider.deletePod(stored);
    d.state.lastHandled.delete(key);
  }

  // 3. Nothing the provider cares about changed since the last time it accepted this Pod.
  const last = d.state.lastHandled.get(key);
  if (last && effectivelyEqual(last, pod)) return;

  // 4. Being deleted while it runs: provider delete, then the final delete after the grace period.
  if (pod.metadata?.deletionTimestamp) {
    // The provider already took this very Pod's deletion (a later update, such as the grace period our own final
    // delete sets to 0, changes nothing for it): asking again would repeat the release call and its event (an
    // extra event PATCH per deleted Pod). A shortened grace period only brings the final delete forward.
    if (last?.metadata?.deletionTimestamp && last.metadata.uid === uid) {
      d.state.lastHandled.set(key, pod);
      d.forceDeleteAfter(`${key}/${uid}`, Math.max(0, (pod.metadata.deletionGracePeriodSeconds ?? 0) * 1000));
      return;
    }
    try {
      await d.provider.deletePod(pod);
    } catch (err) {
      d.events.warning(pod, "ProviderDeleteFailed", errorMessage(err));
      throw err;
    }
    d.events.normal(pod, "ProviderDeleteSuccess", "Delete pod in provider successfully");
    d.state.lastHandled.set(key, pod);
    const graceMs = Math.max(0, (pod.metadata.deletionGracePeriodSeconds ?? 0) * 1000);
    d.forceDeleteAfter(`${key}/${uid}`, graceMs);
    return;
  }

  // 5. Terminal pods are never handed to the provider again.
  if (isTerminal(pod)) return;

  // 7. Create or update.
  const existing = d.provider.getPod(namespace, name);
  const creating = !existing;
  try {
    if (creating) {
      await d.provider.createPod(pod);
      d.events.normal(pod, "ProviderCreateSuccess", "Create pod in provider successfully");
    } else if (!providerFieldsEqual(existing, pod)) {
      await d.provider.updatePod(pod);
      d.events.normal(pod, "ProviderUpdateSuccess", "Update pod in provider successfully");
    }
  } catch (err) {
    d.events.warning(pod, creating ? "ProviderCreateFailed" : "ProviderUpdateFailed", errorMessage(err));
    await markProviderFailed(pod, err, d);
    throw err;
  }
  d.state.lastHandled.set(key, pod);
}

/**
 * 8. Record the failure on the Pod, without a precondition: Pending, or Failed under restartPolicy Never
 * (terminal, so such Pods are not retried).
 *
 * Exception (docs/decisions.md#outage-never-moves-a-pod): a transient error — the provider's `transient` flag: sandboxd could not be
 * read while the key holds a claim — is not evidence about the sandbox. The Pod's status is left as it is
 * (so a Running Pod stays Running and a restartPolicy-Never Pod is never made terminal by an outage); the
 * sync is only requeued. Status changes only on evidence.
 */
async function markProviderFailed(pod: V1Pod, err: unknown, d: SyncDeps): Promise<void> {
  if (d.isTransient(err)) {
    d.log.info({ pod: podKey(pod), err: errorMessage(err) }, "sandboxd unavailable; pod status left unchanged");
    return;
  }
  const terminal = pod.spec?.restartPolicy === "Never";
  const { resourceVersion: _rv, managedFields: _mf, ...metadata } = pod.metadata ?? {};
  const body: V1Pod = {
    ...pod,
    metadata,
    status: { ...pod.status, phase: terminal ? "Failed" : "Pending", reason: "ProviderFailed", message: errorMessage(err) },
  };
  try {
    await d.api.updateStatus(body);
  } catch (e) {
    d.log.warn({ pod: podKey(pod), err: errorMessage(e) }, "could not record provider failure on the pod");
  }
}
