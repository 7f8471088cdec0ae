// CreatePod (§5.2), in order: runtime check, quarantine, the recovery gate, past deadline, adoption,
// stranded tentative claim, annotations, the claim, then durability before visibility.
//
// Durable before visible: a claim is reported Running only after a state write containing its row has
// landed. If the write fails the new sandbox is released at once (it exists only in our memory, and a
// restart would leak it); if that release fails too, the row stays tentative in memory and the next sync of
// the Pod (UpdatePod -> CreatePod, step 5) releases it before claiming again.
import type { V1Pod } from "@kubernetes/client-node";
import { SandboxdAmbiguousClaim, SandboxdRedirect } from "#shared/sandboxd/index.ts";
import type { ClaimReply, ClaimRequest } from "#shared/sandboxd/index.ts";
import type { Claim, OwnerRef } from "../claims/index.ts";
import { floorToSecond } from "#shared/clock/index.ts";
import type { Core } from "./core.ts";
import { errorMessage } from "#shared/log/index.ts";
import { ProviderError } from "./errors.ts";
import { byId, listedDeadline, wireDeadline } from "./listing.ts";
import { adoptable, authorityOf, ownerRefOf } from "./ownership.ts";
import { claimMetadata } from "./claim-metadata.ts";
import { reconcileLostClaim } from "./lost-reply.ts";
import { checkRuntime, claimRequestFor, controllerRef, podUID, withClaimId } from "./pod-contract.ts";
import { podKey } from "#shared/kube/index.ts";
import type { Verifier } from "./verifier.ts";
import { pastDeadline, podWithStatus, runningStatus } from "./status.ts";

export async function createPod(core: Core, verifier: Verifier, pod: V1Pod): Promise<void> {
  const { st, log } = core;
  const key = podKey(pod);
  const plog = log.child({ pod: key });

  // 1. Before anything else, adoption included.
  checkRuntime(pod);

  // 2. A row loaded from disk is never claimed over until sandboxd has vouched for or against it.
  if (st.quarantined.has(key)) {
    const ok = await verifier.verifyOnce();
    if (!ok && st.quarantined.has(key)) {
      throw new ProviderError("sandboxd-unavailable", `cannot verify the stored claim for ${key}: sandboxd listing failed`, {
        pod: key,
        claimId: st.claims.get(key)?.id,
      }, { transient: true });
    }
  }

  // 2b. The recovery gate (verifier.ts). A claim sandboxd delivered before a crash, whose row was never
  // written, is found and recorded only by a verification listing. Until a listing has ruled such a claim out
  // for this key, run a pass now: it may record that claim, which step 4 then adopts instead of claiming.
  if (!verifier.claimAllowed(key)) await verifier.verifyOnce();

  // 3. Past its cached deadline: confirm with a listing before adopting or claiming over it.
  let row = st.claims.get(key);
  if (row && st.settled(key) && pastDeadline(row, core.now())) {
    const held = row;
    let listing;
    try {
      listing = byId(await core.lister.list());
    } catch (e) {
      throw new ProviderError(
        "sandboxd-unavailable",
        `claim ${held.id} for ${key} is past its deadline and sandboxd listing failed: ${errorMessage(e)}`,
        { pod: key, claimId: held.id },
        { cause: e, transient: true },
      );
    }
    const listed = listing.get(held.id);
    if (listed) {
      st.update(key, held.id, (c) => ({ ...c, deadline: listedDeadline(listed) }));
    } else if (st.drop(key, held.id)) {
      plog.info({ claimId: held.id }, "claim past its deadline is no longer listed; dropping the row");
    }
  }

  // 4. A settled row: adopt it, or detach it for release and claim fresh.
  row = st.claims.get(key);
  if (row && st.settled(key)) {
    if (adoptable(row, pod)) return adopt(core, pod, key, row);
    st.moveToReleasing(key, row.id);
    plog.info({ claimId: row.id }, "stored claim belongs to another owner; queued for release, claiming fresh");
  }

  // 5. A tentative row (its write and its undo both failed): end it before claiming again.
  row = st.claims.get(key);
  if (row && st.tentative.has(key)) {
    const stranded = row;
    try {
      await core.releaseDetached(stranded);
    } catch (e) {
      throw new ProviderError(
        "release-failed",
        `stranded claim ${stranded.id} for ${key} could not be released: ${errorMessage(e)}`,
        { pod: key, claimId: stranded.id },
        { cause: e },
      );
    }
    if (st.drop(key, stranded.id)) st.pods.delete(key);
    plog.info({ claimId: stranded.id }, "stranded tentative claim released");
  }

  // 6–7. Annotations, then one claim; no provider-side retry (the controller backs off).
  // The metadata names this node and the Pod, so a claim delivered just before a crash is recognisably ours.
  const req = { ...claimRequestFor(pod), metadata: claimMetadata(core.nodeName, pod) };
  // Never claim while an unrecorded claim for this key may exist (sandboxd unlisted since startup, or its
  // recovery still pending): that is the second sandbox the gate exists to prevent. Checked in the same turn
  // the key is marked claiming, so a verification pass sees either the gate closed or the claim in flight.
  if (!verifier.claimAllowed(key)) {
    throw new ProviderError(
      "sandboxd-unavailable",
      `cannot claim for ${key} yet: no sandboxd listing has ruled out an unrecorded claim of this node for it`,
      { pod: key },
      { transient: true },
    );
  }
  st.claiming.add(key);
  let reply;
  try {
    reply = await claimHere(core, pod, req);
  } catch (e) {
    st.claiming.delete(key);
    throw e;
  }
  // Cleared in the same turn the row is set below (or the create fails): at every await, recovery sees this
  // claim either in flight or held by the row.
  st.claiming.delete(key);
  if (!reply.id) throw new ProviderError("claim-failed", `sandboxd handed out no sandbox for ${key}`, { pod: key });

  // 8. Record the row, tentative until its own write lands.
  const claimedAt = floorToSecond(core.now());
  const claim: Claim = {
    id: reply.id,
    token: reply.token,
    address: reply.owner_addr,
    podUID: podUID(pod),
    authority: authorityOf(pod),
    claimedAt,
    deadline: wireDeadline(reply.deadline),
    ...controllerOf(pod),
  };
  // Steps 3–5 leave the key free and nothing records a row under a claiming key. Were it not free, replacing
  // the row would drop its token: detach it for release instead (step 4's rule for a row not adopted).
  const displaced = st.claims.get(key);
  if (displaced && displaced.id !== claim.id) {
    st.moveToReleasing(key, displaced.id);
    plog.warn({ claimId: displaced.id }, "a row appeared under the key during the claim; queued for release");
  }
  st.claims.set(key, claim);
  st.tentative.add(key);
  st.pods.set(key, withClaimId(pod, claim.id));

  // 9. Durable before visible.
  try {
    await st.commitRow(claim.id);
  } catch (writeErr) {
    return undoClaim(core, key, claim, writeErr);
  }
  // The landed write cleared the tentative mark (state.ts); a concurrent release may have dropped the row.
  if (!st.holds(key, claim.id)) return;
  const stored = st.pods.get(key);
  // The push starts the status PUT within this turn (nothing on its way awaits: pods/controller.ts, shared/kube
  // client.ts), so the log line comes after it rather than in front of it.
  if (stored) core.push(podWithStatus(stored, claim, runningStatus(stored, claim)));
  plog.info({ claimId: claim.id }, "sandbox claimed");
}

/**
 * One claim at this node (§5.2 step 7, §6). A redirect is this node saying "no warm VM here": it is never
 * followed, because a VM claimed on a peer would have the peer's Pod IP and a release token this node's
 * sandboxd does not know (the release 404s, the row is dropped, the peer's VM runs to its lease end). It fails
 * the create as no warm capacity, and the controller retries with backoff. A lost reply is reconciled by this
 * node's own stamp (lost-reply.ts), never by claim_ref alone.
 */
async function claimHere(core: Core, pod: V1Pod, req: ClaimRequest): Promise<ClaimReply> {
  const key = podKey(pod);
  try {
    return await core.claimer.claim(req, { followRedirects: false, reconcile: false });
  } catch (e) {
    if (e instanceof SandboxdRedirect) {
      throw new ProviderError(
        "claim-failed",
        `no warm capacity for ${key} on this node: sandboxd redirected the claim to [${e.targets.join(", ")}], which this daemon never follows`,
        { pod: key },
        { cause: e },
      );
    }
    if (!(e instanceof SandboxdAmbiguousClaim)) {
      throw new ProviderError("claim-failed", `sandboxd claim for ${key} failed: ${errorMessage(e)}`, { pod: key }, { cause: e });
    }
    // Only rows that can carry this claim_ref matter: this key's own row and the releasing list.
    const known = new Set(core.st.releasing.map((r) => r.claim.id));
    const own = core.st.claims.get(key);
    if (own) known.add(own.id);
    const found = await reconcileLostClaim(core, pod, known);
    if (found.kind === "found") {
      core.log.warn({ pod: key, claimId: found.reply.id }, "claim reply lost; found this node's sandbox for the Pod by its stamp");
      return found.reply;
    }
    throw new ProviderError("claim-failed", `sandboxd claim for ${key} failed: ${errorMessage(e)}; ${found.why}`, { pod: key }, { cause: e });
  }
}

async function adopt(core: Core, pod: V1Pod, key: string, row: Claim): Promise<void> {
  const { st, log } = core;
  const now = floorToSecond(core.now());
  st.update(key, row.id, (c) => {
    const { owner: _dropped, controller: _previous, ...rest } = c;
    return { ...rest, podUID: podUID(pod), authority: authorityOf(pod), claimedAt: c.claimedAt || now, ...controllerOf(pod) };
  });
  const stored = withClaimId(pod, row.id);
  st.pods.set(key, stored);
  log.info({ pod: key, claimId: row.id }, "adopted stored claim");
  await st.save().catch((e) => log.error({ pod: key, err: errorMessage(e) }, "claims state write after adoption failed"));
  const current = st.claims.get(key);
  if (current && current.id === row.id) core.push(podWithStatus(stored, current, runningStatus(stored, current)));
}

async function undoClaim(core: Core, key: string, claim: Claim, writeErr: unknown): Promise<never> {
  const { st, log } = core;
  try {
    await core.releaseDetached(claim);
  } catch (releaseErr) {
    log.error({ pod: key, claimId: claim.id, err: errorMessage(releaseErr) }, "claim not persisted and its release failed; kept tentative");
    throw new ProviderError(
      "state-write-failed",
      `claims state write failed (${errorMessage(writeErr)}) and releasing sandbox ${claim.id} failed (${errorMessage(releaseErr)})`,
      { pod: key, claimId: claim.id },
      { cause: new AggregateError([writeErr, releaseErr]) },
    );
  }
  if (st.drop(key, claim.id)) st.pods.delete(key);
  log.warn({ pod: key, claimId: claim.id }, "claim not persisted; sandbox released");
  throw new ProviderError(
    "state-write-failed",
    `claims state write failed, sandbox ${claim.id} released: ${errorMessage(writeErr)}`,
    { pod: key, claimId: claim.id },
    { cause: writeErr },
  );
}

/** The row's `controller` member for a Pod with a controller owner; nothing for a bare Pod. */
function controllerOf(pod: V1Pod): { controller?: OwnerRef } {
  const ref = controllerRef(pod);
  return ref ? { controller: ownerRefOf(ref) } : {};
}
