// One constructor per value kind. Each flag is a row: its name, the environment variable the seed gives
// it (if any), its default as the operator would type it, its help text, and a zod schema that turns
// the raw string into the typed value (or explains why it cannot). Defaults go through the same schema
// as user input, so a default can never be something a user could not have typed.
import { z } from "zod";
import { errorMessage } from "../log/index.ts";
import { parseGoDuration } from "./duration.ts";
import { parseQuantity, type Quantity } from "./quantity.ts";

export type FlagType = "string" | "bool" | "int" | "float" | "duration" | "quantity" | "list" | "semver";

export interface FlagSpec<T> {
  /** Long name without dashes: `node-name`. */
  readonly flag: string;
  /** Environment variable whose non-empty value replaces the default. */
  readonly env?: string;
  /** The default as an operator would type it; "" means empty. */
  readonly default: string;
  /** What --help shows in the default column when the raw default says too little. */
  readonly defaultLabel?: string;
  readonly help: string;
  readonly type: FlagType;
  readonly schema: z.ZodType<T, string>;
}

interface Base {
  flag: string;
  env?: string;
  help: string;
  defaultLabel?: string;
}
/** A validation rule on the parsed value: return a message to reject it. */
type Check<T> = (value: T) => string | undefined;

function kind<T>(
  type: FlagType,
  base: Base & { default?: string },
  convert: (raw: string) => T,
  checks: Check<T>[] = [],
): FlagSpec<T> {
  const schema = z.string().transform((raw, ctx): T => {
    let value: T;
    try {
      value = convert(raw);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: errorMessage(err) });
      return z.NEVER;
    }
    for (const check of checks) {
      const problem = check(value);
      if (problem !== undefined) {
        ctx.addIssue({ code: "custom", message: problem });
        return z.NEVER;
      }
    }
    return value;
  });
  return { ...base, default: base.default ?? "", type, schema };
}

export function stringFlag(o: Base & { default?: string; check?: Check<string> }): FlagSpec<string> {
  return kind("string", o, (raw) => raw, o.check ? [o.check] : []);
}

/** Go's strconv.ParseBool spellings; anything else is a usage error. */
export function parseGoBool(raw: string): boolean {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(raw)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(raw)) return false;
  throw new Error(`parse error: ${JSON.stringify(raw)} is not a boolean (true or false)`);
}

export function boolFlag(o: Base & { default?: "true" | "false" }): FlagSpec<boolean> {
  return kind("bool", { ...o, default: o.default ?? "false" }, parseGoBool);
}

/**
 * Go's strconv.ParseInt(s, 0, 64), as the flag package uses it: an optional sign, then decimal, 0x/0o/0b
 * prefixed, or leading-zero octal; underscores only between digits (or right after a base prefix), as in
 * Go integer literals (`1_000`, `0x_ff`). Limited to JavaScript's safe integers.
 */
export function parseGoInt(raw: string): number {
  const bad = () => new Error(`parse error: ${JSON.stringify(raw)} is not an integer`);
  let body = raw;
  let negative = false;
  if (body[0] === "+" || body[0] === "-") {
    negative = body[0] === "-";
    body = body.slice(1);
  }
  let base = 10;
  let digits = body;
  const prefix = /^0([xXoObB])/.exec(body);
  if (prefix) {
    base = { x: 16, o: 8, b: 2 }[prefix[1]!.toLowerCase() as "x" | "o" | "b"];
    digits = body.slice(2);
    if (digits.startsWith("_")) digits = digits.slice(1); // "0x_1F" is a valid literal
  } else if (body.length > 1 && body[0] === "0") {
    base = 8;
    digits = body.slice(1);
    if (digits.startsWith("_")) digits = digits.slice(1);
  }
  if (digits === "" || digits.startsWith("_") || digits.endsWith("_") || digits.includes("__")) throw bad();
  digits = digits.replaceAll("_", "");
  const alphabet = "0123456789abcdef".slice(0, base);
  let n = 0n;
  for (const c of digits.toLowerCase()) {
    const d = alphabet.indexOf(c);
    if (d === -1) throw bad();
    n = n * BigInt(base) + BigInt(d);
  }
  if (negative) n = -n;
  if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new Error(`value out of range: ${raw}`);
  }
  return Number(n);
}

export function intFlag(o: Base & { default: string; min?: number; max?: number }): FlagSpec<number> {
  const checks: Check<number>[] = [];
  if (o.min !== undefined) checks.push((v) => (v < o.min! ? `must be at least ${o.min}` : undefined));
  if (o.max !== undefined) checks.push((v) => (v > o.max! ? `must be at most ${o.max}` : undefined));
  return kind("int", o, parseGoInt, checks);
}

/** Decimal floats as Go's ParseFloat reads them (`200`, `0.5`, `1e3`, `-1`); NaN and infinities refused. */
export function parseGoFloat(raw: string): number {
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw)) {
    throw new Error(`parse error: ${JSON.stringify(raw)} is not a number`);
  }
  const value = Number(raw);
  if (!Number.isFinite(value)) throw new Error(`value out of range: ${raw}`);
  return value;
}

export function floatFlag(o: Base & { default: string }): FlagSpec<number> {
  return kind("float", o, parseGoFloat);
}

export interface DurationValue {
  readonly nanos: bigint;
  /** Milliseconds for timers; a positive sub-millisecond duration rounds up to 1 ms, never to 0. */
  readonly ms: number;
}

export function toDurationValue(nanos: bigint): DurationValue {
  const ms = nanos > 0n ? Number((nanos + 999_999n) / 1_000_000n) : Number(nanos / 1_000_000n);
  return { nanos, ms };
}

export function durationFlag(
  o: Base & { default: string; positive?: boolean; nonNegative?: boolean },
): FlagSpec<DurationValue> {
  const checks: Check<DurationValue>[] = [];
  if (o.positive) checks.push((v) => (v.nanos <= 0n ? "must be a positive duration" : undefined));
  if (o.nonNegative) checks.push((v) => (v.nanos < 0n ? "must not be negative" : undefined));
  return kind("duration", o, (raw) => toDurationValue(parseGoDuration(raw)), checks);
}

export function quantityFlag(o: Base & { default: string }): FlagSpec<Quantity> {
  return kind("quantity", o, parseQuantity);
}

/** Comma-separated strings, as pflag's StringSlice: `a,b` → ["a","b"]; empty → []. */
export function listFlag(o: Base & { default?: string; check?: Check<string[]> }): FlagSpec<string[]> {
  return kind("list", o, (raw) => (raw === "" ? [] : raw.split(",")), o.check ? [o.check] : []);
}

// Semantic Versioning 2.0.0, without a leading "v" (the e2b SDK compares envd versions with semver).
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

export function isSemver(raw: string): boolean {
  return SEMVER.test(raw);
}

/** A semantic version; `emptyMeans` stands in for an empty value (the seed's "0.8.0 when empty"). */
export function semverFlag(o: Base & { default?: string; emptyMeans: string }): FlagSpec<string> {
  return kind("semver", o, (raw) => {
    const value = raw === "" ? o.emptyMeans : raw;
    if (!isSemver(value)) throw new Error(`${JSON.stringify(raw)} is not a semantic version (for example 0.8.0)`);
    return value;
  });
}
