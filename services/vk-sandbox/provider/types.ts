// What the provider consumes. Each sandboxd slice is its own interface so a test can fail one alone (a
// listing that fails while claims succeed is the case that matters most: a failed list is not an empty
// list). The wire types come from shared/sandboxd/schemas.ts, the one home of the sandboxd contract;
// shared/sandboxd/client.ts satisfies all four.
import type { Clock } from "#shared/clock/index.ts";
import type { V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { ClaimReply, ClaimRequest, SandboxDetail, SandboxRow } from "#shared/sandboxd/index.ts";
import type { ClaimsStore } from "../claims/index.ts";

/**
 * `POST /v1/claim`. Throws a shared/sandboxd error on 429, a redirect, non-2xx, transport failure, timeout. The
 * provider always asks for `followRedirects: false` (a redirect is no warm capacity here, never a claim on a
 * peer) and `reconcile: false` (a lost reply is reconciled by this node's stamp, lost-reply.ts): the client then
 * throws SandboxdRedirect and SandboxdAmbiguousClaim instead.
 */
export interface SandboxClaimer {
  claim(req: ClaimRequest, opts: { followRedirects: false; reconcile: false }): Promise<ClaimReply>;
}

/**
 * `POST /v1/sandboxes/{id}/release` with the claim's own token; 404 is "already-gone", not an error. No `token`:
 * the node (root) token, the operator path for a sandbox this daemon claimed but never recorded.
 */
export interface SandboxReleaser {
  release(id: string, opts: { token?: string }): Promise<"released" | "already-gone">;
}

/** `GET /v1/sandboxes`. Throws on any failure: it never answers an empty list for a node it could not read. */
export interface SandboxLister {
  list(): Promise<SandboxRow[]>;
}

/**
 * What recovery of a delivered-but-unrecorded claim reads (recovery.ts). Both calls are root-only on sandboxd.
 * `get`: `GET /v1/sandboxes/{id}`; the row carries the sandbox's own `token` only when we presented the root
 * token. `info`: `GET /v1/info`, whose `advertise_addr` is what a claim reply reports as `owner_addr`.
 */
export interface SandboxReader {
  get(id: string): Promise<SandboxDetail>;
  info(): Promise<{ advertise_addr: string }>;
}

/** The controller owner to read, with the resource already derived by the plural rule (ownership.ts). */
export interface OwnerTarget {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  /** "" for the core group. */
  group: string;
  version: string;
  /** Lower-cased plural: sandbox -> sandboxes, policy -> policies. */
  resource: string;
}

/** The parts of an owner object the delete-authorization table reads. */
export interface OwnerObject {
  metadata?: { uid?: string; deletionTimestamp?: unknown };
  status?: { conditions?: Array<{ type?: string; reason?: string }> };
}

export type OwnerLookup =
  | { outcome: "found"; object: OwnerObject }
  /** A 404 Status; `detailsName` is its `details.name`, which proves the object (not the route) is gone. */
  | { outcome: "not-found"; detailsName?: string }
  /** 403, 5xx, timeout, transport: says nothing about the owner. */
  | { outcome: "error"; error: unknown };

/**
 * GET the owner in the Pod's namespace, no resourceVersion (a fresh read). Wired to the kube client by
 * main; its RBAC grants get on the owner CR. Must not throw: classify into an OwnerLookup.
 */
export type OwnerReader = (ref: OwnerTarget, namespace: string) => Promise<OwnerLookup>;

/** Loop cadences (§1.1, §5.8–5.11). Tests shorten nothing: they drive ticks with an injected clock. */
export interface ProviderIntervals {
  verifyMs: number;
  leaseWatchMs: number;
  ownerRecheckMs: number;
  /** <= 0 disables the orphan scan. */
  orphanScanMs: number;
}

export const DEFAULT_INTERVALS: ProviderIntervals = {
  verifyMs: 15_000,
  leaseWatchMs: 30_000,
  ownerRecheckMs: 10_000,
  orphanScanMs: 60_000,
};

/** Where the provider's own Pod events go (the pod controller's recorder). */
export interface ProviderEvents {
  warning(pod: V1Pod, reason: string, message: string): void;
}

export interface SandboxProviderDeps {
  nodeName: string;
  claimer: SandboxClaimer;
  releaser: SandboxReleaser;
  lister: SandboxLister;
  /** Reads a sandbox's token back to recover a claim delivered before a crash but never recorded. */
  reader: SandboxReader;
  /** Absent = no dynamic client: every owned Pod's claim is preserved (the safe side). */
  ownerReader?: OwnerReader;
  store: ClaimsStore;
  log: Logger;
  clock?: Clock;
  intervals?: Partial<ProviderIntervals>;
  /** Warning events the provider records itself (SandboxLost). */
  events?: ProviderEvents;
}
