// sandbox-e2b's build-flag startup refusals (docs/e2b.md §1.2) as a real process: each exits non-zero before
// listening with a message naming the flag; and --help documents every build flag.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSandboxdSim, type SandboxdSim } from "#services/sandboxd-sim/sim.ts";
import { spawnE2b } from "../e2b/process.ts";

const ROOT = "root-build-startup";
let sim: SandboxdSim;
let dir: string;
beforeAll(async () => {
  sim = await startSandboxdSim({ rootToken: ROOT });
  dir = mkdtempSync(join(tmpdir(), "e2b-build-startup-"));
  writeFileSync(join(dir, "secret"), "s3cret\n");
  writeFileSync(join(dir, "keys"), "e2b_key team\n");
  writeFileSync(join(dir, "file"), "not a directory\n");
});
afterAll(async () => {
  await sim.stop();
  rmSync(dir, { recursive: true, force: true });
});

const base = () => [`--sandboxd-seeds=${sim.addr}`, `--sandboxd-token=${ROOT}`, "--e2b-bind-address=127.0.0.1:0", "--e2b-domain=sb.test", `--e2b-envd-secret-file=${join(dir, "secret")}`, `--e2b-api-key-file=${join(dir, "keys")}`, "--e2b-builds"];

async function fails(args: string[], expected: string[]): Promise<void> {
  const child = spawnE2b(args);
  expect(await child.exited).toBe(1);
  const out = child.output().replace(/\\"/g, '"');
  for (const e of expected) expect(out).toContain(e);
  expect(out).not.toContain("e2b surface listening");
}

describe("build startup refusals", () => {
  test("--e2b-build-parallel 0", () => fails([...base(), "--e2b-build-parallel=0"], ["invalid build options", "--e2b-build-parallel"]));
  test("--e2b-build-timeout 0", () => fails([...base(), "--e2b-build-timeout=0s"], ["invalid build options", "--e2b-build-timeout"]));
  test("both stores", () => fails([...base(), `--e2b-build-dir=${join(dir, "up")}`, "--e2b-build-store-s3-bucket=b"], ["are exclusive"]));
  test("a build directory that cannot be created", () => fails([...base(), `--e2b-build-dir=${join(dir, "file", "sub")}`], ["--e2b-build-dir", "cannot be created"]));
  test("an S3 endpoint that is no http(s) URL", () => fails([...base(), "--e2b-build-store-s3-bucket=b", "--e2b-build-store-s3-endpoint=ftp://x"], ["--e2b-build-store-s3-endpoint"]));
});

test("--help documents every build flag with its default", async () => {
  const child = spawnE2b(["--help"]);
  expect(await child.exited).toBe(0);
  const out = child.output();
  for (const flag of ["--e2b-builds", "--e2b-build-parallel", "--e2b-build-timeout", "--e2b-build-log-lines", "--e2b-build-dir", "--e2b-build-upload-max", "--e2b-build-store-s3-bucket", "--e2b-build-store-s3-prefix", "--e2b-build-store-s3-endpoint", "--e2b-build-store-s3-region", "--e2b-build-store-s3-force-path-style"]) {
    expect(out).toContain(flag);
  }
  expect(out).toContain("1073741824");
  expect(out).toContain("30m");
});
