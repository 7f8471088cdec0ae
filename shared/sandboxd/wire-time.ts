// Wire times (§1): RFC 3339 UTC as Go encodes it, and Go's zero time. Re-exported by schemas.ts. The parser and
// the encodings live in shared/clock (go-time.ts), the one home of Go-time handling; this file holds only what is
// sandboxd's own: the shape its replies are validated against, and its names for the shared functions.
import { z } from "zod";
import { formatRfc3339Nano, GO_ZERO_TIME, parseGoTime } from "../clock/index.ts";

/** Go's zero `time.Time`, which an archived-forever claim may carry instead of omitting `deadline` (§9.3). */
export { GO_ZERO_TIME };

// RFC 3339 as Go encodes it: fractional seconds of any length may appear; the zone is Z or ±hh:mm.
const RFC3339_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 timestamp string (kept as the string the node sent; parse with {@link parseWireTime}). */
export const WireTime = z.string().regex(RFC3339_RE, "expected an RFC 3339 time");
export type WireTime = z.infer<typeof WireTime>;

/**
 * parseGoTime for a reply already validated as {@link WireTime}: milliseconds since the epoch, or null for Go's
 * zero time ("no deadline"). Text that is not a time throws, naming it.
 */
export function parseWireTime(s: string): number | null {
  const t = parseGoTime(s);
  if (t === undefined) throw new Error(`not an RFC 3339 time: ${s}`);
  return t;
}

/** sandboxd writes Go's RFC3339Nano (the simulator uses this to answer as it does). */
export const toWireTime = formatRfc3339Nano;
