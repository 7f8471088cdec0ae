// Rows whose Pod vanished while the daemon was down (docs/scenarios.md, "Pods deleted while the daemon was
// down"). The dangling pass (§3.6) only sees Pods in the provider's table, which is empty at process start, so a
// Pod deleted while no daemon ran never reaches DeletePod and its row would hold the VM until its lease ended.
//
// Run once, after the pod informer synced (a successful list: an apiserver that cannot be read never gets here,
// docs/decisions.md#outage-never-moves-a-pod). For each row whose key the synced cache lacks, do what DeletePod
// (§5.5) would have done with that Pod:
// - bare Pod (authority = the Pod's own UID): release, through the persisted releasing list;
// - owned Pod with its controller reference recorded: preserve for that owner, so the owner re-check releases
//   the VM once the owner is gone (and a replacement Pod of the owner adopts it meanwhile);
// - a row already preserved (`owner` set) is the re-check's; an owned row from an older table (no controller
//   recorded) or a legacy row without authority is kept and logged: its owner cannot be read from a UID alone.
import type { Core } from "./core.ts";
import type { Claim } from "../claims/index.ts";
import type { KeyedMutex } from "./keyed-mutex.ts";
import { errorMessage } from "#shared/log/index.ts";
import { drainReleasing } from "./owner-recheck.ts";

type Judgement = "release" | "preserve" | "keep";

function judge(row: Claim): Judgement {
  if (row.owner || row.authority === "") return "keep";
  if (row.authority === row.podUID) return "release";
  return row.controller && row.controller.uid === row.authority ? "preserve" : "keep";
}

/**
 * Judge every row whose Pod the synced cache lacks; start a drain of the releasing list when something was
 * queued (persisted before any release, so the stored credential survives a crash, and a failing release is
 * retried by the owner re-check tick). The drain is not awaited: startup must not wait on sandboxd.
 */
export async function releaseAbsentPods(core: Core, locks: KeyedMutex, inCache: (key: string) => boolean): Promise<void> {
  const { st, log } = core;
  let released = 0;
  let preserved = 0;
  for (const [key, row] of [...st.claims]) {
    if (inCache(key) || st.pods.has(key) || st.tentative.has(key)) continue;
    const verdict = judge(row);
    if (verdict === "keep") {
      if (!row.owner) log.info({ pod: key, claimId: row.id }, "pod absent at startup, owner not recorded: claim kept");
      continue;
    }
    // Under the key's lock, re-checked: a Pod of this key that arrived meanwhile is served first.
    const done = await locks.run(key, async () => {
      if (inCache(key) || st.pods.has(key) || st.claims.get(key)?.id !== row.id) return false;
      if (verdict === "release") return st.moveToReleasing(key, row.id);
      return st.update(key, row.id, (c) => ({ ...c, owner: c.controller }));
    });
    if (!done) continue;
    if (verdict === "release") released++;
    else preserved++;
    log.info(
      { pod: key, claimId: row.id },
      verdict === "release"
        ? "bare pod deleted while the daemon was down: claim queued for release"
        : "owned pod deleted while the daemon was down: claim preserved for its owner's re-check",
    );
  }
  if (preserved > 0) await st.save().catch((e) => log.error({ err: errorMessage(e) }, "claims state write after preserving absent pods failed"));
  if (released > 0) void drainReleasing(core).catch((e) => log.warn({ err: errorMessage(e) }, "release of pods deleted while down failed"));
}
