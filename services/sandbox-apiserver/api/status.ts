// Kubernetes `Status` errors (docs/api.md "Errors"): every failure of this server is an ApiError carrying the HTTP
// code, the reason kubectl prints, and the details naming the object. Handlers only throw; one place renders.
import { GROUP, RESOURCE } from "../sandboxes/index.ts";

export type Reason =
  | "BadRequest"
  | "Unauthorized"
  | "Forbidden"
  | "NotFound"
  | "MethodNotAllowed"
  | "Conflict"
  | "Invalid"
  | "TooManyRequests"
  | "NotAcceptable"
  | "UnsupportedMediaType"
  | "ServiceUnavailable"
  | "InternalError"
  | "Timeout"
  | "Gone"
  | "RequestEntityTooLarge"
  | "Expired";

const REASON_BY_CODE: Record<number, Reason> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  409: "Conflict",
  410: "Gone",
  413: "RequestEntityTooLarge",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  503: "ServiceUnavailable",
  504: "Timeout",
};

export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly code: number,
    message: string,
    readonly reason: Reason = REASON_BY_CODE[code] ?? (code >= 500 ? "InternalError" : "BadRequest"),
    readonly objectName?: string,
    options?: { cause?: unknown; retryAfterSeconds?: number; causes?: StatusCause[] },
  ) {
    super(message, options);
    if (options?.retryAfterSeconds !== undefined) this.retryAfterSeconds = options.retryAfterSeconds;
    if (options?.causes !== undefined) this.causes = options.causes;
  }
  /** An Invalid's field errors (`details.causes`): kubectl prints them as `<field>: <message>`. */
  readonly causes?: StatusCause[];
  /** A 429/503 that says when to come back: `Retry-After` and `details.retryAfterSeconds`, as kube-apiserver does. */
  readonly retryAfterSeconds?: number;
}

export const badRequest = (msg: string, name?: string) => new ApiError(400, msg, "BadRequest", name);
export const forbidden = (msg: string, name?: string) => new ApiError(403, msg, "Forbidden", name);
export const notFound = (name: string) => new ApiError(404, `${RESOURCE}.${GROUP} "${name}" not found`, "NotFound", name);
export const internal = (msg: string, name?: string, cause?: unknown) =>
  new ApiError(500, `Internal error occurred: ${msg}`, "InternalError", name, { cause });
export const methodNotAllowed = (what: string, name?: string) =>
  new ApiError(405, `${what} is not supported on ${RESOURCE}.${GROUP}`, "MethodNotAllowed", name);

export interface StatusCause {
  /** kube-apiserver's field error kinds: FieldValueForbidden, FieldValueNotSupported, FieldValueInvalid. */
  reason: string;
  message: string;
  field: string;
}

export interface StatusBody {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure";
  message: string;
  reason: Reason;
  details?: { name?: string; group: string; kind: string; retryAfterSeconds?: number; causes?: StatusCause[] };
  code: number;
}

export function statusBody(e: ApiError): StatusBody {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: e.message,
    reason: e.reason,
    details: {
      ...(e.objectName ? { name: e.objectName } : {}),
      group: GROUP,
      kind: RESOURCE,
      ...(e.retryAfterSeconds !== undefined ? { retryAfterSeconds: e.retryAfterSeconds } : {}),
      ...(e.causes ? { causes: e.causes } : {}),
    },
    code: e.code,
  };
}

export function statusResponse(e: ApiError): Response {
  const headers = e.retryAfterSeconds !== undefined ? { "retry-after": String(e.retryAfterSeconds) } : undefined;
  return Response.json(statusBody(e), { status: e.code, ...(headers ? { headers } : {}) });
}


export function isApiError(e: unknown): e is ApiError {
  return e instanceof ApiError;
}
