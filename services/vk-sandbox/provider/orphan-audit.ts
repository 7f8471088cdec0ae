// Orphan scan (spec §5.11): audit only. It never releases and never edits a row: an unclaimed sandbox may be
// a claim whose state write is in flight, another control plane's claim, or a user's; deciding that is an
// operator's job. It logs verdict changes only, so a steady state is quiet.
//
//   listed, held by no row and not releasing, with claim_ref -> external (someone else's claim)
//   listed, held by no row and not releasing, no claim_ref   -> orphan
//   held by a row but not listed                             -> stale
import type { Core } from "./core.ts";
import { messageOf } from "./errors.ts";
import type { OrphanVerdict } from "./state.ts";

export async function orphanAuditTick(core: Core): Promise<void> {
  const { st, log } = core;
  let rows;
  try {
    rows = await core.lister.list();
  } catch (e) {
    // A failed list is not an empty list: without this, every row would read as stale.
    log.warn({ err: messageOf(e) }, "orphan scan: sandboxd listing failed; cycle skipped");
    return;
  }
  const held = new Map<string, string>();
  for (const [key, c] of st.claims) held.set(c.id, key);
  const releasing = new Set(st.releasing.map((e) => e.claim.id));
  const listed = new Set<string>();
  const verdicts = new Map<string, OrphanVerdict>();
  const detail = new Map<string, Record<string, string>>();
  for (const r of rows) {
    listed.add(r.id);
    if (held.has(r.id) || releasing.has(r.id)) continue;
    verdicts.set(r.id, r.claim_ref ? "external" : "orphan");
    detail.set(r.id, r.claim_ref ? { claimRef: r.claim_ref } : {});
  }
  for (const [id, key] of held) {
    if (!listed.has(id)) {
      verdicts.set(id, "stale");
      detail.set(id, { pod: key });
    }
  }
  for (const [id, verdict] of verdicts) {
    if (st.orphanVerdicts.get(id) === verdict) continue;
    log.warn({ sandboxId: id, verdict, ...detail.get(id) }, `orphan scan: sandbox ${id} is ${verdict}`);
  }
  for (const [id, was] of st.orphanVerdicts) {
    if (!verdicts.has(id)) log.info({ sandboxId: id, was }, `orphan scan: sandbox ${id} is no longer ${was}`);
  }
  st.orphanVerdicts = verdicts;
}
