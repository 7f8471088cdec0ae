// Wire times (spec §1): RFC 3339 UTC as Go encodes it, and Go's zero time. Re-exported by schemas.ts.
import { z } from "zod";

/** Go's zero `time.Time`, which an archived-forever claim may carry instead of omitting `deadline` (§9.3). */
export const GO_ZERO_TIME = "0001-01-01T00:00:00Z";

// RFC 3339 as Go encodes it: fractional seconds of any length may appear; the zone is Z or ±hh:mm.
const RFC3339_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 timestamp string (kept as the string the node sent; parse with {@link parseWireTime}). */
export const WireTime = z.string().regex(RFC3339_RE, "expected an RFC 3339 time");
export type WireTime = z.infer<typeof WireTime>;

/**
 * Milliseconds since the epoch, or null for Go's zero time (year 1, "no deadline"). Sub-millisecond digits are
 * dropped: JS Dates hold milliseconds.
 */
export function parseWireTime(s: string): number | null {
  if (s.startsWith("0001-01-01T00:00:00")) return null;
  const ms = Date.parse(s.replace(/(\.\d{3})\d+/, "$1"));
  if (Number.isNaN(ms)) throw new Error(`not an RFC 3339 time: ${s}`);
  return ms;
}

/** Format as Go's RFC3339Nano does for a UTC time: trailing zero fraction digits trimmed (`…:00Z`, `…:00.5Z`). */
export function toWireTime(ms: number): string {
  const iso = new Date(ms).toISOString(); // always .sssZ
  return iso.replace(/\.(\d*?)0*Z$/, (_m, frac: string) => (frac ? `.${frac}Z` : "Z"));
}
