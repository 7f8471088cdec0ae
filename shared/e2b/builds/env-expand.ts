// ENV value expansion with Docker's rules (docs/e2b.md "Builds"), in TypeScript: `$NAME`, `${NAME}`,
// `${NAME:-word}` / `${NAME-word}` (word when unset or empty / unset), `${NAME:+word}` / `${NAME+word}` (word when
// set and non-empty / set), `\$` a literal `$`; an unset variable is empty. Nothing reaches a shell: `$(cmd)`,
// backquotes and `${P@P}` cannot run anything (the first two stay literal text, other `${…}` forms are refused).

export class EnvExpansionError extends Error {}

const NAME = /[A-Za-z_][A-Za-z0-9_]*/y;
/** Nesting depth of `${…:-${…}}`. */
const MAX_DEPTH = 8;

export function expandEnv(value: string, lookup: (name: string) => string | undefined): string {
  return expand(value, lookup, 0);
}

function expand(v: string, lookup: (name: string) => string | undefined, depth: number): string {
  if (depth > MAX_DEPTH) throw new EnvExpansionError(`ENV: substitutions nested deeper than ${MAX_DEPTH}`);
  let out = "";
  for (let i = 0; i < v.length; ) {
    const ch = v[i]!;
    if (ch === "\\" && v[i + 1] === "$") {
      out += "$";
      i += 2;
      continue;
    }
    if (ch !== "$") {
      out += ch;
      i++;
      continue;
    }
    if (v[i + 1] === "{") {
      const end = closing(v, i + 2);
      if (end < 0) throw new EnvExpansionError("ENV: unterminated ${");
      out += braced(v.slice(i + 2, end), lookup, depth);
      i = end + 1;
      continue;
    }
    NAME.lastIndex = i + 1;
    const m = NAME.exec(v);
    if (!m) {
      out += "$";
      i++;
      continue;
    }
    out += lookup(m[0]) ?? "";
    i = NAME.lastIndex;
  }
  return out;
}

/** The index of the `}` closing a `${` whose body starts at `from` (nested `${…}` skipped); -1 when none. */
function closing(v: string, from: number): number {
  let depth = 0;
  for (let i = from; i < v.length; i++) {
    if (v[i] === "\\" && v[i + 1] === "$") i++;
    else if (v[i] === "$" && v[i + 1] === "{") {
      depth++;
      i++;
    } else if (v[i] === "}") {
      if (depth === 0) return i;
      depth--;
    }
  }
  return -1;
}

function braced(body: string, lookup: (name: string) => string | undefined, depth: number): string {
  NAME.lastIndex = 0;
  const m = NAME.exec(body);
  if (!m) throw new EnvExpansionError(`ENV: unsupported substitution \${${body.slice(0, 40)}}`);
  const name = m[0];
  const rest = body.slice(name.length);
  const val = lookup(name);
  if (rest === "") return val ?? "";
  const op = /^(:-|:\+|-|\+)/.exec(rest);
  if (!op) throw new EnvExpansionError(`ENV: unsupported substitution \${${body.slice(0, 40)}} (only $NAME, \${NAME}, \${NAME:-word}, \${NAME:+word})`);
  const word = () => expand(rest.slice(op[0].length), lookup, depth + 1);
  switch (op[0]) {
    case ":-":
      return val ? val : word();
    case "-":
      return val !== undefined ? val : word();
    case ":+":
      return val ? word() : "";
    default:
      return val !== undefined ? word() : "";
  }
}

/** `env -0` output as a map (entries without `=` skipped). */
export function parseEnvBlock(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of text.split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}
