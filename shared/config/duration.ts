// Go durations (`60s`, `1m30s`, `1.5h`, `0`), parsed with time.ParseDuration's rules so a flag value
// that worked on the Go daemons works here and one they refused is refused:
//   [-+]? ( <digits>? ( "." <digits>? )? <unit> )+    or exactly "0" (after the sign)
// Units: ns, us, µs (U+00B5), μs (U+03BC), ms, s, m, h. A unitless non-zero number is an error.
// The result is an exact integer of nanoseconds (a bigint); Go's limits (±2^63 ns) apply.

export class DurationError extends Error {
  override readonly name = "DurationError";
}

const UNITS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  "\u00b5s": 1_000n,
  "\u03bcs": 1_000n,
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};
const LIMIT = 1n << 63n;

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9";

/** Parses a Go duration into nanoseconds. Throws DurationError quoting the input, like Go's messages. */
export function parseGoDuration(input: string): bigint {
  const quoted = JSON.stringify(input);
  const invalid = () => new DurationError(`time: invalid duration ${quoted}`);
  let s = input;
  let negative = false;
  if (s[0] === "-" || s[0] === "+") {
    negative = s[0] === "-";
    s = s.slice(1);
  }
  if (s === "0") return 0n;
  if (s === "") throw invalid();

  let total = 0n;
  let i = 0;
  while (i < s.length) {
    if (!(s[i] === "." || isDigit(s[i]))) throw invalid();
    // Integer part; overflow past 2^63 is an error, as in Go.
    let whole = 0n;
    const intStart = i;
    while (isDigit(s[i])) {
      whole = whole * 10n + BigInt(s.charCodeAt(i) - 48);
      if (whole > LIMIT) throw invalid();
      i++;
    }
    const sawInt = i > intStart;
    // Fraction part: digits beyond what fits are ignored (Go keeps the leading ones only).
    let fraction = 0n;
    let scale = 1;
    let sawFraction = false;
    if (s[i] === ".") {
      i++;
      const fracStart = i;
      let overflow = false;
      while (isDigit(s[i])) {
        const digit = BigInt(s.charCodeAt(i) - 48);
        if (!overflow) {
          const next = fraction * 10n + digit;
          if (fraction > (LIMIT - 1n) / 10n || next > LIMIT) overflow = true;
          else {
            fraction = next;
            scale *= 10;
          }
        }
        i++;
      }
      sawFraction = i > fracStart;
    }
    if (!sawInt && !sawFraction) throw invalid();
    const unitStart = i;
    while (i < s.length && s[i] !== "." && !isDigit(s[i])) i++;
    const unitText = s.slice(unitStart, i);
    if (unitText === "") throw new DurationError(`time: missing unit in duration ${quoted}`);
    const unit = UNITS[unitText];
    if (unit === undefined) {
      throw new DurationError(`time: unknown unit ${JSON.stringify(unitText)} in duration ${quoted}`);
    }
    if (whole > LIMIT / unit) throw invalid();
    let value = whole * unit;
    if (fraction > 0n) {
      // Same float arithmetic as Go (float64 multiply, then truncate), so rounding matches to the nanosecond.
      value += BigInt(Math.trunc(Number(fraction) * (Number(unit) / scale)));
      if (value > LIMIT) throw invalid();
    }
    total += value;
    if (total > LIMIT) throw invalid();
  }
  if (negative) return -total;
  if (total > LIMIT - 1n) throw invalid();
  return total;
}

/** Nanoseconds to whole milliseconds (truncating toward zero), for timers. */
export function nanosToMillis(nanos: bigint): number {
  return Number(nanos / 1_000_000n);
}

/** Formats nanoseconds the way Go's Duration.String does: `0s`, `500ms`, `1m30s`, `1h0m0s`. */
export function formatGoDuration(nanos: bigint): string {
  if (nanos === 0n) return "0s";
  const sign = nanos < 0n ? "-" : "";
  const n = nanos < 0n ? -nanos : nanos;
  const withFraction = (value: bigint, unit: bigint, digits: number): string => {
    const whole = value / unit;
    const rest = value % unit;
    if (rest === 0n) return `${whole}`;
    return `${whole}.${rest.toString().padStart(digits, "0").replace(/0+$/, "")}`;
  };
  if (n < 1_000n) return `${sign}${n}ns`;
  if (n < 1_000_000n) return `${sign}${withFraction(n, 1_000n, 3)}\u00b5s`;
  if (n < 1_000_000_000n) return `${sign}${withFraction(n, 1_000_000n, 6)}ms`;
  const hours = n / UNITS.h!;
  const minutes = (n % UNITS.h!) / UNITS.m!;
  const seconds = withFraction(n % UNITS.m!, UNITS.s!, 9);
  if (hours > 0n) return `${sign}${hours}h${minutes}m${seconds}s`;
  if (minutes > 0n) return `${sign}${minutes}m${seconds}s`;
  return `${sign}${seconds}s`;
}
