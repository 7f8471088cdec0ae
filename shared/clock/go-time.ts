// Time on the wire as Go writes it: the one RFC 3339 parser, and the encodings the project writes. Go's
// encoding/json writes a time.Time as RFC 3339 with up to nine fraction digits, and an unset one as the "zero
// time" 0001-01-01T00:00:00Z rather than omitting it (sandboxd's deadline of an archived-forever claim, the claims
// file's optional times).
//
// One convention everywhere: a time is epoch milliseconds; parseGoTime answers `null` for Go's zero time ("no
// time") and `undefined` for text that is not an RFC 3339 time (the caller decides whether that is malformed
// input or something to skip). Fraction digits beyond milliseconds are truncated: JS time holds milliseconds.

/** Go's zero time.Time as encoding/json writes it. */
export const GO_ZERO_TIME = "0001-01-01T00:00:00Z";

// RFC 3339 (section 5.6): `T`/`t` between date and time, `Z`/`z` or a ±hh:mm offset.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Epoch ms of an RFC 3339 time; `null` for Go's zero time (any time on 0001-01-01, whatever its zone); `undefined`
 * when the text is not RFC 3339 or names a day, hour, minute or second that does not exist (Go's time.Parse
 * refuses those too: no month 13, no 30 February, no second 60).
 */
export function parseGoTime(text: string): number | null | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const frac = m[7];
  const zone = m[8]!;
  if (y === 1 && mo === 1 && d === 1) return null;
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d); // not Date.UTC: it maps years 0–99 to 1900–1999
  date.setUTCHours(h, mi, s, frac ? Number(frac.slice(1, 4).padEnd(3, "0")) : 0);
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d) return undefined;
  if (date.getUTCHours() !== h || date.getUTCMinutes() !== mi || date.getUTCSeconds() !== s) return undefined;
  let t = date.getTime();
  if (zone !== "Z" && zone !== "z") {
    const offH = Number(zone.slice(1, 3));
    const offM = Number(zone.slice(4, 6));
    if (offH > 23 || offM > 59) return undefined;
    t -= (zone.startsWith("-") ? -1 : 1) * (offH * 60 + offM) * 60_000;
  }
  return t;
}

/** Whole seconds: times kept at the precision of the files and objects that store them (metav1.Time). */
export function floorToSecond(ms: number): number {
  return Math.floor(ms / 1000) * 1000;
}

/** metav1.Time and the claims file: whole seconds, UTC, `Z` (`2026-07-06T00:05:00Z`). */
export function formatRfc3339Seconds(ms: number): string {
  return new Date(floorToSecond(ms)).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Go's RFC3339Nano for a UTC time: trailing zero fraction digits trimmed (`…:00Z`, `…:00.5Z`). sandboxd's form. */
export function formatRfc3339Nano(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d*?)0*Z$/, (_m, frac: string) => (frac ? `.${frac}Z` : "Z"));
}

/** metav1.MicroTime: six fraction digits (a Lease's renewTime). */
export function formatMicroTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
