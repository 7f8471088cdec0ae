// Query validation for the streaming routes, with the kubelet's rules, so a malformed request gets a 400 naming the
// problem rather than the generic not-implemented answer.

/** Go's strconv.ParseBool: the only spellings the kubelet accepts. */
const TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

function parseBool(q: URLSearchParams, name: string): boolean | string {
  const v = q.get(name);
  if (v === null) return false;
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  return `${name}: invalid boolean ${JSON.stringify(v)}`;
}

/** Go's strconv.Atoi on a decimal integer (sign allowed). */
function parseInt64(q: URLSearchParams, name: string): number | undefined | string {
  const v = q.get(name);
  if (v === null) return undefined;
  if (!/^[+-]?\d+$/.test(v)) return `${name}: invalid integer ${JSON.stringify(v)}`;
  return Number(v);
}

// RFC 3339 with optional fraction, "Z" or a numeric offset: what metav1.Time accepts.
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** Returns the problem with a /containerLogs query, or undefined when it is valid. */
export function containerLogsQueryError(q: URLSearchParams): string | undefined {
  for (const b of ["follow", "previous", "timestamps"]) {
    const r = parseBool(q, b);
    if (typeof r === "string") return r;
  }
  const tail = parseInt64(q, "tailLines");
  if (typeof tail === "string") return tail;
  if (tail !== undefined && tail < 0) return "tailLines: must be greater than or equal to 0";
  const limit = parseInt64(q, "limitBytes");
  if (typeof limit === "string") return limit;
  if (limit !== undefined && limit < 1) return "limitBytes: must be greater than 0";
  const since = parseInt64(q, "sinceSeconds");
  if (typeof since === "string") return since;
  if (since !== undefined && since < 1) return "sinceSeconds: must be greater than 0";
  const sinceTime = q.get("sinceTime");
  if (sinceTime !== null) {
    if (!RFC3339.test(sinceTime) || Number.isNaN(Date.parse(sinceTime))) {
      return `sinceTime: invalid RFC 3339 time ${JSON.stringify(sinceTime)}`;
    }
    if (since !== undefined) return "at most one of sinceTime or sinceSeconds may be specified";
  }
  return undefined;
}

/**
 * The remote-command stream options of /exec and /attach. The kube-apiserver forwards a `kubectl exec` to the
 * kubelet with the kubelet's own names (`input`, `output`, `error`, `tty`, each "1"); a client that calls the kubelet
 * API directly may use the Pod API's names (`stdin`, `stdout`, `stderr`), and "true" as typed by hand. Either
 * spelling turns a stream on.
 */
export function streamQueryError(q: URLSearchParams): string | undefined {
  const on = (...names: string[]) =>
    names.some((n) => {
      const v = q.get(n);
      return v === "1" || v === "true";
    });
  const stdin = on("input", "stdin");
  const stdout = on("output", "stdout");
  const stderr = on("error", "stderr");
  const tty = on("tty");
  if (!stdin && !stdout && !stderr) return "you must specify at least 1 of stdin, stdout, stderr";
  if (tty && stderr) return "stderr cannot be used with tty";
  return undefined;
}
