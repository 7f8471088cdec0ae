// The stale-UID guard (§5.6): a request about a Pod whose key the pod table now holds under another UID is about
// a Pod that no longer exists (a replacement of the same name took its place), and must not touch the new one.
import type { V1Pod } from "@kubernetes/client-node";
import { podKey } from "#shared/kube/index.ts";
import type { Core } from "./core.ts";
import { podUID } from "./pod-contract.ts";

/** The pod table holds this key under a different UID: the request is about a Pod that no longer exists. */
export function isStale(core: Core, pod: V1Pod): boolean {
  const held = core.st.pods.get(podKey(pod));
  return held !== undefined && podUID(held) !== podUID(pod);
}
