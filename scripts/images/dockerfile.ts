// A small reader of the images' Dockerfiles: instructions with continuation lines joined and comments dropped,
// split into stages. scripts/images builds each image from its Dockerfile's final stage, and
// tests/integration/images replays the build stage, so both read the Dockerfile the same way.

export interface Instruction {
  op: string;
  args: string;
}

export interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

export interface Dockerfile {
  globalArgs: Map<string, string>;
  stages: Stage[];
}

export function parseDockerfile(text: string): Dockerfile {
  const lines: string[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    if (/^\s*#/.test(raw) && pending === "") continue;
    const line = raw.replace(/\s+$/, "");
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = `${pending}${line}`.trim();
    pending = "";
    if (full !== "") lines.push(full);
  }
  const out: Dockerfile = { globalArgs: new Map(), stages: [] };
  for (const line of lines) {
    const m = /^([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`Dockerfile: cannot read ${JSON.stringify(line)}`);
    const op = m[1]!.toUpperCase();
    const args = m[2]!;
    if (op === "FROM") {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!f) throw new Error(`Dockerfile: cannot read FROM ${JSON.stringify(args)}`);
      out.stages.push({ from: f[1]!, name: f[2], instructions: [] });
    } else if (out.stages.length === 0) {
      if (op !== "ARG") throw new Error(`Dockerfile: ${op} before FROM`);
      const [k, v = ""] = splitArg(args);
      out.globalArgs.set(k, v ?? "");
    } else {
      out.stages.at(-1)!.instructions.push({ op, args });
    }
  }
  return out;
}

/** `NAME=value` or `NAME` of an ARG, the value unquoted. */
export function splitArg(args: string): [string, string | undefined] {
  const i = args.indexOf("=");
  return i < 0 ? [args.trim(), undefined] : [args.slice(0, i).trim(), unquote(args.slice(i + 1).trim())];
}

export const unquote = (v: string): string => v.replace(/^"(.*)"$/, "$1");

/** `${NAME}` and `$NAME` replaced from `vars` (unset: empty), as the builder does. */
export const substitute = (s: string, vars: Map<string, string>): string =>
  s.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (_, a, b) => vars.get(a ?? b) ?? "");

/** LABEL's `key=value` pairs (values quoted or bare). */
export function parseLabels(args: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const re = /([A-Za-z0-9._/-]+)=("(?:[^"\\]|\\.)*"|\S+)/g;
  for (const m of args.matchAll(re)) out.push([m[1]!, unquote(m[2]!)]);
  return out;
}
