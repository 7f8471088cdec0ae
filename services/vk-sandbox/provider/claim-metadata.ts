// The sandboxd claim metadata vk-sandbox stamps on every claim it makes (sandboxd.md §3.1, §5.1).
//
// Why: a claim is delivered by sandboxd before our claims table records it. A crash in that window leaves a
// sandbox whose token exists only in sandboxd. claim_ref alone cannot say it is ours: it is `<ns>/<name>`,
// which the aggregated apiserver and other nodes' daemons send too. The metadata is immutable and echoed in
// every `GET /v1/sandboxes` row, so a listing can tell "delivered to this node's vk-sandbox for this Pod" and
// the startup verification can finish the interrupted write (verifier.ts, recovery.ts).
//
// The key names live in shared/sandboxd/metadata.ts (the aggregated apiserver reads the Pod UID stamp). Values follow the node's rules (value ≤ 512 B printable UTF-8; node names,
// UIDs and the authority UID always fit).
import type { V1Pod } from "@kubernetes/client-node";
import { AUTHORITY_METADATA_KEY, NODE_METADATA_KEY, POD_UID_METADATA_KEY, type SandboxRow } from "#shared/sandboxd/index.ts";
import { authorityOf } from "./ownership.ts";
import { podUID } from "./pod-contract.ts";

/** The vk-sandbox node (`--node-name`) that made the claim. Recovery only ever considers its own node's claims. */
export const METADATA_NODE = NODE_METADATA_KEY;
/** The UID of the Pod the claim was made for: the recovered row's `podUID`, so that Pod adopts it. */
export const METADATA_POD_UID = POD_UID_METADATA_KEY;
/** `authorityOf(pod)` at claim time: the recovered row's `authority` (adoption rule §5.3). */
export const METADATA_AUTHORITY = AUTHORITY_METADATA_KEY;

/** The metadata of a claim made by node `nodeName` for `pod`. */
export function claimMetadata(nodeName: string, pod: V1Pod): Record<string, string> {
  return {
    [METADATA_NODE]: nodeName,
    [METADATA_POD_UID]: podUID(pod),
    [METADATA_AUTHORITY]: authorityOf(pod),
  };
}

/**
 * True when a listed row can only have been claimed by vk-sandbox on node `nodeName`: it carries this node's stamp
 * AND was claimed with the root token (sandboxd omits `tenant` only for root's claims). The metadata alone proves
 * nothing: any tenant token may claim with a forged `vk-sandbox.*` map (claim-path leak review, case 3), and this
 * daemon claims with the node's root token, never a tenant's.
 */
export function claimedByNode(row: SandboxRow, nodeName: string): boolean {
  return row.metadata?.[METADATA_NODE] === nodeName && !row.tenant;
}

/** True when `row` is this node's root claim made for the Pod with UID `podUid` (a lost reply's own VM). */
export function claimedForPod(row: SandboxRow, nodeName: string, podUid: string): boolean {
  return claimedByNode(row, nodeName) && podUid !== "" && row.metadata?.[METADATA_POD_UID] === podUid;
}

/**
 * The row fields a recovered claim takes from the metadata. Its authority is the Pod UID itself, not the stamped
 * authority: a recovered row is adopted only by the very Pod it was claimed for (adoption matches podUID, or the
 * authority against authorityOf(pod), which is never another Pod's UID). A stamped owner UID would let any Pod of
 * that owner adopt it. Empty when the stamp names no Pod.
 */
export function recordedOwnership(row: SandboxRow): { podUID: string; authority: string } {
  const podUID = row.metadata?.[METADATA_POD_UID] ?? "";
  return { podUID, authority: podUID };
}
