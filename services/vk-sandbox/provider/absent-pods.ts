// Rows whose Pod vanished while the daemon was down (docs/scenarios.md, "Pods deleted while the daemon was
// down"). The dangling pass (§3.6) only sees Pods in the provider's table, which is empty at process start, so a
// bare Pod deleted while no daemon ran never reaches DeletePod and its row would hold the VM until its lease ended.
//
// Run once, after the pod informer synced (a successful list: an apiserver that cannot be read never gets here,
// docs/decisions.md#outage-never-moves-a-pod). A row is released only when the synced cache lacks its key and
// DeletePod would have released it: a bare Pod (authority = the Pod's own UID). A preserved row (`owner` set) is
// the owner re-check's; an owned row without a recorded owner, or a legacy row without authority, is kept: the
// owner cannot be read from a UID alone, and keeping is the safe side.
import type { Core } from "./core.ts";
import type { KeyedMutex } from "./keyed-mutex.ts";
import { drainReleasing } from "./owner-recheck.ts";

/** True for a row claimed by (or adopted by) a Pod without a controller owner. */
function bareRow(row: { authority: string; podUID: string; owner?: unknown }): boolean {
  return !row.owner && row.authority !== "" && row.authority === row.podUID;
}

/**
 * Queue for release every bare row whose Pod the synced cache lacks, then start a drain of the releasing list
 * (persisted before any release, so the stored credential survives a crash, and a failing release is retried by
 * the owner re-check tick).
 */
export async function releaseAbsentPods(core: Core, locks: KeyedMutex, inCache: (key: string) => boolean): Promise<void> {
  const { st, log } = core;
  let moved = 0;
  for (const [key, row] of [...st.claims]) {
    if (inCache(key) || st.pods.has(key) || st.tentative.has(key)) continue;
    if (!bareRow(row)) {
      if (!row.owner) log.info({ pod: key, claimId: row.id }, "pod absent at startup but owned (owner not recorded): claim kept");
      continue;
    }
    // Under the key's lock: a Pod of this key that arrived meanwhile (never adopting a bare row) is served first.
    const queued = await locks.run(key, async () =>
      !inCache(key) && !st.pods.has(key) && st.claims.get(key)?.id === row.id && st.moveToReleasing(key, row.id),
    );
    if (queued) {
      moved++;
      log.info({ pod: key, claimId: row.id }, "bare pod deleted while the daemon was down: claim queued for release");
    }
  }
  // Not awaited: startup must not wait on sandboxd (each release may take its 10 s timeout). A failed release
  // stays on the persisted list for the owner re-check tick.
  if (moved > 0) void drainReleasing(core).catch((e) => log.warn({ err: String(e) }, "release of pods deleted while down failed"));
}
