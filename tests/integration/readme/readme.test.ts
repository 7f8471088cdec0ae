// A newcomer runs what the stack prints and what the README says (issue 21 item 5): the README's fenced commands —
// the stack command, the test command, the examples — and the stack's `try:` lines run exactly as printed in a shell
// whose PATH has no bun (Bun installed by the bootstrap only), the stack ones against a stack started by the
// README's own command. The try-lines run from a directory outside the clone: they are printed with absolute paths.
import { afterAll, describe, expect, test } from "bun:test";
import { accessSync, constants, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, relative } from "node:path";
import { REPO, type RunningStack, startStack } from "#tests/e2e/stack/run-stack.ts";
import { run } from "#tests/support/run.ts";
import { waitFor } from "#tests/support/wait.ts";

const README = readFileSync(join(REPO, "README.md"), "utf8");

/** Every command line of the README's fenced blocks, comments and blank lines dropped. */
function fencedCommands(md: string): string[] {
  const out: string[] = [];
  let inside = false;
  for (const raw of md.split("\n")) {
    if (/^```/.test(raw)) {
      inside = !inside;
      continue;
    }
    if (!inside) continue;
    const line = raw.replace(/\s+#\s.*$/, "").trim();
    if (line && !line.startsWith("#")) out.push(line);
  }
  return out;
}

const commands = fencedCommands(README);
const find = (re: RegExp) => commands.filter((c) => re.test(c));

/** This process's PATH without any directory holding a `bun`: what a shell looks like after the bootstrap only. */
function pathWithoutBun(): string {
  return (process.env.PATH ?? "")
    .split(delimiter)
    .filter((dir) => {
      try {
        accessSync(join(dir, "bun"), constants.X_OK);
        return false;
      } catch {
        return true;
      }
    })
    .join(delimiter);
}

const NO_BUN = pathWithoutBun();
/**
 * The newcomer's environment. A checkout whose node_modules is a link to another checkout's (a worktree sharing it)
 * must not reinstall into that tree; a fresh clone installs as the README says.
 */
const shellEnv: Record<string, string> = {
  ...(process.env as Record<string, string>),
  PATH: NO_BUN,
  ...(lstatSync(join(REPO, "node_modules"), { throwIfNoEntry: false })?.isSymbolicLink() ? { SANDBOX_SKIP_JS_INSTALL: "1" } : {}),
};

/** A line run by bash as a user pastes it, after the stack's export lines. */
function shell(line: string, exports: string[], cwd: string, timeoutMs = 120_000) {
  return run(["bash", "-c", [...exports, line].join("\n")], { cwd, env: shellEnv, timeoutMs });
}

/** What examples/build.ts prints when its build ran and the sandbox from the template saw every step. */
function expectBuilt(r: { code: number; stdout: string; stderr: string }): void {
  expect(r.stderr).not.toContain("command not found");
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("build info: template example-build ready");
  expect(r.stdout).toContain("built by examples/build.ts\nthis file was copied into the template by examples/build.ts\nhello from the template in /app\nstart command ran\n");
}

const tryLines = (s: RunningStack) => s.out.filter((l) => l.startsWith("stack: try: ")).map((l) => l.slice("stack: try: ".length));
const exportLines = (s: RunningStack) => s.out.filter((l) => l.startsWith("export "));

const elsewhere = mkdtempSync(join(tmpdir(), "readme-newcomer-"));
const stacks: RunningStack[] = [];
afterAll(async () => {
  for (const s of stacks) await s.discard("readme");
  rmSync(elsewhere, { recursive: true, force: true });
});

describe("the README's commands", () => {
  test("the test has a shell without bun to run them in", async () => {
    expect((await run(["bash", "-c", "command -v bun || echo none"], { env: shellEnv })).stdout.trim()).toBe("none");
  });

  test("its fenced blocks hold the stack command, the test command and the examples; no line calls a bare bun", () => {
    expect(find(/^bash scripts\/stack\.sh$/)).toHaveLength(1);
    expect(find(/^bash scripts\/test\.sh$/)).toHaveLength(1);
    expect(find(/^\.\/scripts\/bun examples\/hello\.ts$/)).toHaveLength(1);
    expect(find(/^\.\/scripts\/bun examples\/build\.ts$/)).toHaveLength(1);
    expect(find(/^\.\/scripts\/kubectl apply -f examples\/sandbox-pod\.yaml$/)).toHaveLength(1);
    expect(commands.filter((c) => /^bun /.test(c))).toEqual([]);
  });

  test("bash scripts/test.sh runs the suite's runner and ends with its N passed, N failed line (given one small file: the whole suite would run itself)", async () => {
    const [cmd] = find(/^bash scripts\/test\.sh$/);
    const r = await run(["bash", "-c", `${cmd} tests/unit/services/sandbox-apiserver/api/table.test.ts`], { cwd: REPO, env: shellEnv, timeoutMs: 300_000 });
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n").at(-1)).toMatch(/^[1-9]\d* passed, 0 failed$/);
  }, 320_000);

  test("bash scripts/test.sh gives every file the suite's 60 s default budget, not only the first (bun's preload reaches one file)", async () => {
    const [cmd] = find(/^bash scripts\/test\.sh$/);
    // Two files each with a test that takes longer than bun's own 5 s default and names no timeout.
    const dir = join(REPO, "tests", ".out", "timeout-probe");
    mkdirSync(dir, { recursive: true });
    const files = ["first", "second"].map((n) => {
      const f = join(dir, `${n}.test.ts`);
      writeFileSync(f, 'import { test } from "bun:test";\ntest("outlasts 5 s", async () => { await Bun.sleep(5_500); });\n');
      return `./${relative(REPO, f)}`;
    });
    const r = await run(["bash", "-c", `${cmd} ${files.join(" ")}`], { cwd: REPO, env: shellEnv, timeoutMs: 300_000 });
    expect(r.stdout.trim().split("\n").at(-1)).toBe("2 passed, 0 failed");
    expect(r.code).toBe(0);
  }, 320_000);

  test("bash scripts/test.sh --contended runs a CPU burner per core beside the tests and stops every one when they end", async () => {
    const [cmd] = find(/^bash scripts\/test\.sh --contended$/);
    expect(cmd).toBeDefined();
    const r = await run(["bash", "-c", `${cmd} tests/unit/services/sandbox-apiserver/api/table.test.ts`], { cwd: REPO, env: shellEnv, timeoutMs: 300_000 });
    expect(r.code).toBe(0);
    const pids = /^contended: (\d+) CPU burners \(pids ([\d, ]+)\)/m.exec(r.stdout);
    expect(Number(pids?.[1])).toBe(navigator.hardwareConcurrency);
    expect(r.stdout).toMatch(/suite wall time: [\d.]+s \(contended: \d+ CPU burners beside it\)/);
    expect(r.stdout.trim().split("\n").at(-1)).toMatch(/^[1-9]\d* passed, 0 failed$/);
    // Each burner (a watchdog shell and its yes) is gone once the runner has ended.
    const gone = (pid: number) => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    const shells = pids![2]!.split(", ").map(Number);
    await waitFor("every burner to end", () => shells.every(gone), 10_000);
  }, 320_000);
});

describe("bash scripts/stack.sh --mesh", () => {
  test("its try-lines (hello, a template build) and the README's examples run as printed, with no bun on PATH", async () => {
    const [cmd] = find(/^bash scripts\/stack\.sh$/);
    const stack = await startStack([...cmd!.split(" ").slice(2), "--mesh"], 300_000, shellEnv);
    stacks.push(stack);
    const lines = tryLines(stack);
    expect(lines).toEqual([`${REPO}/scripts/bun ${REPO}/examples/hello.ts`, `${REPO}/scripts/bun ${REPO}/examples/build.ts`]);
    const hello = await shell(lines[0]!, exportLines(stack), elsewhere);
    expect(hello.stderr).not.toContain("command not found");
    expect(hello.code).toBe(0);
    expect(hello.stdout).toContain("hello\n");
    const built = await shell(lines[1]!, exportLines(stack), elsewhere);
    expectBuilt(built);
    expect(built.stdout).toContain("Uploaded 'build-files/motd.txt'");
    const readme = await shell(find(/^\.\/scripts\/bun examples\/hello\.ts$/)[0]!, exportLines(stack), REPO);
    expect(readme.code).toBe(0);
    expect(readme.stdout).toContain("killed");
    // The README's build line from the clone: the archive is in the stack's directory store already.
    const rebuilt = await shell(find(/^\.\/scripts\/bun examples\/build\.ts$/)[0]!, exportLines(stack), REPO);
    expectBuilt(rebuilt);
    expect(rebuilt.stdout).toContain("Skipping upload of 'build-files/motd.txt', already cached");
    await stack.stop();
  }, 400_000);
});

describe("bash scripts/stack.sh (full)", () => {
  test("its try-lines (the SDK example kept, kubectl get sandboxes -A listing it, the example Pod, a template build) and the README's kubectl example run as printed", async () => {
    const stack = await startStack([], 600_000, shellEnv);
    stacks.push(stack);
    const exports = exportLines(stack);
    const lines = tryLines(stack);
    expect(lines).toEqual([
      `${REPO}/scripts/bun ${REPO}/examples/hello.ts --keep`,
      `${REPO}/scripts/kubectl get sandboxes -A -o wide`,
      `${REPO}/scripts/kubectl apply -f ${REPO}/examples/sandbox-pod.yaml`,
      `${REPO}/scripts/bun ${REPO}/examples/build.ts`,
    ]);
    const kept = await shell(lines[0]!, exports, elsewhere);
    // The whole result on failure: what the example printed says why.
    expect(kept).toMatchObject({ code: 0 });
    expect(kept.stdout).toContain("hello\n");
    // The SDK's id is `<claim id with - for _>`; -o wide prints the claim id.
    const claimId = /^sandbox (\S+)$/m.exec(kept.stdout)![1]!.replace("-", "_");
    // The kept sandbox is listed once its node publishes (every 2 s in the stack): the same line, until it shows.
    const listed = await waitFor("the kept sandbox in kubectl get sandboxes -A", async () => {
      const r = await shell(lines[1]!, exports, elsewhere);
      return r.code === 0 && r.stdout.includes(claimId) ? r.stdout : undefined;
    }, 30_000, 500);
    expect(listed.split("\n")[0]).toMatch(/^NAMESPACE\s+NAME\s+PHASE\s+MODE\s+NODE\s+TEMPLATE\s+AGE\s+CLAIM ID\s+ADDRESS\s+DEADLINE$/);
    const pod = await shell(lines[2]!, exports, elsewhere);
    expect(pod.code).toBe(0);
    expect(pod.stdout).toMatch(/^pod\/\S+ created$/m);
    const readme = await shell(find(/^\.\/scripts\/kubectl apply -f examples\/sandbox-pod\.yaml$/)[0]!, exports, REPO);
    expect(readme.code).toBe(0);
    // The same Pod again (the node has written to it since, so kubectl may say configured).
    expect(readme.stdout).toMatch(/^pod\/\S+ (configured|unchanged)$/m);
    expectBuilt(await shell(lines[3]!, exports, elsewhere));
    await stack.stop();
  }, 700_000);
});
