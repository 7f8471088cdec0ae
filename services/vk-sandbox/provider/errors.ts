// Provider failures, typed so the pod controller can classify instead of matching text. The controller turns
// any create error into Pending/ProviderFailed (Failed under restartPolicy Never). `transient` marks the
// failures that say nothing about the Pod: sandboxd could not be read while the key holds a claim. The
// project decision is that a transient outage never moves a Pod that holds a claim to Pending or Failed, so a
// controller should requeue those without writing a status.
import { SandboxdAmbiguousClaim, SandboxdServerError, SandboxdTransport } from "#shared/sandboxd/index.ts";

export type ProviderErrorCode =
  /** Pod contract violation (runtime, ttl, template): the Pod must change before a retry can succeed. */
  | "invalid-pod"
  /** A held claim could not be verified because the listing failed; nothing was claimed over it. */
  | "sandboxd-unavailable"
  /** sandboxd refused or failed the claim; no claim is held. */
  | "claim-failed"
  /** The claims table write failed; the new sandbox was released (or, see message, is held tentatively). */
  | "state-write-failed"
  /** A release did not reach sandboxd; the row and its token are kept for a retry. */
  | "release-failed";

export interface ProviderErrorContext {
  pod: string;
  claimId?: string;
}

export class ProviderError extends Error {
  readonly code: ProviderErrorCode;
  readonly context: ProviderErrorContext;
  readonly transient: boolean;

  constructor(
    code: ProviderErrorCode,
    message: string,
    context: ProviderErrorContext,
    opts?: { cause?: unknown; transient?: boolean },
  ) {
    super(message, opts?.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "ProviderError";
    this.code = code;
    this.context = context;
    this.transient = opts?.transient ?? false;
  }
}

export function isProviderError(e: unknown): e is ProviderError {
  return e instanceof ProviderError;
}

/** True when the failure was a sandboxd outage while the key holds a claim: requeue, publish nothing. */
export function isTransientForHeldClaim(e: unknown): boolean {
  return e instanceof ProviderError && e.transient;
}

/**
 * True when a provider failure came from sandboxd being unreachable or failing, not from the Pod: a transient
 * error, or a cause (anywhere in the chain) that is a transport failure, a timeout, a 5xx or a possibly
 * delivered claim. The pod controller never gives up on such a sync (architecture.md, "Long outages").
 */
export function isSandboxdOutage(e: unknown): boolean {
  if (e instanceof ProviderError && e.transient) return true;
  for (let c: unknown = e, depth = 0; c && depth < 8; c = (c as { cause?: unknown }).cause, depth++) {
    if (c instanceof SandboxdTransport || c instanceof SandboxdAmbiguousClaim) return true;
    if (c instanceof SandboxdServerError && c.status !== 501) return true;
    if (c instanceof Error && c.name === "ReleaseTimeout") return true;
    if (c instanceof AggregateError && c.errors.some(isSandboxdOutage)) return true;
  }
  return false;
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
