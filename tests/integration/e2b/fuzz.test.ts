// schemathesis (installed from PyPI by the script on first use) fuzzes the e2b surface from its own /openapi.json:
// no input may produce a 5xx, and every response must match the documented schema.
import { expect, test } from "bun:test";
import { join } from "node:path";

const root = join(import.meta.dir, "../../..");
// Without python3 the fuzzer cannot be installed at all; every machine kind this project runs on has it.
const hasPython = Bun.spawnSync(["python3", "--version"]).exitCode === 0;

test.skipIf(!hasPython)("schemathesis finds no 5xx and no schema mismatch caused by input alone", () => {
  const proc = Bun.spawnSync(["bash", "tests/fuzz/schemathesis.sh", "25"], { cwd: root, env: { ...process.env, NO_COLOR: "1" } });
  const out = proc.stdout.toString() + proc.stderr.toString();
  const generated = /(\d+) generated, (\d+) passed/.exec(out);
  console.log(generated ? `schemathesis: ${generated[0]}` : out.slice(-3000));
  expect(proc.exitCode).toBe(0);
  expect(generated).not.toBeNull();
  expect(generated![1]).toBe(generated![2]);
}, 600_000);
