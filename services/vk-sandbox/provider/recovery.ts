// Recovery of claims sandboxd delivered but our claims table never recorded.
//
// The window: sandboxd answers `POST /v1/claim`, then the process dies (SIGKILL, OOM, power) before the state
// write lands. The sandbox is live and claimed for up to its 24 h lease, and its release token exists only in
// sandboxd. Claiming again for the Pod would leak that sandbox; forgetting it would lose its token.
//
// Recovery finishes the interrupted write. Every claim vk-sandbox makes carries `vk-sandbox.node=<this node>`
// in its metadata (claim-metadata.ts), so a verification listing (verifier.ts) can pick out rows that are
// ours and held by no claims row and no releasing entry. "Ours" also requires the root token's claim (no
// `tenant`): a tenant can forge the metadata, and its VM must never be recorded under a victim's Pod key.
// For each, the token is read back with `GET /v1/sandboxes/{id}` (root token only) and the claim is recorded as
// a settled row under its claim_ref, with podUID from the metadata and that same UID as its authority, so only
// the Pod the stamp names can adopt it. The existing
// flows then apply: the Pod's create adopts it (its UID matches), a deletion runs the normal authorization.
// If the key already holds a different row, the recovered claim is not ours to attach: it goes onto the
// releasing list (persisted before it is released, like every releasing entry).
//
// Only the caller (the verification pass) writes the table, once for the whole pass.
import type { SandboxDetail, SandboxRow } from "#shared/sandboxd/index.ts";
import { isNotFound, isSandboxdError } from "#shared/sandboxd/index.ts";
import type { Claim } from "../claims/index.ts";
import { floorToSecond } from "#shared/clock/index.ts";
import { claimedByNode, recordedOwnership } from "./claim-metadata.ts";
import type { Core } from "./core.ts";
import { errorMessage } from "#shared/log/index.ts";
import { listedDeadline, wireDeadline } from "./listing.ts";

/** A listed claim of this node that no row and no releasing entry holds. */
export interface Unrecorded {
  /** The pod key it was claimed for (its claim_ref); "" when the row has none. */
  key: string;
  row: SandboxRow;
}

/**
 * The unrecorded claims of this node in a listing. Synchronous on purpose: the verification pass marks their
 * keys as pending in the same turn the listing arrives, so no create can slip a fresh claim in between.
 */
export function unrecordedClaims(core: Core, rows: Iterable<SandboxRow>): Unrecorded[] {
  const { st } = core;
  const held = new Set<string>();
  for (const c of st.claims.values()) held.add(c.id);
  for (const e of st.releasing) held.add(e.claim.id);
  const out: Unrecorded[] = [];
  for (const row of rows) {
    if (!claimedByNode(row, core.nodeName) || held.has(row.id)) continue;
    out.push({ key: row.claim_ref ?? "", row });
  }
  return out;
}

export type RecoveryOutcome =
  /** Recorded as a settled row under its key. */
  | { kind: "recorded" }
  /** The key holds another row: queued for release (persist first, then release). */
  | { kind: "queued-for-release"; heldBy: string }
  /** Recorded meanwhile by someone else (a create whose reply arrived), or gone (404): nothing to do. */
  | { kind: "resolved"; why: string }
  /** Its token cannot be read (no root token, 401/403, an older node, no claim_ref): left to the orphan audit. */
  | { kind: "unrecoverable"; why: string }
  /** Try again on the next pass: sandboxd failed transiently, or (`inFlight`) a claim for the key is in flight. */
  | { kind: "retry"; why: string; inFlight?: boolean };

/** Reads `advertise_addr` at most once per pass, and only when a claim is actually being recorded. */
export class AddressOnce {
  private value: Promise<string> | undefined;
  constructor(private readonly core: Core) {}
  get(): Promise<string> {
    this.value ??= this.core.reader.info().then((i) => {
      if (!i.advertise_addr) throw new Error("sandboxd info carries no advertise_addr");
      return i.advertise_addr;
    });
    return this.value;
  }
}

export async function recoverClaim(core: Core, u: Unrecorded, address: AddressOnce): Promise<RecoveryOutcome> {
  const { st } = core;
  const { key, row } = u;
  if (!key) return { kind: "unrecoverable", why: "the listed row has no claim_ref to key it by" };
  if (!recordedOwnership(row).podUID) return { kind: "unrecoverable", why: "the listed row names no Pod UID to adopt it" };

  let detail: SandboxDetail;
  try {
    detail = await core.reader.get(row.id);
  } catch (e) {
    if (isNotFound(e)) return { kind: "resolved", why: "sandbox no longer exists" };
    // 401/403: our token is not the root token. route_not_found: an older node without GET by id (§9.8).
    // None of these improves by retrying; the orphan audit reports the sandbox as external.
    if (isSandboxdError(e) && (e.code === "unauthorized" || e.code === "forbidden" || e.code === "route_not_found")) {
      return { kind: "unrecoverable", why: `its token cannot be read: ${errorMessage(e)}` };
    }
    return { kind: "retry", why: `reading it back failed: ${errorMessage(e)}` };
  }
  // Only a root-token caller is shown the token; an open node never shows it.
  if (!detail.token) return { kind: "unrecoverable", why: "sandboxd did not return its token (root token needed)" };

  let addr: string;
  try {
    addr = await address.get();
  } catch (e) {
    return { kind: "retry", why: `sandboxd info failed: ${errorMessage(e)}` };
  }

  // Re-check after the awaits: the table may have moved on.
  if ([...st.claims.values()].some((c) => c.id === row.id) || st.releasing.some((e) => e.claim.id === row.id)) {
    return { kind: "resolved", why: "recorded meanwhile" };
  }
  // A create for this key is between its claim call and its row: recording now would let that row replace
  // ours (create.ts sets the key). Decide on the next pass, when the key's row is known.
  if (st.claiming.has(key)) return { kind: "retry", why: "a claim for the key is in flight", inFlight: true };

  // From the listed row, which unrecordedClaims vetted (this node's stamp, root's claim).
  const { podUID, authority } = recordedOwnership(row);
  const claim: Claim = {
    id: row.id,
    token: detail.token,
    address: addr,
    podUID,
    authority,
    claimedAt: wireDeadline(detail.claimed_at ?? row.claimed_at) || floorToSecond(core.now()),
    deadline: listedDeadline(detail),
  };
  const current = st.claims.get(key);
  if (current) {
    st.releasing.push({ claim, durable: false });
    return { kind: "queued-for-release", heldBy: current.id };
  }
  st.claims.set(key, claim);
  return { kind: "recorded" };
}
