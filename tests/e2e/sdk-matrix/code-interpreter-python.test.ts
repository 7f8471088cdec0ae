// The stock Python code interpreter SDK `e2b-code-interpreter` (pinned in tests/support/python/requirements.txt,
// installed into the suite's cached venv), sync and async, against both stacks: the simulator's guest serves the code
// interpreter's protocol on port 49999. Scenario: tests/e2e/python/code_interpreter.py; each step judged here; the
// verdicts become the "e2b-code-interpreter (Python)" section of docs/sdk-matrix.md.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Judgement } from "./recorder.ts";
import { expectThat, fails, Recorder } from "./recorder.ts";
import { onBothStacks, STACKS, type Target } from "./stacks.ts";
import { runPythonScenario, type ScenarioStep } from "#tests/support/python/scenario.ts";
import { ensurePythonSdk, pinnedVersion } from "#tests/support/python/venv.ts";

const rec = new Recorder();
const VERSION = pinnedVersion("e2b-code-interpreter");

beforeAll(async () => {
  const sdk = await ensurePythonSdk();
  console.log(`python venv (e2b ${sdk.e2bVersion}, e2b-code-interpreter ${VERSION}): ${sdk.built ? "installed" : "cached"} in ${sdk.seconds.toFixed(1)} s`);
}, 300_000);

afterAll(() => {
  rec.write(
    "code-interpreter-python",
    `e2b-code-interpreter (Python) ${VERSION}`,
    [
      `The stock \`e2b-code-interpreter\` ${VERSION} from PyPI (with e2b ${pinnedVersion("e2b")}; tests/support/python/requirements.txt), sync`,
      "(`Sandbox`) and async (`AsyncSandbox`), its default template `code-interpreter-v1`, pointed at each stack by",
      "`E2B_API_KEY`, `E2B_API_URL`, `E2B_SANDBOX_URL` and `E2B_DOMAIN`. Suite: tests/e2e/sdk-matrix/code-interpreter-python.test.ts,",
      "scenario: tests/e2e/python/code_interpreter.py.",
    ].join("\n"),
    STACKS,
  );
});

interface Summary {
  text: string | null;
  stdout: string[];
  stderr: string[];
  error: { name: string; value: string } | null;
}

/** What e2b cloud answers for each step of code_interpreter.py. */
function judge(s: ScenarioStep): Judgement {
  if (s.status === "skipped") return fails("skipped: an earlier step failed");
  if (s.status === "error") return fails(`raised ${s.error.type}: ${s.error.message}`);
  const v = s.value as Summary & Record<string, unknown>;
  switch (s.call) {
    case "Sandbox.create":
      return expectThat(v !== null, v);
    case "run_code (result, logs)":
      return expectThat(v.text === "42" && v.stdout.join("") === "out line\n" && v.stderr.join("") === "err line\n" && v.error === null, v);
    case "run_code (state kept)":
      return expectThat(v.text === "80", v);
    case "run_code (on_stdout/on_stderr)":
      return expectThat((v.out as string[]).join("") === "0\n1\n2\n" && (v.err as string[]).join("") === "e 0\ne 1\ne 2\n", v);
    case "run_code (error)":
      return expectThat(v.error?.name === "ZeroDivisionError" && v.error.value === "division by zero", v);
    case "run_code (envs)":
      return expectThat(v.text === "'hi'", v);
    case "create_code_context":
      return expectThat(v !== null, v);
    case "run_code (context)":
      return expectThat(v.text === "False", v);
    case "list_code_contexts":
      return expectThat((v as unknown) === 1, v);
    case "restart_code_context":
      return expectThat(v.text === "1" && v.error === null, v);
    case "remove_code_context":
      return expectThat((v as unknown) === 0, v);
    case "run_code (language=js)":
      return expectThat(v.stdout.join("") === "42\n" && v.error === null, v);
    case "kill":
      return expectThat((v as unknown) === true, v);
    default:
      return fails(`no verdict for step ${s.call}`);
  }
}

onBothStacks((target) => {
  for (const mode of ["sync", "async"] as const) {
    test(`e2b-code-interpreter ${VERSION} (${mode}): run_code, streaming callbacks, errors, envs, contexts, a JS cell`, async () => {
      const t: Target = target();
      const r = await runPythonScenario("code_interpreter", { apiKey: t.apiKey, apiUrl: t.apiUrl, sandboxUrl: t.sandboxUrl, domain: t.domain }, { args: [mode] });
      if (r.abortedAtExit) console.log(`${mode}: the interpreter aborted at exit after a complete record (the Rust transport's known abort)`);
      expect(r.version).toBe(VERSION);
      for (const s of r.steps) await rec.cell(t.stack, mode, s.call, async () => judge(s));
      expect(r.steps.length).toBeGreaterThan(10);
      expect(rec.failures(t.stack).filter((f) => f.startsWith(`${mode} `))).toEqual([]);
    }, 180_000);
  }
});
