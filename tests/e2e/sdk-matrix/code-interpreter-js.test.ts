// The stock JS code interpreter SDK `@e2b/code-interpreter` (package.json) against both stacks: the simulator's guest
// serves the code interpreter's protocol on port 49999 (services/sandboxd-sim/guest/code-interpreter.ts), so runCode's
// streamed NDJSON replies go through the real e2b surface and envd proxy end to end. Each call is judged as made; the
// verdicts become the "@e2b/code-interpreter (JS)" section of docs/sdk-matrix.md.
import { afterAll, expect, test } from "bun:test";
import { Sandbox } from "@e2b/code-interpreter";
import pkg from "@e2b/code-interpreter/package.json" with { type: "json" };
import { expectThat, ok, Recorder, type Judgement } from "./recorder.ts";
import { onBothStacks, sdkOpts, STACKS, type Target } from "./stacks.ts";

const VARIANT = `@e2b/code-interpreter ${pkg.version}`;
const rec = new Recorder();
const CELL = "import sys\nx = 40\nprint('out line')\nprint('err line', file=sys.stderr)\nx + 2";

afterAll(() => {
  rec.write(
    "code-interpreter-js",
    `@e2b/code-interpreter (JS) ${pkg.version}`,
    [
      `The stock \`@e2b/code-interpreter\` ${pkg.version} from npm, its default template \`code-interpreter-v1\` (an alias of the`,
      "simulated pool image on both stacks), against the simulator guest's code interpreter on port 49999: Python cells",
      "run in a real kernel process inside the sandbox (globals kept per context), JavaScript cells with node in it.",
      "Suite: tests/e2e/sdk-matrix/code-interpreter-js.test.ts.",
    ].join("\n"),
    STACKS,
  );
});

onBothStacks((target) => {
  test(`${VARIANT}: runCode (results, errors, streaming, envs, languages) and code contexts`, async () => {
    const t: Target = target();
    const c = (call: string, fn: () => Promise<Judgement>) => rec.cell(t.stack, VARIANT, call, fn);
    let sb!: Sandbox;
    const created = await c("Sandbox.create (code-interpreter-v1)", async () => {
      sb = await Sandbox.create(sdkOpts(t));
      return ok();
    });
    if (created.verdict === "fails") throw new Error(created.detail);
    try {
      await c("runCode (result, logs)", async () => {
        const ex = await sb.runCode(CELL);
        return expectThat(ex.text === "42" && ex.logs.stdout.join("") === "out line\n" && ex.logs.stderr.join("") === "err line\n" && ex.error === undefined && ex.results[0]?.isMainResult === true, ex.toJSON());
      });
      await c("runCode (state kept between cells)", async () => expectThat((await sb.runCode("x * 2")).text === "80", "x lost"));
      await c("runCode (onStdout/onStderr/onResult streaming)", async () => {
        const seen: string[] = [];
        const started = performance.now();
        let firstAt = 0;
        await sb.runCode("import time, sys\nfor i in range(3):\n  print(i); print('e', i, file=sys.stderr); time.sleep(0.2)\n'done'", {
          onStdout: (m) => {
            firstAt ||= performance.now() - started;
            seen.push(`out:${m.line}`);
          },
          onStderr: (m) => void seen.push(`err:${m.line}`),
          onResult: (r) => void seen.push(`result:${r.text}`),
        });
        // Streamed: the first line arrives while the cell still sleeps (it takes 600 ms in all).
        return expectThat(seen.join(",") === "out:0\n,err:e 0\n,out:1\n,err:e 1\n,out:2\n,err:e 2\n,result:'done'" && firstAt < 450, { seen, firstAt });
      });
      await c("runCode (error: name, value, traceback; onError)", async () => {
        let called = false;
        const ex = await sb.runCode("1/0", { onError: () => void (called = true) });
        return expectThat(ex.error?.name === "ZeroDivisionError" && ex.error.value === "division by zero" && ex.error.traceback.includes("ZeroDivisionError") && called, ex.error);
      });
      await c("runCode (envs)", async () => expectThat((await sb.runCode("import os\nos.environ['GREETING']", { envs: { GREETING: "hi" } })).text === "'hi'", "no env"));
      await c("runCode (language: js)", async () => {
        const ex = await sb.runCode("console.log(6 * 7)", { language: "js" });
        return expectThat(ex.logs.stdout.join("") === "42\n" && ex.error === undefined, ex.toJSON());
      });
      let ctx!: Awaited<ReturnType<Sandbox["createCodeContext"]>>;
      await c("createCodeContext", async () => {
        ctx = await sb.createCodeContext({ cwd: "/tmp" });
        return expectThat(typeof ctx.id === "string" && ctx.cwd === "/tmp" && ctx.language === "python", ctx);
      });
      await c("runCode (context: its own globals and cwd)", async () => {
        const ex = await sb.runCode("import os\n('x' in dir(), os.getcwd())", { context: ctx });
        return expectThat(ex.text === "(False, '/tmp')", ex.text);
      });
      await c("listCodeContexts", async () => expectThat((await sb.listCodeContexts()).some((x) => x.id === ctx.id), "missing"));
      await c("restartCodeContext", async () => {
        await sb.runCode("kept = 1", { context: ctx });
        await sb.restartCodeContext(ctx);
        return expectThat((await sb.runCode("'kept' in dir()", { context: ctx })).text === "False", "state survived a restart");
      });
      await c("removeCodeContext", async () => {
        await sb.removeCodeContext(ctx);
        return expectThat(!(await sb.listCodeContexts()).some((x) => x.id === ctx.id), "still listed");
      });
    } finally {
      await c("kill", async () => expectThat(await sb.kill(), "not killed"));
    }
    expect(rec.failures(t.stack)).toEqual([]);
  }, 180_000);
});
