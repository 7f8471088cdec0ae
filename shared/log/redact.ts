// Scrubbing of credentials from everything a log line can carry: keys that name a secret anywhere in a
// nested object, `Authorization: Bearer …`-style strings, and credential query parameters. The pino
// `redact` paths in index.ts catch the common shapes by path; this catches the rest by shape, because a
// claim token can sit at any depth (a sandboxd reply, a claims-table row, an error's context).

export const REDACTED = "[REDACTED]";

// Keys whose value is a credential. `key` alone is deliberately absent: pod keys and pool keys are
// logged everywhere and are not secrets. Keys ending in File/Path name where a secret lives, not the
// secret, and stay readable (`sandboxdTokenFile`).
const SENSITIVE_KEY = /token|secret|passw(or)?d|authorization|api[-_]?key|private[-_]?key|credential|cookie|signature/i;
const LOCATION_KEY = /(file|path|dir|ttl|expiry|expires)$/i;

export function isSensitiveKey(key: string): boolean {
  return SENSITIVE_KEY.test(key) && !LOCATION_KEY.test(key);
}

// "Bearer <anything>" in any case is a credential; "Basic" only when followed by base64-looking text, so
// prose such as "basic auth" stays readable.
const BEARER = /\b(bearer)(\s+)[^\s"',;]+/gi;
const BASIC = /\b(Basic|BASIC)(\s+)[A-Za-z0-9+/]{8,}={0,2}/g;
const CREDENTIAL_PARAM = /([?&;](?:token|access_token|accessToken|signature|api_key|apikey|x-api-key)=)[^&\s"'#]+/gi;

export function scrubString(value: string): string {
  return value
    .replace(BEARER, `$1$2${REDACTED}`)
    .replace(BASIC, `$1$2${REDACTED}`)
    .replace(CREDENTIAL_PARAM, `$1${REDACTED}`);
}

const MAX_DEPTH = 10;

/** An Error as a plain, scrubbed object: type, message, stack, cause and its own enumerable fields. */
export function serializeError(err: Error, seen = new WeakSet<object>(), depth = 0): Record<string, unknown> {
  seen.add(err);
  const out: Record<string, unknown> = {
    type: err.name || err.constructor?.name || "Error",
    message: scrubString(err.message),
  };
  if (err.stack) out.stack = scrubString(err.stack);
  for (const [k, v] of Object.entries(err)) {
    if (k === "message" || k === "stack") continue;
    out[k] = isSensitiveKey(k) ? REDACTED : scrubValue(v, seen, depth + 1);
  }
  if (err.cause !== undefined) out.cause = scrubValue(err.cause, seen, depth + 1);
  return out;
}

/** A deep, scrubbed copy of any value for logging; never mutates its input. */
export function scrubValue(value: unknown, seen = new WeakSet<object>(), depth = 0): unknown {
  if (typeof value === "string") return scrubString(value);
  if (value === null || typeof value !== "object") return value;
  if (seen.has(value)) return "[Circular]";
  if (depth > MAX_DEPTH) return "[Truncated]";
  if (value instanceof Error) return serializeError(value, seen, depth);
  if (value instanceof Date) return value;
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((item) => scrubValue(item, seen, depth + 1));
    if (value instanceof Map) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of value) out[String(k)] = isSensitiveKey(String(k)) ? REDACTED : scrubValue(v, seen, depth + 1);
      return out;
    }
    if (typeof Headers !== "undefined" && value instanceof Headers) {
      const out: Record<string, string> = {};
      value.forEach((v, k) => {
        out[k] = isSensitiveKey(k) ? REDACTED : scrubString(v);
      });
      return out;
    }
    if (ArrayBuffer.isView(value)) return `[${value.constructor.name} ${value.byteLength} bytes]`;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = isSensitiveKey(k) && v !== undefined && v !== null && v !== "" ? REDACTED : scrubValue(v, seen, depth + 1);
    }
    return out;
  } finally {
    seen.delete(value);
  }
}
