// The one way to turn a caught value into the text of a log line's `err` field or an error message: an Error's
// message, anything else stringified. (pino's own `err` serializer keeps the stack; this is for short lines.)
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
