// Guards on the shape of the codebase (style item 18): the whole tree type-checks under strict mode, and shared
// code never reaches into a service. Both would otherwise only be noticed by whoever next reads the code.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = join(import.meta.dir, "..", "..", "..");

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

test("the whole tree type-checks with tsc in strict mode (zero errors)", () => {
  const tsc = join(root, "node_modules", ".bin", "tsc");
  const run = Bun.spawnSync([tsc, "--noEmit", "-p", root], { cwd: root, stdout: "pipe", stderr: "pipe" });
  const output = run.stdout.toString() + run.stderr.toString();
  expect(output).toBe("");
  expect(run.exitCode).toBe(0);
}, 120_000);

test("no module under shared/ imports from services/", () => {
  const offenders = tsFiles(join(root, "shared")).filter((file) =>
    /^\s*(import|export)\b[^;]*?from\s+["'][^"']*\/services\//m.test(readFileSync(file, "utf8")),
  );
  expect(offenders.map((f) => relative(root, f))).toEqual([]);
});
