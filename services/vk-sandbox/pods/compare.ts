// Pod comparisons the controller's decisions hang on (virtual-kubelet node/pod.go's podsEqual and
// podsEffectivelyEqual, in our own terms). Kept pure so the table tests can pin them.
import type { V1Pod } from "@kubernetes/client-node";

/** The spec and metadata fields a change in which is handed to the provider (§3.1 update filter, §3.3 step 7). */
export function providerFieldsEqual(a: V1Pod, b: V1Pod): boolean {
  return Bun.deepEquals(providerView(a), providerView(b));
}

function providerView(p: V1Pod) {
  return {
    containers: p.spec?.containers,
    initContainers: p.spec?.initContainers,
    ephemeralContainers: p.spec?.ephemeralContainers,
    activeDeadlineSeconds: p.spec?.activeDeadlineSeconds,
    tolerations: p.spec?.tolerations,
    labels: p.metadata?.labels ?? {},
    annotations: p.metadata?.annotations ?? {},
  };
}

/** The update-event filter: provider fields plus the deletion markers. */
export function updateNeedsSync(oldPod: V1Pod, newPod: V1Pod): boolean {
  if (!providerFieldsEqual(oldPod, newPod)) return true;
  return (
    oldPod.metadata?.deletionGracePeriodSeconds !== newPod.metadata?.deletionGracePeriodSeconds ||
    String(oldPod.metadata?.deletionTimestamp ?? "") !== String(newPod.metadata?.deletionTimestamp ?? "")
  );
}

/** Equal for the sync handler's skip (§3.3 step 3): everything but resourceVersion and status. */
export function effectivelyEqual(a: V1Pod, b: V1Pod): boolean {
  return Bun.deepEquals(comparable(a), comparable(b));
}

function comparable(p: V1Pod) {
  const { resourceVersion: _rv, managedFields: _mf, ...metadata } = p.metadata ?? {};
  return { metadata, spec: p.spec };
}

/**
 * Whether the live object still shows what the last push wrote (§3.1): phase, reason and every pushed
 * annotation and label. A subset check, because the apiserver fills fields of its own (qosClass, defaults) that
 * a whole-object comparison would read as drift forever.
 */
export function liveShowsPush(pushed: V1Pod, live: V1Pod): boolean {
  if (pushed.status?.phase !== live.status?.phase || (pushed.status?.reason ?? "") !== (live.status?.reason ?? "")) return false;
  const has = (want: Record<string, string> | undefined, got: Record<string, string> | undefined) =>
    Object.entries(want ?? {}).every(([k, v]) => got?.[k] === v);
  return has(pushed.metadata?.annotations, live.metadata?.annotations) && has(pushed.metadata?.labels, live.metadata?.labels);
}

export function isTerminal(pod: V1Pod | undefined): boolean {
  const phase = pod?.status?.phase;
  return phase === "Failed" || phase === "Succeeded";
}

/** No container status, or every one waiting or terminated (§3.3 step 2). */
export function noContainerRunning(pod: V1Pod): boolean {
  const all = [...(pod.status?.containerStatuses ?? []), ...(pod.status?.initContainerStatuses ?? [])];
  return all.every((c) => !c.state?.running);
}
