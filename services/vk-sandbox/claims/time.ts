// RFC 3339 in and out. The table stores whole seconds in UTC (spec §5.12), and the provider keeps times as
// epoch milliseconds with 0 meaning "unknown" (Go's zero time), so comparisons need no null checks.

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Epoch ms of an RFC 3339 time, 0 for Go's zero time (`0001-01-01T00:00:00Z`, which sandboxd may send for an
 * archived-forever claim), undefined when the text is not RFC 3339. Fractions beyond milliseconds (Go emits
 * nanoseconds) are truncated rather than handed to Date.parse, whose tolerance varies by engine.
 */
export function parseRfc3339(text: string): number | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zone] = m as unknown as string[];
  if (y === "0001" && mo === "01" && d === "01") return 0;
  const ms = frac ? Number(frac.slice(1, 4).padEnd(3, "0")) : 0;
  let t = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  if (Number.isNaN(t)) return undefined;
  if (zone !== "Z" && zone !== "z") {
    const sign = zone!.startsWith("-") ? -1 : 1;
    t -= sign * (Number(zone!.slice(1, 3)) * 60 + Number(zone!.slice(4, 6))) * 60_000;
  }
  return t;
}

/** Whole seconds, UTC, `Z` suffix: the only form the table writes. */
export function formatRfc3339(ms: number): string {
  return new Date(floorToSecond(ms)).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * Times are kept at whole seconds from the moment they are taken, because the table (and a Pod's startTime
 * on the wire) has second precision: a claimedAt with milliseconds in memory would move the Pod's start time
 * by a fraction of a second across a restart.
 */
export function floorToSecond(ms: number): number {
  return Math.floor(ms / 1000) * 1000;
}
