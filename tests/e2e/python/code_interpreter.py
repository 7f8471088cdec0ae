"""The stock Python code interpreter SDK (e2b-code-interpreter, pinned in tests/support/python/requirements.txt)
against a stack whose guest serves the code interpreter's protocol on port 49999: create (its default template,
code-interpreter-v1), run_code with a result, streamed stdout/stderr callbacks, an error, env vars, contexts (create,
list, run in one, restart, remove) and a JavaScript cell; sync or async (argv[1]). Connection settings come from the
environment the bun test hands over (E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN), as a user's would.
Prints one JSON record on its last line (record.py); the bun test judges each step.
"""

import asyncio
import json
import sys
from importlib.metadata import version

from e2b_code_interpreter import AsyncSandbox, Sandbox

from record import Record

CELL = "import sys\nx = 40\nprint('out line')\nprint('err line', file=sys.stderr)\nx + 2"


def summary(ex):
    return {
        "text": ex.text,
        "stdout": ex.logs.stdout,
        "stderr": ex.logs.stderr,
        "error": None if ex.error is None else {"name": ex.error.name, "value": ex.error.value},
        "count": ex.execution_count,
    }


def run_sync(rec):
    sbx = rec.step("Sandbox.create", lambda: Sandbox.create())
    if sbx is None:
        return
    try:
        streamed = {"out": [], "err": []}
        rec.step("run_code (result, logs)", lambda: summary(sbx.run_code(CELL)))
        rec.step("run_code (state kept)", lambda: summary(sbx.run_code("x * 2")))
        rec.step(
            "run_code (on_stdout/on_stderr)",
            lambda: (summary(sbx.run_code("import time, sys\nfor i in range(3):\n  print(i); print('e', i, file=sys.stderr); time.sleep(0.05)",
                                          on_stdout=lambda m: streamed["out"].append(m.line), on_stderr=lambda m: streamed["err"].append(m.line))), streamed)[1],
        )
        rec.step("run_code (error)", lambda: summary(sbx.run_code("1/0")))
        rec.step("run_code (envs)", lambda: summary(sbx.run_code("import os\nos.environ['GREETING']", envs={"GREETING": "hi"})))
        ctx = rec.step("create_code_context", lambda: sbx.create_code_context())
        if ctx is not None:
            rec.step("run_code (context)", lambda: summary(sbx.run_code("'x' in dir()", context=ctx)))
            rec.step("list_code_contexts", lambda: [c.id for c in sbx.list_code_contexts()].count(ctx.id))
            rec.step("restart_code_context", lambda: (sbx.restart_code_context(ctx), summary(sbx.run_code("y = 1\ny", context=ctx)))[1])
            rec.step("remove_code_context", lambda: (sbx.remove_code_context(ctx), [c.id for c in sbx.list_code_contexts()].count(ctx.id))[1])
        rec.step("run_code (language=js)", lambda: summary(sbx.run_code("console.log(6 * 7)", language="js")))
    finally:
        rec.step("kill", lambda: sbx.kill())


async def run_async(rec):
    sbx = await rec.astep("Sandbox.create", lambda: AsyncSandbox.create())
    if sbx is None:
        return
    try:
        streamed = {"out": [], "err": []}

        async def ran(code, **kw):
            return summary(await sbx.run_code(code, **kw))

        await rec.astep("run_code (result, logs)", lambda: ran(CELL))
        await rec.astep("run_code (state kept)", lambda: ran("x * 2"))

        async def streaming():
            await sbx.run_code("import time, sys\nfor i in range(3):\n  print(i); print('e', i, file=sys.stderr); time.sleep(0.05)",
                               on_stdout=lambda m: streamed["out"].append(m.line), on_stderr=lambda m: streamed["err"].append(m.line))
            return streamed

        await rec.astep("run_code (on_stdout/on_stderr)", streaming)
        await rec.astep("run_code (error)", lambda: ran("1/0"))
        await rec.astep("run_code (envs)", lambda: ran("import os\nos.environ['GREETING']", envs={"GREETING": "hi"}))
        ctx = await rec.astep("create_code_context", lambda: sbx.create_code_context())
        if ctx is not None:
            await rec.astep("run_code (context)", lambda: ran("'x' in dir()", context=ctx))

            async def listed():
                return [c.id for c in await sbx.list_code_contexts()].count(ctx.id)

            await rec.astep("list_code_contexts", listed)

            async def restarted():
                await sbx.restart_code_context(ctx)
                return await ran("y = 1\ny", context=ctx)

            await rec.astep("restart_code_context", restarted)

            async def removed():
                await sbx.remove_code_context(ctx)
                return await listed()

            await rec.astep("remove_code_context", removed)
        await rec.astep("run_code (language=js)", lambda: ran("console.log(6 * 7)", language="js"))
    finally:
        await rec.astep("kill", lambda: sbx.kill())


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "sync"
    rec = Record()
    if mode == "async":
        asyncio.run(run_async(rec))
    else:
        run_sync(rec)
    print(json.dumps({"client": "e2b-code-interpreter", "version": version("e2b-code-interpreter"), "mode": mode, "http_version": "default", "steps": rec.steps}, default=str))


main()
