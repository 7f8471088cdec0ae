// Lease watch (spec §5.8), every 30 s. Leases are fixed at claim time and never renewed here; sandboxd reaps
// at the deadline (and an archive lifecycle may move it). Once a Running row's cached deadline passes, a
// listing decides: still listed -> adopt the listed deadline (in memory until the next write); confirmed
// absent -> push the lease-expired status. A failed listing publishes nothing: an outage is not an expiry.
import type { Core } from "./core.ts";
import { messageOf } from "./errors.ts";
import { byId, listedDeadline } from "./listing.ts";
import { expiredStatus, pastDeadline, podWithStatus } from "./status.ts";

export async function leaseWatchTick(core: Core): Promise<void> {
  const { st, log } = core;
  const now = core.now();
  const candidates: Array<readonly [string, string]> = [];
  for (const [key, c] of st.claims) {
    if (st.settled(key) && st.pods.has(key) && pastDeadline(c, now)) candidates.push([key, c.id]);
  }
  if (candidates.length === 0) return;
  let listing;
  try {
    listing = byId(await core.lister.list());
  } catch (e) {
    log.warn({ err: messageOf(e), candidates: candidates.length }, "lease watch: sandboxd listing failed; publishing nothing");
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
}
