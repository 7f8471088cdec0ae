// Typed failures of a sandboxd call. Every class carries a stable `code`, a context object (which node,
// which route, which sandbox) and the underlying `cause`, so a caller classifies with the helpers at the
// bottom instead of matching message text, and each surface maps classes to its own response once.
//
// The one distinction that matters most is "did the node possibly act?": claims are not idempotent, so a
// claim may only be repeated (here or on another node) when the node provably handed out nothing.
// `provablyUndelivered(e)` answers that question and nothing else.

export interface SandboxdErrorContext {
  /** The node's address or base URL the call went to. */
  node: string;
  /** `METHOD /path` with ids kept (query omitted). */
  route: string;
  sandboxId?: string;
  checkpointId?: string;
  claimRef?: string;
  /** HTTP status when one was received. */
  status?: number;
}

export type SandboxdErrorCode =
  | "bad_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "route_not_found"
  | "conflict"
  | "capacity"
  | "redirect"
  | "unexpected_status"
  | "server_error"
  | "transport"
  | "protocol"
  | "ambiguous_claim";

/** What every typed failure may carry besides its message and context. */
export interface SandboxdErrorOptions {
  cause?: unknown;
  /** The node's `{"error"}` text (or its plain-text body, trimmed). */
  serverMessage?: string;
  /** From a `Retry-After` header, in milliseconds. */
  retryAfterMs?: number;
}

export abstract class SandboxdError extends Error {
  abstract readonly code: SandboxdErrorCode;
  readonly context: SandboxdErrorContext;
  /** The node's `{"error"}` text (or its plain-text body, trimmed), when it sent one. */
  readonly serverMessage: string | undefined;
  /**
   * From a `Retry-After` header, in milliseconds, when the node sent one. The node sends it on 429 and 503 (heal
   * capacity 10 s, exec 1 s); it lives on the base class so the retry loop reads one member for every class.
   */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, context: SandboxdErrorContext, opts?: SandboxdErrorOptions) {
    super(message, opts?.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.context = context;
    this.serverMessage = opts?.serverMessage;
    this.retryAfterMs = opts?.retryAfterMs;
  }

  get status(): number | undefined {
    return this.context.status;
  }
}

/** 400 (and 413): the node rejected the request as malformed. Repeating it unchanged fails again. */
export class SandboxdBadRequest extends SandboxdError {
  readonly code = "bad_request" as const;
}

/** 401: our credential is wrong or missing (alert an operator). On a redirect target it may be token rotation. */
export class SandboxdUnauthorized extends SandboxdError {
  readonly code = "unauthorized" as const;
}

/** 403: a tenant token on an operator surface (a bug in our wiring), or a removed tenant renewing. */
export class SandboxdForbidden extends SandboxdError {
  readonly code = "forbidden" as const;
}

/**
 * A handled JSON 404 (`unknown sandbox`, `unknown template`, …). With a non-root token this may only mean a
 * wrong token: only a root-token 404 proves a sandbox is gone (§8.7).
 */
export class SandboxdNotFound extends SandboxdError {
  readonly code = "not_found" as const;
}

/**
 * A router miss: a plain-text 404 or 405 from the node's HTTP mux (or anything in front of it). The node
 * does not serve this route (an older sandboxd); it says nothing about whether the sandbox exists, so it is
 * deliberately NOT a SandboxdNotFound and release does not read it as "already gone".
 */
export class SandboxdRouteNotFound extends SandboxdError {
  readonly code = "route_not_found" as const;
}

/** 409 (state conflict: don't repeat as is) and 412 (template digest mismatch). */
export class SandboxdConflict extends SandboxdError {
  readonly code = "conflict" as const;
}

/**
 * Capacity miss: 429 (node/tenant cap or draining), or a claim answered 200 without an id. Nothing was
 * handed out; try elsewhere or back off.
 */
export class SandboxdCapacity extends SandboxdError {
  readonly code = "capacity" as const;
}

export interface RedirectAttempt {
  target: string;
  /** Why this target did not serve: "skipped" when the resolver did not know it. */
  outcome: "skipped" | SandboxdError;
}

/**
 * The node answered a claim with `{"redirect":[…]}`. Thrown when the caller asked not to follow redirects
 * (`exhausted: false`, `targets` to try), or when every target was tried without a claim (`exhausted: true`,
 * with the per-target outcomes). Either way nothing was handed out: it counts as a capacity miss.
 */
export class SandboxdRedirect extends SandboxdError {
  readonly code = "redirect" as const;
  readonly targets: string[];
  readonly requirePromoted: boolean;
  readonly exhausted: boolean;
  readonly attempts: RedirectAttempt[];
  constructor(
    message: string,
    context: SandboxdErrorContext,
    r: { targets: string[]; requirePromoted: boolean; exhausted: boolean; attempts?: RedirectAttempt[]; cause?: unknown },
  ) {
    super(message, context, { cause: r.cause });
    this.targets = r.targets;
    this.requirePromoted = r.requirePromoted;
    this.exhausted = r.exhausted;
    this.attempts = r.attempts ?? [];
  }
}

/** Any other 4xx we have no class for (e.g. 426). */
export class SandboxdUnexpectedStatus extends SandboxdError {
  readonly code = "unexpected_status" as const;
}

/**
 * 5xx with the node's `error` text. `provisioning failed` (claim) means no VM was handed out. A 501 is the node
 * saying it lacks the feature (preview without a preview listener): permanent, so the safe-retry loop skips it.
 */
export class SandboxdServerError extends SandboxdError {
  readonly code = "server_error" as const;
  get provisioningFailed(): boolean {
    return this.serverMessage === "provisioning failed";
  }
}

/**
 * No usable HTTP reply: refused, reset, DNS failure, timeout, abort. `delivered: "no"` only when provably
 * nothing reached the node (the connection was never established); everything else is "maybe".
 */
export class SandboxdTransport extends SandboxdError {
  readonly code = "transport" as const;
  readonly delivered: "no" | "maybe";
  /** Our per-request deadline fired (as opposed to a caller's abort or a socket error). */
  readonly timedOut: boolean;
  constructor(
    message: string,
    context: SandboxdErrorContext,
    t: { delivered: "no" | "maybe"; timedOut?: boolean; cause?: unknown },
  ) {
    super(message, context, { cause: t.cause });
    this.delivered = t.delivered;
    this.timedOut = t.timedOut ?? false;
  }
}

export type ProtocolProblem = "oversize" | "bad_json" | "schema" | "truncated";

/** The node answered 2xx with something we cannot use: oversize, undecodable or not matching the schema. */
export class SandboxdProtocol extends SandboxdError {
  readonly code = "protocol" as const;
  readonly problem: ProtocolProblem;
  constructor(message: string, context: SandboxdErrorContext, p: { problem: ProtocolProblem; cause?: unknown }) {
    super(message, context, { cause: p.cause });
    this.problem = p.problem;
  }
}

/**
 * A claim (or branch claim) may have been handed out, and reconciling by listing could not pin it to exactly
 * one sandbox. `candidates` holds the unknown ids that matched (possibly none: the claim may still be in
 * flight on the node, or was never committed). The claim's TTL bounds any leak; the caller's orphan audit
 * (a listed id held by no claim) cleans up. `cause` is the original failure.
 */
export class SandboxdAmbiguousClaim extends SandboxdError {
  readonly code = "ambiguous_claim" as const;
  readonly candidates: string[];
  constructor(message: string, context: SandboxdErrorContext, a: { candidates: string[]; cause?: unknown }) {
    super(message, context, { cause: a.cause });
    this.candidates = a.candidates;
  }
}

export function isSandboxdError(e: unknown): e is SandboxdError {
  return e instanceof SandboxdError;
}

/** A handled 404 from the node (not a router miss). */
export function isNotFound(e: unknown): e is SandboxdNotFound {
  return e instanceof SandboxdNotFound;
}

export function isUnauthorized(e: unknown): e is SandboxdUnauthorized {
  return e instanceof SandboxdUnauthorized;
}

export function isConflict(e: unknown): e is SandboxdConflict {
  return e instanceof SandboxdConflict;
}

/** A capacity miss: 429, a 200 claim reply without an id, or a redirect not followed / exhausted. */
export function isCapacity(e: unknown): e is SandboxdCapacity | SandboxdRedirect {
  return e instanceof SandboxdCapacity || e instanceof SandboxdRedirect;
}

/**
 * True only when the node provably handed out nothing for this request, so a non-idempotent call (claim,
 * fork, checkpoint, branch claim) may be repeated here or elsewhere: 429 / empty 200 / redirect, a connection
 * that was never established, or the claim path's `500 provisioning failed`.
 */
export function provablyUndelivered(e: unknown): boolean {
  if (e instanceof SandboxdCapacity || e instanceof SandboxdRedirect) return true;
  if (e instanceof SandboxdTransport) return e.delivered === "no";
  if (e instanceof SandboxdServerError) return e.provisioningFailed;
  return false;
}
