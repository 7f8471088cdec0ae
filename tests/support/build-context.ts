// The build context the SDK build tests copy from (tests/e2e/builds: the JS test and the Python one's build.py):
// a directory `data/` with a nested file and a single file beside it. The caller removes it (rmSync, recursive).
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh temporary context: data/a.txt "alpha", data/sub/b.txt "beta", single.txt "one file". */
export function makeBuildContext(prefix: string): string {
  const ctx = mkdtempSync(join(tmpdir(), prefix));
  mkdirSync(join(ctx, "data", "sub"), { recursive: true });
  writeFileSync(join(ctx, "data", "a.txt"), "alpha\n");
  writeFileSync(join(ctx, "data", "sub", "b.txt"), "beta\n");
  writeFileSync(join(ctx, "single.txt"), "one file\n");
  return ctx;
}
