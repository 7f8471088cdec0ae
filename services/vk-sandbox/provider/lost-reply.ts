// A claim whose reply was lost while this process lives (a timeout or reset after the request was sent, a 5xx
// that may have committed): find OUR sandbox, or conclude there is none yet.
//
// The shared client's own reconciliation matches rows by claim_ref and pool key. claim_ref is not unique: the
// aggregated apiserver sends `<ns>/<name>` too, and sandboxd never deduplicates it. Matching on it alone either
// adopts another party's VM (and later releases it when our bare Pod goes) or sees two candidates, gives up, and
// lets the next create claim again, leaking our first VM. So the provider claims with the client's
// reconciliation off and reconciles here on what only this daemon stamps: this node, the Pod's UID, and the root
// token (no tenant) — the same rule the startup recovery and the orphan audit use (claim-metadata.ts).
//
// Zero matches is not proof of "never delivered" (a cold claim may still be booting): the create fails, and a
// sandbox that lands later is taken care of by the orphan audit (orphan-audit.ts).
import type { V1Pod } from "@kubernetes/client-node";
import { type ClaimReply, GO_ZERO_TIME } from "#shared/sandboxd/index.ts";
import { claimedForPod } from "./claim-metadata.ts";
import type { Core } from "./core.ts";
import { errorMessage } from "#shared/log/index.ts";
import { podUID } from "./pod-contract.ts";
import { podKey } from "#shared/kube/index.ts";

export type LostReplyOutcome = { kind: "found"; reply: ClaimReply } | { kind: "none"; why: string };

export async function reconcileLostClaim(core: Core, pod: V1Pod, knownIds: ReadonlySet<string>): Promise<LostReplyOutcome> {
  const key = podKey(pod);
  const uid = podUID(pod);
  let rows;
  try {
    rows = await core.lister.list();
  } catch (e) {
    return { kind: "none", why: `sandboxd could not be listed to look for it: ${errorMessage(e)}` };
  }
  const ours = rows.filter((r) => r.claim_ref === key && claimedForPod(r, core.nodeName, uid) && !knownIds.has(r.id));
  if (ours.length === 0) return { kind: "none", why: "no sandbox of this node for this Pod is listed (yet)" };
  // Several can only be earlier lost replies for the same Pod: take one; the orphan audit releases the others.
  const row = ours[0]!;
  let token: string | undefined;
  let address: string;
  try {
    token = (await core.reader.get(row.id)).token;
    address = (await core.reader.info()).advertise_addr;
  } catch (e) {
    return { kind: "none", why: `sandbox ${row.id} is ours but could not be read back: ${errorMessage(e)}` };
  }
  if (!token) return { kind: "none", why: `sandbox ${row.id} is ours but sandboxd did not return its token (root token needed)` };
  return { kind: "found", reply: { id: row.id, token, deadline: row.deadline ?? GO_ZERO_TIME, owner_addr: address } };
}
