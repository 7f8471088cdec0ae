// The e2b error envelope (docs/e2b.md "Errors"): every failure is `{"code": <status>, "message": …}` with `code`
// equal to the HTTP status, because the SDK branches on the body's code (kill -> false on 404, pause -> false on
// 409, getInfo -> SandboxNotFoundError on 404), plus e2b's machine-readable `error_code` where e2b gives one for the
// same situation. Messages never carry tokens, node names, addresses or a node's own error text (it can name other
// tenants and node caps): that goes to the log as `detail`.
import { isSandboxdError, type SandboxdError } from "../sandboxd/index.ts";

/**
 * e2b's `error_code` values (its Error schema: "machine-readable semantic error code", read by Python e2b 2.52+) that
 * this server answers, each where e2b answers it; a 500 without one of these is `internal_server_error`.
 */
export type E2bErrorCode =
  | "sandbox_capacity_unavailable"
  | "sandbox_create_failed"
  | "internal_server_error"
  | "idempotency_request_mismatch"
  | "idempotency_outcome_unknown";

export class E2bError extends Error {
  /** e2b's `error_code` for this failure, when it has one (`withCode`). */
  errorCode: E2bErrorCode | undefined;

  constructor(
    readonly status: number,
    message: string,
    /** Extra response headers (Retry-After on a 429). */
    readonly headers?: Record<string, string>,
    /** What the node said: logged, never sent. */
    readonly detail?: string,
  ) {
    super(message);
    this.name = "E2bError";
  }

  /** This error with e2b's `error_code`. */
  withCode(code: E2bErrorCode): this {
    this.errorCode = code;
    return this;
  }
}

export const badRequest = (message: string) => new E2bError(400, message);
export const notFound = (message: string) => new E2bError(404, message);
export const sandboxNotFound = (id: string) => new E2bError(404, `sandbox "${id}" not found`);
export const templateNotFound = (id: string) => new E2bError(404, `template "${id}" not found`);

/** The envelope; `error_code` when given, and `internal_server_error` on any 500 without one (as e2b answers). */
export function errorResponse(status: number, message: string, headers?: Record<string, string>, errorCode?: E2bErrorCode): Response {
  const code = errorCode ?? (status === 500 ? "internal_server_error" : undefined);
  return new Response(JSON.stringify(code ? { code: status, message, error_code: code } : { code: status, message }), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/** The client's words for a node's 4xx: the status is the client's business, the node's text is not. */
const REFUSAL: Record<number, string> = {
  400: "the node refused the request as invalid",
  409: "the sandbox's state does not allow it",
  413: "the request is too large for the node",
  429: "the node is at capacity; retry later",
};

/**
 * Every 429 we answer carries Retry-After: the JS SDK retries a 429 only with it, and both SDKs back off by it. The
 * node's own value when it sent one (whole seconds, at least 1, at most a minute), else 1.
 */
export function retryAfterSeconds(ms: number | undefined): number {
  if (ms === undefined || !Number.isFinite(ms) || ms <= 0) return 1;
  return Math.min(60, Math.max(1, Math.ceil(ms / 1000)));
}

/**
 * A node failure on a sandbox verb: node 404 -> 404 `sandbox "<id>" not found`; other node 4xx (but 401/403) -> the
 * node's status with a generic message (a 429 with Retry-After), the node's text kept as `detail` for the log; anything else (5xx,
 * transport, protocol, the node refusing our own token) -> 500 with the endpoint's fixed message.
 */
export function fromNode(err: unknown, id: string, fixed: string): E2bError {
  if (err instanceof E2bError) return err;
  if (isSandboxdError(err)) {
    const status = (err as SandboxdError).status;
    if (status === 404) return sandboxNotFound(id);
    if (status !== undefined && status >= 400 && status < 500 && status !== 401 && status !== 403) {
      const headers = status === 429 ? { "retry-after": String(retryAfterSeconds(err.retryAfterMs)) } : undefined;
      return new E2bError(status, `${fixed}: ${REFUSAL[status] ?? "the node refused the request"}`, headers, err.serverMessage);
    }
    return new E2bError(500, fixed, undefined, err.serverMessage || err.message);
  }
  return new E2bError(500, fixed, undefined, err instanceof Error ? err.message : undefined);
}
