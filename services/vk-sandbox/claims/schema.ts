// The claims table: the in-memory row type and the zod schema of the file at --state-path (§5.12, seed
// "state file"). The file holds release tokens, the only credential that can destroy the VMs this node
// delivered: treat it as a secret and never lose a row.
import { z } from "zod";
import { parseGoTime } from "#shared/clock/index.ts";

/** The Pod's controller ownerReference, as recorded when a Pod deletion preserved the claim. */
export interface OwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/**
 * One claim. Rows are immutable: a change replaces the object (`{...row, deadline}`), which lets the encoder
 * cache each row's JSON and lets every check-then-write compare ids without worrying about aliasing.
 */
export interface Claim {
  /** sandboxd claim id; the identity every ID-guarded write compares. */
  readonly id: string;
  /** Release credential. Never leaves the node, never logged, never put on a Pod. */
  readonly token: string;
  /** sandboxd `owner_addr` (host:port); its host becomes the Pod IP. */
  readonly address: string;
  /** UID of the Pod that holds the claim; lets the same Pod re-adopt after a restart. Always written. */
  readonly podUID: string;
  /** Controller-owner UID (or the bare Pod's own UID) at claim or adoption time; "" in older tables. */
  readonly authority: string;
  /** Epoch ms, whole seconds. Reported as the Pod's startTime, so it must never move. */
  readonly claimedAt: number;
  /** Cached lease end, epoch ms; 0 = unknown (older table), backfilled from a listing. */
  readonly deadline: number;
  /** Set while a Pod deletion preserved the claim for a live owner; cleared by an adopting Pod. */
  readonly owner?: OwnerRef;
  /**
   * The holding Pod's controller ownerReference at claim or adoption time (absent for a bare Pod and in older
   * tables). Lets the owner re-check judge an owned Pod deleted while the daemon was down (provider/absent-pods.ts).
   */
  readonly controller?: OwnerRef;
}

// Decoding mirrors Go's encoding/json on the original struct: a missing or null member is the zero value,
// unknown members are ignored, and only a member of the wrong type (or an unparsable time) is malformed.
const str = z.string().nullish().transform((s) => s ?? "");
const time = z
  .string()
  .nullish()
  .transform((s, ctx) => {
    if (s === undefined || s === null || s === "") return undefined;
    const t = parseGoTime(s);
    if (t === undefined) {
      ctx.addIssue({ code: "custom", message: `not an RFC 3339 time: ${JSON.stringify(s)}` });
      return z.NEVER;
    }
    return t === null ? undefined : t; // Go's zero time: unset
  });

export const OwnerRefFileSchema = z.object({
  apiVersion: str,
  kind: str,
  name: str,
  uid: str,
  controller: z.boolean().nullish(),
  blockOwnerDeletion: z.boolean().nullish(),
});

export const ClaimFileSchema = z.object({
  id: str,
  token: str,
  address: str,
  podUID: str,
  authority: str,
  claimedAt: time,
  deadline: time,
  owner: OwnerRefFileSchema.nullish(),
  controller: OwnerRefFileSchema.nullish(),
});

/** The whole file. `"claims": null` and a missing `claims` both mean an empty table. */
export const ClaimsFileSchema = z.object({
  claims: z.record(z.string(), ClaimFileSchema).nullish(),
  releasing: z.array(ClaimFileSchema).nullish(),
});

export type ClaimsFile = z.input<typeof ClaimsFileSchema>;
export type ClaimFileRow = z.output<typeof ClaimFileSchema>;

/** What the encoder writes: settled rows by pod key, plus claims detached from any key awaiting release. */
export interface TableSnapshot {
  claims: Iterable<readonly [string, Claim]>;
  releasing: Iterable<Claim>;
}
