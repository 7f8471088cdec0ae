// Orphan scan (§5.11): an audit of sandboxes nobody holds, plus one repair the spec's audit lacks.
//
// It never releases or edits a row, and it never touches a sandbox someone else may own: an unclaimed sandbox may
// be another control plane's claim, or a user's; deciding that is an operator's job. It logs verdict changes
// only, so a steady state is quiet.
//
//   listed, held by no row and not releasing, with claim_ref -> external (someone else's claim)
//   listed, held by no row and not releasing, no claim_ref   -> orphan
//   held by a row but not listed                             -> stale
//
// The repair (issue 7 case 6): a claim of THIS node that no row holds. A cold boot may take 90 s against the
// claim's 10 s budget, so sandboxd can deliver a VM after the create gave up on it, and a lost reply may not be
// listed yet when it is looked for (lost-reply.ts). Such a sandbox carries this node's stamp and was claimed with
// the root token (claim-metadata.ts), so it is provably ours, and only we hold a way to end it:
//   its Pod (the stamped UID) still waits for a sandbox, the key holds no row -> adopt: record it for that
//     Pod (recovery.ts, exactly as a crash recovery) and ask for a sync of the key, which adopts the row
//   otherwise (the Pod got another sandbox, or is gone)                       -> release it with the root token
// A key with a claim in flight, or whose startup recovery has not ruled out unrecorded claims yet, is left to
// the next scan: the claim's own create or the verification pass is about to decide it.
import type { SandboxRow } from "#shared/sandboxd/index.ts";
import { claimedByNode, recordedOwnership } from "./claim-metadata.ts";
import type { Core } from "./core.ts";
import { errorMessage } from "#shared/log/index.ts";
import type { Verifier } from "./verifier.ts";
import { AddressOnce, recoverClaim } from "./recovery.ts";
import type { OrphanVerdict } from "./state.ts";

export async function orphanAuditTick(core: Core, verifier: Verifier): Promise<void> {
  const { st, log } = core;
  let rows;
  try {
    rows = await core.lister.list();
  } catch (e) {
    // A failed list is not an empty list: without this, every row would read as stale.
    log.warn({ err: errorMessage(e) }, "orphan scan: sandboxd listing failed; cycle skipped");
    return;
  }
  // Held and releasing ids as sets, read once: a per-row scan of the table made each scan O(rows x claims),
  // which at 10,000 Pods was a fifth of the daemon's CPU (docs/performance.md, Throughput).
  const heldIds = new Set<string>();
  for (const c of st.claims.values()) heldIds.add(c.id);
  const releasingIds = new Set(st.releasing.map((e) => e.claim.id));
  const settled = await settleUnheldClaims(
    core,
    verifier,
    rows.filter((r) => claimedByNode(r, core.nodeName) && !heldIds.has(r.id) && !releasingIds.has(r.id)),
  );
  // Read again: settling awaited, so the table may have changed meanwhile.
  const held = new Map<string, string>();
  for (const [key, c] of st.claims) held.set(c.id, key);
  const releasing = new Set(st.releasing.map((e) => e.claim.id));
  const listed = new Set<string>();
  const verdicts = new Map<string, OrphanVerdict>();
  const detail = new Map<string, Record<string, string>>();
  for (const r of rows) {
    listed.add(r.id);
    if (held.has(r.id) || releasing.has(r.id) || settled.has(r.id)) continue;
    // Ours but not settled (no way to read or end it: an open node, a key still deciding): reported as before.
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

/**
 * Adopt (for a waiting Pod) or release (root token) each claim of this node that no row holds. Returns the ids it
 * settled; the rest are audited as before.
 */
async function settleUnheldClaims(core: Core, verifier: Verifier, rows: SandboxRow[]): Promise<Set<string>> {
  const { st, log } = core;
  const address = new AddressOnce(core);
  const settled = new Set<string>();
  let recorded = false;
  for (const row of rows) {
    const key = row.claim_ref ?? "";
    const ctx = { sandboxId: row.id, pod: key || undefined };
    if (key && (st.claiming.has(key) || !verifier.claimAllowed(key))) continue;
    // Re-check after the awaits of earlier rows: the table may have moved on.
    if ([...st.claims.values()].some((c) => c.id === row.id) || st.releasing.some((e) => e.claim.id === row.id)) continue;
    const { podUID } = recordedOwnership(row);
    if (key && podUID && st.waiting.get(key) === podUID && !st.claims.has(key)) {
      const outcome = await recoverClaim(core, { key, row }, address);
      if (outcome.kind === "recorded") {
        recorded = true;
        settled.add(row.id);
        log.warn(ctx, "orphan scan: a claim of this node landed after its request gave up; recorded for the Pod still waiting for it");
        core.retry(key);
        continue;
      }
      if (outcome.kind === "queued-for-release") {
        recorded = true; // the key holds another row meanwhile: written, then drained by the re-check
        settled.add(row.id);
        continue;
      }
      log.warn({ ...ctx, why: outcome.why }, "orphan scan: a late claim of this node could not be recorded yet");
      continue;
    }
    try {
      // A 404 for a sandbox just listed means our token is not the root token (an open node, a tenant token):
      // nothing was released, and the audit reports it as before.
      if ((await core.releaser.release(row.id, {})) === "released") {
        settled.add(row.id);
        log.warn(ctx, "orphan scan: a claim of this node that no row holds and no waiting Pod wants; released with the node token");
      }
    } catch (e) {
      log.warn({ ...ctx, err: errorMessage(e) }, "orphan scan: releasing an unheld claim of this node failed; retrying next scan");
    }
  }
  if (recorded) await st.save().catch((e) => log.error({ err: errorMessage(e) }, "claims state write after the orphan scan failed"));
  return settled;
}
