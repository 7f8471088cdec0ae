// The e2b surface's files (docs/e2b.md "Configuration files"), read once at startup: the API key file (parsed in
// keys.ts), the template alias file and the envd secret. Every problem is a StartupError naming the flag and the line.
import { readFileSync } from "node:fs";
import { StartupError } from "../config/index.ts";
import type { Size } from "../sandboxd/index.ts";
import { meaningfulLines, parseKeyFile, type KeyFile } from "./keys.ts";

/** The alias sizes the e2b surface accepts (the node has more tiers; aliases name these three). */
export const ALIAS_SIZES = ["small", "medium", "large"] as const satisfies readonly Size[];

export interface AliasTarget {
  image: string;
  size: Size;
}

function readText(path: string, flag: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new StartupError(`${flag}: cannot read ${path}: ${(err as Error).message}`, { flag, file: path }, err);
  }
}

/** `alias pool-image [size]` per line; size defaults to small; an alias named twice is an error. */
export function parseAliasFile(text: string, file = "alias file"): Map<string, AliasTarget> {
  const aliases = new Map<string, AliasTarget>();
  for (const { n, line } of meaningfulLines(text)) {
    const fields = line.split(/\s+/);
    if (fields.length < 2 || fields.length > 3) {
      throw new StartupError(`--e2b-template-alias-file: malformed entry on line ${n} of ${file}: expected "alias pool-image [size]"`, { flag: "--e2b-template-alias-file", line: n });
    }
    const [alias, image, size = "small"] = fields as [string, string, string?];
    if (!(ALIAS_SIZES as readonly string[]).includes(size)) {
      throw new StartupError(`--e2b-template-alias-file: unknown size "${size}" on line ${n} of ${file} (small, medium or large)`, { flag: "--e2b-template-alias-file", line: n });
    }
    if (aliases.has(alias)) {
      throw new StartupError(`--e2b-template-alias-file: duplicate alias "${alias}" on line ${n} of ${file}`, { flag: "--e2b-template-alias-file", line: n });
    }
    aliases.set(alias, { image, size: size as Size });
  }
  return aliases;
}

/** The envd secret: the file's content, whitespace-trimmed; unreadable or empty is fatal. */
export function readEnvdSecret(path: string, flag = "--e2b-envd-secret-file"): string {
  const secret = readText(path, flag).trim();
  if (secret === "") throw new StartupError(`${flag}: ${path} is empty`, { flag, file: path });
  return secret;
}

export function readKeyFile(path: string, defaultNamespace: string): KeyFile {
  return parseKeyFile(readText(path, "--e2b-api-key-file"), defaultNamespace, path);
}

export function readAliasFile(path: string): Map<string, AliasTarget> {
  return parseAliasFile(readText(path, "--e2b-template-alias-file"), path);
}

/** The fleet root token: the file (trimmed) wins over the literal flag. */
export function resolveRootToken(literal: string, file: string | undefined): string {
  if (file === undefined) return literal.trim();
  return readText(file, "--sandboxd-token-file").trim();
}
