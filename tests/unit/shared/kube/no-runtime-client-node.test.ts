// Architecture guard: @kubernetes/client-node is a devDependency for types only. Loaded at run time under Bun it
// would silently ignore a kubeconfig's CA, client certificate and skip-verify (docs/decisions.md#kube-transport), and it
// would not be in a production install. Every import of it in shipped code must be `import type`.
import { expect, test } from "bun:test";
import { Glob } from "bun";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..", "..", "..");

test("no shipped module imports @kubernetes/client-node at run time", () => {
  const offenders: string[] = [];
  for (const dir of ["shared", "services", "scripts"]) {
    for (const file of new Glob("**/*.ts").scanSync({ cwd: join(root, dir), onlyFiles: true })) {
      const text = readFileSync(join(root, dir, file), "utf8");
      // Statements that reach the package: import/export ... from, bare import, require(), dynamic import().
      const re = /(?:^|[;\n])\s*(import|export)\s+([^;]*?)\s+from\s+["']@kubernetes\/client-node[^"']*["']|import\s*\(\s*["']@kubernetes\/client-node|require\(\s*["']@kubernetes\/client-node|^\s*import\s+["']@kubernetes\/client-node/gm;
      for (const m of text.matchAll(re)) {
        // Only `import type` / `export type` is erased whole. `import { type X }` is not: under verbatimModuleSyntax
        // it leaves `import {} from "..."` behind, which still loads the package.
        const typeOnly = m[2] !== undefined && /^type\s/.test(m[2]);
        if (!typeOnly) offenders.push(`${dir}/${file}: ${m[0].trim()}`);
      }
    }
  }
  expect(offenders).toEqual([]);
});
