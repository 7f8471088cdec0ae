// What an S3 failure means to the SDK client that asked for an upload link (e2b.md §6.3). The client sees a status
// and a fixed message naming the store's bucket and the call; what S3 said goes only to the log as `detail`. None of
// it can hold a credential: the SDK's errors carry S3's code and message, never the keys or the signature.
import { E2bError } from "../errors.ts";

/** The shape of an @aws-sdk error we read; anything else (a socket error, our own abort) is handled by name. */
interface AwsLikeError {
  name?: string;
  message?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

const asAws = (err: unknown): AwsLikeError => (typeof err === "object" && err !== null ? (err as AwsLikeError) : {});

/** HEAD answers 404 without a body, so the SDK names it `NotFound`; GET names a missing key `NoSuchKey`. */
export function isS3NotFound(err: unknown): boolean {
  const e = asAws(err);
  return e.name === "NotFound" || e.name === "NoSuchKey" || e.$metadata?.httpStatusCode === 404;
}

const CREDENTIAL_REFUSALS = new Set([
  "AccessDenied",
  "Forbidden",
  "InvalidAccessKeyId",
  "SignatureDoesNotMatch",
  "ExpiredToken",
  "InvalidToken",
  "TokenRefreshRequired",
]);

/**
 * A failed S3 call as the e2b error the route answers with:
 * - no credentials found by the default chain, or S3 unreachable / too slow -> 503 (retrying may help);
 * - S3 refused our credentials, or failed itself -> 502 (the store behind this surface misbehaved).
 * Never a 500 and never a crash: the build API keeps serving, and the log line says which call on which bucket.
 */
export function s3Failure(err: unknown, what: string, timeoutMs: number): E2bError {
  const e = asAws(err);
  const status = e.$metadata?.httpStatusCode;
  const detail = `${e.name ?? "Error"}${status ? ` (HTTP ${status})` : ""}: ${e.message ?? String(err)}`;
  if (e.name === "CredentialsProviderError") {
    return new E2bError(503, `upload store: ${what}: no AWS credentials found by the default chain`, undefined, detail);
  }
  if (e.name === "AbortError" || e.name === "TimeoutError") {
    return new E2bError(503, `upload store: ${what}: S3 did not answer within ${timeoutMs} ms`, undefined, detail);
  }
  if (status === undefined) {
    return new E2bError(503, `upload store: ${what}: S3 is unreachable`, undefined, detail);
  }
  if (status === 403 || CREDENTIAL_REFUSALS.has(e.name ?? "")) {
    return new E2bError(502, `upload store: ${what}: S3 refused this server's credentials (HTTP ${status})`, undefined, detail);
  }
  if (status === 503 || e.name === "SlowDown") {
    return new E2bError(503, `upload store: ${what}: S3 is busy (HTTP ${status}); retry`, undefined, detail);
  }
  return new E2bError(502, `upload store: ${what}: S3 answered HTTP ${status} (${e.name ?? "error"})`, undefined, detail);
}
