// `bun run build` compiles the four binaries; each compiled binary names its build (version from
// package.json, a real git revision, the build time) and answers --help with its whole flag table.
import { beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { FlagTable } from "#shared/config/index.ts";
import { apiserverFlags } from "#services/sandbox-apiserver/flags.ts";
import { e2bMeshFlags } from "#services/sandbox-e2b/flags.ts";
import { envdProxyFlags } from "#services/sandbox-envd-proxy/flags.ts";
import { vkSandboxFlags } from "#services/vk-sandbox/flags.ts";

const root = join(import.meta.dir, "..", "..");
const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version as string;
const binaries: [string, FlagTable][] = [
  ["vk-sandbox", vkSandboxFlags],
  ["sandbox-apiserver", apiserverFlags],
  ["sandbox-envd-proxy", envdProxyFlags],
  ["sandbox-e2b", e2bMeshFlags],
];

let buildOutput = "";
let buildSeconds = 0;

beforeAll(() => {
  const started = performance.now();
  const proc = Bun.spawnSync(["bun", "run", "build"], { cwd: root, stdout: "pipe", stderr: "pipe" });
  buildSeconds = (performance.now() - started) / 1000;
  buildOutput = `${proc.stdout.toString()}${proc.stderr.toString()}`;
  if (proc.exitCode !== 0) throw new Error(`bun run build failed:\n${buildOutput}`);
  console.log(`bun run build: ${buildSeconds.toFixed(1)}s\n${buildOutput.trim()}`);
}, 600_000);

describe("bun run build", () => {
  test("reports each binary and its build identity", () => {
    for (const [name] of binaries) expect(buildOutput).toContain(`dist/${name}`);
    expect(buildOutput).toMatch(/version \S+ rev=\S+ built=\S+/);
  });

  for (const [name, table] of binaries) {
    describe(name, () => {
      const bin = join(root, "dist", name);

      test("exists and --version names the build with a real revision, exit 0", () => {
        expect(existsSync(bin)).toBe(true);
        const proc = Bun.spawnSync([bin, "--version"], { cwd: root });
        expect(proc.exitCode).toBe(0);
        const line = proc.stdout.toString();
        const m = /^(\S+) (\S+) \(rev=(\S+) built=(\S+)\)\n$/.exec(line);
        expect(m).not.toBeNull();
        const [, binName, binVersion, rev, built] = m!;
        expect(binName).toBe(name);
        expect(binVersion).toBe(version);
        expect(rev).not.toBe("dev");
        expect(rev).not.toBe("unknown");
        expect(rev).toMatch(/^[0-9a-f]{7,40}(-dirty)?$/);
        expect(Number.isNaN(Date.parse(built!))).toBe(false);
      });

      test("--help lists every flag of its table, exit 0", () => {
        const proc = Bun.spawnSync([bin, "--help"], { cwd: root });
        expect(proc.exitCode).toBe(0);
        const text = proc.stdout.toString();
        for (const spec of Object.values(table)) {
          expect(text).toContain(`--${spec.flag}`);
          if (spec.env) expect(text).toContain(spec.env);
        }
        expect(text).toContain("--version");
      });

      test("an unknown flag exits 2 naming it", () => {
        const proc = Bun.spawnSync([bin, "--no-such-flag"], { cwd: root });
        expect(proc.exitCode).toBe(2);
        expect(proc.stderr.toString()).toContain("--no-such-flag");
      });
    });
  }

  // The simulator is a development substrate, built when its entry point exists; it embeds the same identity.
  test.if(existsSync(join(root, "services", "sandboxd-sim", "main.ts")))("dist/sandboxd-sim names its build too", () => {
    const proc = Bun.spawnSync([join(root, "dist", "sandboxd-sim"), "--version"], { cwd: root });
    expect(proc.exitCode).toBe(0);
    expect(proc.stdout.toString()).toMatch(new RegExp(`^sandboxd-sim ${version.replaceAll(".", "\\.")} \\(rev=[0-9a-f]{7,40}(-dirty)? built=\\S+\\)\\n$`));
  });
});
