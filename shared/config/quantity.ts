// Kubernetes resource quantities (`4000`, `8Ti`, `500m`, `1e3`), parsed and canonicalised the way
// k8s.io/apimachinery's resource.Quantity does, so the Node capacity we advertise reads exactly as the
// Go daemon's did. Written from the documented grammar and observed behaviour, not from the Go source.
//
// Grammar:  <sign>? <digits>? ( "." <digits>? )? <suffix>
//   suffix: "" | n u m k M G T P E (decimal SI) | Ki Mi Gi Ti Pi Ei (binary SI) | e<int> / E<int> (exponent)
// Values are kept exactly, at nano precision: anything finer is rounded up (away from zero), because
// Kubernetes' theory is that asking for "some" of a resource should never round to none.

export type QuantityFormat = "DecimalSI" | "BinarySI" | "DecimalExponent";

export interface Quantity {
  /** Canonical form, as `kubectl get node -o yaml` would print it (`4k`, `8Ti`, `1500m`). */
  readonly string: string;
  readonly format: QuantityFormat;
  /** The exact value times 10^9. */
  readonly nanos: bigint;
  /** The value rounded up to an integer (Go's Quantity.Value()). */
  readonly value: number;
  /** The value times 1000, rounded up (Go's Quantity.MilliValue()). */
  readonly milliValue: number;
}

/** Thrown for any input Kubernetes would refuse; the message quotes the input. */
export class QuantityError extends Error {
  override readonly name = "QuantityError";
}

const FORMAT_HINT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const DECIMAL_SUFFIXES: Record<string, number> = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIXES: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const SUFFIX_CHARS = "eEinumkKMGTP";
const NANO = 1_000_000_000n;
const INT64_MAX = (1n << 63n) - 1n;
// Go would happily build a 10^2000000000 decimal; we refuse exponents no resource could need.
const MAX_EXPONENT = 100_000;

interface Suffix {
  base: 2 | 10;
  exponent: number;
  format: QuantityFormat;
}

function interpretSuffix(text: string): Suffix | undefined {
  const dec = DECIMAL_SUFFIXES[text];
  if (dec !== undefined) return { base: 10, exponent: dec, format: "DecimalSI" };
  const bin = BINARY_SUFFIXES[text];
  if (bin !== undefined) return { base: 2, exponent: bin, format: "BinarySI" };
  if (text.length > 1 && (text[0] === "e" || text[0] === "E") && /^[+-]?[0-9]+$/.test(text.slice(1))) {
    const exponent = Number.parseInt(text.slice(1), 10);
    if (Math.abs(exponent) > MAX_EXPONENT) return undefined;
    return { base: 10, exponent, format: "DecimalExponent" };
  }
  return undefined;
}

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9";

function ceilDiv(n: bigint, d: bigint): bigint {
  return (n + d - 1n) / d;
}

export function parseQuantity(input: string): Quantity {
  if (input.length === 0) throw new QuantityError(`quantity "": ${FORMAT_HINT}`);
  let pos = 0;
  let negative = false;
  if (input[0] === "-" || input[0] === "+") {
    negative = input[0] === "-";
    pos++;
  }
  let intDigits = "";
  while (isDigit(input[pos])) intDigits += input[pos++];
  let fracDigits = "";
  if (input[pos] === ".") {
    pos++;
    while (isDigit(input[pos])) fracDigits += input[pos++];
  }
  // The suffix is a run of suffix letters, then an optional sign, then digits, and nothing else.
  const suffixStart = pos;
  while (pos < input.length && SUFFIX_CHARS.includes(input[pos]!)) pos++;
  if (input[pos] === "+" || input[pos] === "-") pos++;
  while (isDigit(input[pos])) pos++;
  if (pos !== input.length) throw new QuantityError(`quantity "${input}": ${FORMAT_HINT}`);
  const suffix = interpretSuffix(input.slice(suffixStart));
  if (!suffix) throw new QuantityError(`quantity "${input}": unable to parse quantity's suffix`);

  const digits = intDigits + fracDigits;
  if (digits.length === 0) {
    // Kubernetes quirk, kept for parity: a number part without digits ("-", ".", "Ki", "m") reads as
    // zero when its fast int64 path handles the suffix, and is a numeric error otherwise.
    const fastPath = suffix.base === 10 ? suffix.exponent >= -9 : suffix.exponent <= 40;
    if (!fastPath) throw new QuantityError(`quantity "${input}": unable to parse quantity's numeric part`);
    return build(0n, "DecimalSI");
  }

  let num = BigInt(digits) * NANO;
  let den = 10n ** BigInt(fracDigits.length);
  if (suffix.base === 2) num *= 1n << BigInt(suffix.exponent);
  else if (suffix.exponent >= 0) num *= 10n ** BigInt(suffix.exponent);
  else den *= 10n ** BigInt(-suffix.exponent);
  let magnitude = ceilDiv(num, den);

  let format = suffix.format;
  if (format === "BinarySI") {
    // Binary quantities are capped at int64's maximum rather than rejected.
    if (magnitude > INT64_MAX * NANO) magnitude = INT64_MAX * NANO;
    if (magnitude > 0n && magnitude < NANO) format = "DecimalSI";
  }
  return build(negative ? -magnitude : magnitude, format);
}

function build(nanos: bigint, format: QuantityFormat): Quantity {
  const magnitude = nanos < 0n ? -nanos : nanos;
  const sign = nanos < 0n ? -1 : 1;
  return {
    string: canonical(nanos, format),
    format,
    nanos,
    value: sign * Number(ceilDiv(magnitude, NANO)),
    milliValue: sign * Number(ceilDiv(magnitude, 1_000_000n)),
  };
}

function canonical(nanos: bigint, format: QuantityFormat): string {
  if (nanos === 0n) return "0";
  const sign = nanos < 0n ? "-" : "";
  const magnitude = nanos < 0n ? -nanos : nanos;
  // Binary form only when it is exact and at least 1Ki; below that, or fractional, decimal reads better.
  if (format === "BinarySI" && magnitude >= 1024n * NANO && magnitude % NANO === 0n) {
    let whole = magnitude / NANO;
    let exponent = 0;
    while (whole % 1024n === 0n) {
      whole /= 1024n;
      exponent += 10;
    }
    const unit = Object.keys(BINARY_SUFFIXES).find((k) => BINARY_SUFFIXES[k] === exponent) ?? "";
    return `${sign}${whole}${unit}`;
  }
  let mantissa = magnitude;
  let exponent = -9;
  while (mantissa % 10n === 0n) {
    mantissa /= 10n;
    exponent++;
  }
  while (exponent % 3 !== 0) {
    mantissa *= 10n;
    exponent--;
  }
  if (format === "DecimalExponent") return `${sign}${mantissa}${exponent === 0 ? "" : `e${exponent}`}`;
  // Decimal SI stops at E (10^18); larger values keep E and grow the mantissa instead of losing digits.
  if (exponent > 18) {
    mantissa *= 10n ** BigInt(exponent - 18);
    exponent = 18;
  }
  const unit = Object.keys(DECIMAL_SUFFIXES).find((k) => DECIMAL_SUFFIXES[k] === exponent) ?? "";
  return `${sign}${mantissa}${unit}`;
}
