// §3.4: the final delete. Every Pod deletion ends here, which is why RBAC grants `pods delete`.
// Key `<namespace>/<name>/<uid>`: the UID pins the generation, so a same-name replacement Pod is never removed
// by its predecessor's pending delete.
import type { Log } from "#shared/log/index.ts";
import type { ErrorClassifier, PodSource, PodWriter } from "./dependencies.ts";

export interface ForceDeleteDeps {
  pods: PodSource;
  api: PodWriter;
  errors: ErrorClassifier;
  log: Log;
  /**
   * Keys whose final delete the apiserver has already answered. The grace-0 delete itself updates the Pod (its
   * grace period becomes 0) before the watch reports it gone, and that update syncs the key again; without this
   * set the second sync sent a second DELETE, answered 404 (issue 13: each request once per deleted Pod).
   */
  done?: Set<string>;
}

export async function forceDeletePod(key: string, d: ForceDeleteDeps): Promise<void> {
  const cut = key.lastIndexOf("/");
  const podKey = key.slice(0, cut);
  const uid = key.slice(cut + 1);
  if (d.done?.has(key)) return;
  const cached = d.pods.get(podKey);
  if (!cached || cached.metadata?.uid !== uid) return;
  const [namespace, name] = [cached.metadata.namespace ?? "", cached.metadata.name ?? ""];
  try {
    await d.api.forceDelete(namespace, name, uid);
    d.done?.add(key);
    d.log.debug({ pod: podKey, uid }, "pod force-deleted");
  } catch (err) {
    // Gone already, or the UID precondition failed (a newer Pod owns the name): either way this one is done.
    if (d.errors.isNotFound(err) || d.errors.isConflict(err)) {
      d.done?.add(key);
      return;
    }
    throw err;
  }
}
