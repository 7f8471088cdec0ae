// The e2b surface and the envd relay share the access-token derivation through shared/envd-token, never through
// each other: shared/e2b/envd.ts calls the relay's tunnel (e2b -> relay), so a relay import of shared/e2b would
// close a cycle in which one index read the other's constants before they were initialised (issue 19 item 7).
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";

const root = join(import.meta.dir, "..", "..", "..");

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

/** Every module a file imports or re-exports from, as a repository path (relative and #aliased specifiers). */
function targetsOf(file: string): string[] {
  const out: string[] = [];
  for (const m of readFileSync(file, "utf8").matchAll(/^\s*(?:import|export)\b[^;]*?from\s+["']([^"']+)["']/gm)) {
    const spec = m[1]!;
    if (spec.startsWith(".")) out.push(relative(root, join(dirname(file), spec)));
    else if (spec.startsWith("#")) out.push(spec.slice(1));
  }
  return out;
}

function offenders(folder: string, forbidden: (target: string) => boolean): string[] {
  return tsFiles(join(root, folder)).flatMap((file) => targetsOf(file).filter(forbidden).map((t) => `${relative(root, file)} imports ${t}`));
}

test("shared/relay never imports shared/e2b (the token derivation and id forms come from shared/envd-token)", () => {
  expect(offenders("shared/relay", (t) => t.startsWith("shared/e2b/"))).toEqual([]);
});

test("shared/envd-token imports nothing of ours outside itself (both sides import it, so it must import neither)", () => {
  expect(offenders("shared/envd-token", (t) => !t.startsWith("shared/envd-token/"))).toEqual([]);
});

test("shared/e2b reaches the relay only through its index (the one-way e2b -> relay edge of envd.ts)", () => {
  expect(offenders("shared/e2b", (t) => t.startsWith("shared/relay/") && t !== "shared/relay/index.ts")).toEqual([]);
});
