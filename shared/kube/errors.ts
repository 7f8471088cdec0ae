// Errors from the Kubernetes API, classified the way client-go's apierrors does: by the Status `reason` when the
// server sent one, else by the HTTP code. Callers decide with the helpers (a NotFound during a delete means done).

/** The `details` of a metav1.Status: which object the failure is about. */
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  retryAfterSeconds?: number;
  causes?: { reason?: string; message?: string; field?: string }[];
}

/**
 * A failed call. `status` is the HTTP code, or 0 when no response arrived (connection refused, TLS failure,
 * timeout); then `reason` is "TransportError" or "Timeout" and `cause` holds the underlying error.
 */
export class KubeApiError extends Error {
  override name = "KubeApiError";
  status: number;
  reason?: string;
  details?: StatusDetails;
  verb: string;
  path: string;
  body?: unknown;

  constructor(init: {
    status: number;
    verb: string;
    path: string;
    reason?: string;
    message?: string;
    details?: StatusDetails;
    body?: unknown;
    cause?: unknown;
  }) {
    const what = init.reason ? `${init.status} ${init.reason}` : String(init.status);
    super(`${init.verb} ${init.path}: ${what}${init.message ? `: ${init.message}` : ""}`, { cause: init.cause });
    this.status = init.status;
    this.reason = init.reason;
    this.details = init.details;
    this.verb = init.verb;
    this.path = init.path;
    this.body = init.body;
  }

  /** Builds the error from a response body that may be a metav1.Status (or anything else, or nothing). */
  static fromResponse(status: number, verb: string, path: string, body: unknown): KubeApiError {
    const s = isStatus(body) ? body : undefined;
    return new KubeApiError({
      status: typeof s?.code === "number" && s.code > 0 ? s.code : status,
      verb,
      path,
      reason: s?.reason || reasonForCode(status),
      message: s?.message ?? (typeof body === "string" ? body.slice(0, 500) : undefined),
      details: s?.details,
      body,
    });
  }
}

/** The shape of a metav1.Status object, as found in error bodies and in watch ERROR events. */
export interface Status {
  kind?: "Status";
  apiVersion?: string;
  status?: string;
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code?: number;
}

export function isStatus(v: unknown): v is Status {
  return typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "Status";
}

// When the server sent no Status (a proxy in between, an empty body), the code alone decides, as in client-go.
function reasonForCode(code: number): string | undefined {
  return (
    {
      400: "BadRequest",
      401: "Unauthorized",
      403: "Forbidden",
      404: "NotFound",
      405: "MethodNotAllowed",
      406: "NotAcceptable",
      409: "Conflict",
      410: "Expired",
      415: "UnsupportedMediaType",
      422: "Invalid",
      429: "TooManyRequests",
      500: "InternalError",
      503: "ServiceUnavailable",
      504: "Timeout",
    } as Record<number, string>
  )[code];
}

// As client-go: the reason decides; the code decides only when the reason is missing or one we do not know.
function classify(e: unknown, reasons: string[], code: number): boolean {
  if (!(e instanceof KubeApiError)) return false;
  if (e.reason && reasons.includes(e.reason)) return true;
  // A reason we do not recognise falls back to the code; a known other reason does not (409 AlreadyExists is
  // not a Conflict).
  return e.status === code && (!e.reason || !knownReasons.has(e.reason));
}

const knownReasons = new Set([
  "NotFound",
  "AlreadyExists",
  "Conflict",
  "Forbidden",
  "Unauthorized",
  "Gone",
  "Expired",
  "Invalid",
  "BadRequest",
  "TooManyRequests",
  "Timeout",
  "ServerTimeout",
  "InternalError",
  "ServiceUnavailable",
  "MethodNotAllowed",
  "NotAcceptable",
  "UnsupportedMediaType",
  "RequestEntityTooLarge",
]);

export const isNotFound = (e: unknown) => classify(e, ["NotFound"], 404);
/** 409 with reason AlreadyExists is not a conflict: a create that lost a race, not a stale update. */
export const isAlreadyExists = (e: unknown) => e instanceof KubeApiError && e.reason === "AlreadyExists";
export const isConflict = (e: unknown) => classify(e, ["Conflict"], 409);
export const isForbidden = (e: unknown) => classify(e, ["Forbidden"], 403);
export const isUnauthorized = (e: unknown) => classify(e, ["Unauthorized"], 401);
/** 410: a resourceVersion too old to list or watch from ("Expired"), or "Gone". The informer relists on it. */
export const isGone = (e: unknown) => classify(e, ["Gone", "Expired"], 410);
export const isInvalid = (e: unknown) => classify(e, ["Invalid"], 422);
export const isTooManyRequests = (e: unknown) => classify(e, ["TooManyRequests"], 429);
/** No response at all: connection refused, TLS verification failure, timeout. */
export const isTransportError = (e: unknown) => e instanceof KubeApiError && e.status === 0;
