// Citations stay inside the repository (issue 27 item 5): code and docs cite the specification only by the six
// documents docs/spec-sections.md maps to this repository's files (`sandboxd §2.1`, `vk-sandbox.md §10`); any
// other `<name>.md` they name must be a file of this repository. A citation of background material outside it
// (an anchors or style document) sends a reader nowhere: what was taken from it is written where it is used.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { basename, join } from "node:path";

const root = join(import.meta.dir, "..", "..", "..");
const MAPPED = new Set(["vk-sandbox.md", "sandboxd.md", "e2b.md", "envd-proxy.md", "sandbox-apiserver.md", "chart.md"]);
const AREAS = ["shared/", "services/", "tests/", "scripts/", "docs/", "chart/", "manifests/", "images/", "examples/", "README.md"];

function trackedFiles(): string[] {
  const r = Bun.spawnSync(["git", "ls-files"], { cwd: root, stdout: "pipe" });
  return r.stdout.toString().split("\n").filter((f) => f !== "");
}

test("every <name>.md the code and docs cite is one of the mapped spec documents or a file of this repository", () => {
  const files = trackedFiles();
  const names = new Set(files.map((f) => basename(f)));
  const offenders: string[] = [];
  for (const file of files) {
    if (!AREAS.some((a) => file.startsWith(a)) || !/\.(ts|md|ya?ml|sh|tpl|py|json)$/.test(file)) continue;
    if (file === "tests/unit/architecture/spec-citations.test.ts") continue;
    const text = readFileSync(join(root, file), "utf8");
    for (const m of text.matchAll(/(?<![\w./-])([A-Za-z0-9_-]+\.md)\b/g)) {
      const doc = m[1]!;
      if (MAPPED.has(doc) || names.has(doc)) continue;
      offenders.push(`${file}: ${doc}`);
    }
  }
  expect(offenders).toEqual([]);
});
