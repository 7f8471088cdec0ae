// Command-line and environment parsing for a flag table (see flag-kinds.ts for the rows).
//
// Rules, the same for every binary:
// - `--flag value`, `--flag=value`, and Go's single-dash spelling `-flag`; booleans are `--flag` or
//   `--flag=true|false` (a bare bool never swallows the next argument, as in Go).
// - Precedence: an explicit flag, then its environment variable when that is non-empty (an empty
//   variable counts as unset, so a systemd EnvironmentFile line `VK_NODE_IP=` changes nothing), then
//   the default.
// - `--help`/`-h` stops parsing and asks for the flag table; `--version` asks for the version line.
//   Both are answered before any value is converted, so `--version` works even beside a bad value.
// - Unknown flags, missing values, stray arguments and unconvertible values are UsageErrors (exit 2).
import { parseGoBool, type FlagSpec } from "./flag-kinds.ts";
import { UsageError } from "./errors.ts";

export type Env = Readonly<Record<string, string | undefined>>;
// biome-ignore lint: the table is heterogeneous by design; each row keeps its own value type.
export type FlagTable = Readonly<Record<string, FlagSpec<any>>>;
export type FlagValues<T extends FlagTable> = { -readonly [K in keyof T]: T[K] extends FlagSpec<infer V> ? V : never };
export type ValueSource = "flag" | "env" | "default";

export interface ParsedFlags<T extends FlagTable> {
  readonly values: FlagValues<T>;
  /** Where each value came from; `flag` means the operator typed it (even as an empty string). */
  readonly sources: { readonly [K in keyof T]: ValueSource };
  /** The raw text each value was converted from. */
  readonly raw: { readonly [K in keyof T]: string };
}

/** What the command line asked for. */
export type CliOutcome<C> = { kind: "help" } | { kind: "version" } | { kind: "run"; config: C };

const HELP_NAMES = new Set(["help", "h"]);

export function parseFlags<T extends FlagTable>(
  table: T,
  argv: readonly string[],
  env: Env,
): CliOutcome<ParsedFlags<T>> {
  const byFlag = new Map<string, keyof T & string>();
  for (const key of Object.keys(table)) byFlag.set(table[key]!.flag, key as keyof T & string);

  const explicit = new Map<keyof T & string, string>();
  let version = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") {
      if (i + 1 < argv.length) throw new UsageError(`unexpected argument ${JSON.stringify(argv[i + 1])}`);
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      throw new UsageError(`unexpected argument ${JSON.stringify(arg)}: this binary takes flags only`);
    }
    const body = arg.startsWith("--") ? arg.slice(2) : arg.slice(1);
    if (body === "" || body.startsWith("-") || body.startsWith("=")) {
      throw new UsageError(`bad flag syntax: ${arg}`);
    }
    const eq = body.indexOf("=");
    const name = eq === -1 ? body : body.slice(0, eq);
    const inline = eq === -1 ? undefined : body.slice(eq + 1);
    if (HELP_NAMES.has(name) && !byFlag.has(name)) return { kind: "help" };
    if (name === "version" && !byFlag.has(name)) {
      try {
        version = inline === undefined ? true : parseGoBool(inline);
      } catch (err) {
        throw new UsageError(`invalid value ${JSON.stringify(inline)} for flag --version: ${(err as Error).message}`, {
          flag: "--version",
          value: inline,
        });
      }
      continue;
    }
    const key = byFlag.get(name);
    if (key === undefined) throw new UsageError(`unknown flag: --${name}`, { flag: `--${name}` });
    const spec = table[key]!;
    if (spec.type === "bool") {
      explicit.set(key, inline ?? "true");
      continue;
    }
    if (inline !== undefined) {
      explicit.set(key, inline);
      continue;
    }
    if (i + 1 >= argv.length) throw new UsageError(`flag needs an argument: --${name}`, { flag: `--${name}` });
    explicit.set(key, argv[++i]!);
  }
  if (version) return { kind: "version" };

  const values: Record<string, unknown> = {};
  const sources: Record<string, ValueSource> = {};
  const raws: Record<string, string> = {};
  for (const key of Object.keys(table)) {
    const spec = table[key]!;
    let raw: string;
    let source: ValueSource;
    const fromFlag = explicit.get(key as keyof T & string);
    const fromEnv = spec.env === undefined ? undefined : env[spec.env];
    if (fromFlag !== undefined) {
      raw = fromFlag;
      source = "flag";
    } else if (fromEnv !== undefined && fromEnv !== "") {
      raw = fromEnv;
      source = "env";
    } else {
      raw = spec.default;
      source = "default";
    }
    const result = spec.schema.safeParse(raw);
    if (!result.success) {
      const why = result.error.issues.map((issue) => issue.message).join("; ");
      const origin = source === "env" ? ` (from environment variable ${spec.env})` : "";
      throw new UsageError(`invalid value ${JSON.stringify(raw)} for flag --${spec.flag}${origin}: ${why}`, {
        flag: `--${spec.flag}`,
        value: raw,
      });
    }
    values[key] = result.data;
    sources[key] = source;
    raws[key] = raw;
  }
  return {
    kind: "run",
    config: {
      values: values as FlagValues<T>,
      sources: sources as ParsedFlags<T>["sources"],
      raw: raws as ParsedFlags<T>["raw"],
    },
  };
}

/** Maps the `run` branch of an outcome, leaving help and version untouched. */
export function mapOutcome<A, B>(outcome: CliOutcome<A>, fn: (config: A) => B): CliOutcome<B> {
  return outcome.kind === "run" ? { kind: "run", config: fn(outcome.config) } : outcome;
}

/** Builds the UsageError for a value that converted but breaks a rule only its binary knows. */
export function invalidFlag(flag: string, value: string, why: string): UsageError {
  return new UsageError(`invalid value ${JSON.stringify(value)} for flag --${flag}: ${why}`, {
    flag: `--${flag}`,
    value,
  });
}
