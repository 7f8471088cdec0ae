// The one way to turn a caught value into the text of a log line's `err` field or an error message: an Error's
// message, anything else stringified. (pino's own `err` serializer keeps the stack; this is for short lines.)
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * errorMessage plus each `cause` whose text the message does not already hold, joined by ": ". For failures whose
 * reason sits in the cause (a fetch that failed TLS verification: "sending the request failed" ← "unable to
 * verify the first certificate"), so one short line still says why.
 */
export function errorChain(e: unknown): string {
  let text = errorMessage(e);
  const seen = new Set<unknown>([e]);
  for (let c = e instanceof Error ? e.cause : undefined; c !== undefined && !seen.has(c) && seen.size < 8; c = c instanceof Error ? c.cause : undefined) {
    seen.add(c);
    const m = errorMessage(c);
    if (m && !text.includes(m)) text += `: ${m}`;
  }
  return text;
}
