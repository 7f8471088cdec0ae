// Lease watch (§5.8), every 30 s. Leases are fixed at claim time and never renewed here; sandboxd reaps
// at the deadline (and an archive lifecycle may move it). Once a Running row's cached deadline passes, a
// listing decides: still listed -> adopt the listed deadline (in memory until the next write); confirmed
// absent -> push the lease-expired status. A failed listing publishes nothing: an outage is not an expiry.
//
// Beyond upstream (issue 7 case 11): a sandbox that vanishes BEFORE its deadline (an operator deleted it, its node
// failed) used to stay Running until the cached 24 h deadline. The same listing watches every settled row that
// serves a Pod: when two consecutive successful listings lack its sandbox, the Pod goes Failed/SandboxLost with a
// Warning event naming the id, and the row is dropped (nothing is left to release). A failed listing neither
// counts nor resets. Archived and hibernated sandboxes are still listed, so they stay.
import type { Core } from "./core.ts";
import { errorMessage } from "#shared/log/index.ts";
import { byId, listedDeadline } from "./listing.ts";
import { expiredStatus, lostMessage, lostStatus, pastDeadline, podWithStatus, REASON_SANDBOX_LOST } from "./status.ts";

/** Consecutive successful listings that must lack a sandbox before its Pod is reported lost. */
export const LOST_AFTER_LISTINGS = 2;

export async function leaseWatchTick(core: Core): Promise<void> {
  const { st, log } = core;
  const now = core.now();
  const candidates: Array<readonly [string, string]> = [];
  const watched: Array<readonly [string, string]> = [];
  for (const [key, c] of st.claims) {
    if (!st.settled(key) || !st.pods.has(key)) continue;
    if (pastDeadline(c, now)) candidates.push([key, c.id]);
    else watched.push([key, c.id]);
  }
  // Forget misses of rows no longer watched (released, adopted elsewhere, dropped).
  const ids = new Set(watched.map(([, id]) => id));
  for (const id of st.missing.keys()) if (!ids.has(id)) st.missing.delete(id);
  if (candidates.length === 0 && watched.length === 0) return;
  let listing;
  try {
    listing = byId(await core.lister.list());
  } catch (e) {
    log.warn({ err: errorMessage(e), candidates: candidates.length }, "lease watch: sandboxd listing failed; publishing nothing");
    return;
  }
  for (const [key, id] of candidates) {
    const row = listing.get(id);
    if (row) {
      const deadline = listedDeadline(row);
      st.update(key, id, (c) => (c.deadline === deadline ? c : { ...c, deadline }));
      continue;
    }
    const claim = st.claims.get(key);
    const pod = st.pods.get(key);
    if (!claim || claim.id !== id || !pod) continue;
    log.warn({ pod: key, claimId: id }, "sandbox lease expired and no longer listed; pod failed");
    core.push(podWithStatus(pod, claim, expiredStatus(pod, claim)));
  }
  let dropped = false;
  for (const [key, id] of watched) {
    if (listing.has(id)) {
      st.missing.delete(id);
      continue;
    }
    const misses = (st.missing.get(id) ?? 0) + 1;
    st.missing.set(id, misses);
    if (misses < LOST_AFTER_LISTINGS) continue;
    const claim = st.claims.get(key);
    const pod = st.pods.get(key);
    if (!claim || claim.id !== id || !pod || !st.settled(key)) continue;
    log.warn({ pod: key, claimId: id, listings: misses }, "sandbox no longer listed before its deadline; pod failed as SandboxLost, row dropped");
    core.push(podWithStatus(pod, claim, lostStatus(pod, claim, now)));
    core.warning(pod, REASON_SANDBOX_LOST, lostMessage(claim));
    st.drop(key, id);
    st.missing.delete(id);
    dropped = true;
  }
  if (dropped) await st.save().catch((e) => log.error({ err: errorMessage(e) }, "claims state write after a lost sandbox failed"));
}
