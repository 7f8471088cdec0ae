"""The rest of the Python e2b SDK's sandbox calls, one step each, as the JS scenarios (tests/e2e/stack/sdk-scenarios.ts)
try them: commands (env from create, cwd, user, exit codes, streaming, background, stdin, timeouts), files (write,
read, batch, bytes, list, info, rename, make_dir, remove, watch), get_host, metrics, list filters, pause and connect,
the class-level kill, and create's Idempotency-Key. argv[1]: "sync" or "async"; the same steps run on both clients,
since every sync call is awaited only when it returns an awaitable.

Prints one JSON record on the last stdout line, the shape lifecycle.py prints (tests/support/python/scenario.ts).
"""

import asyncio
import hashlib
import inspect
import json
import os
import sys
import time
import uuid

import e2b
from e2b import AsyncSandbox, Sandbox, SandboxQuery, SandboxState

from record import Record, aconverge

TEMPLATE = os.environ.get("SCENARIO_TEMPLATE", "base")


async def w(v):
    """The value, awaited if the client is the async one."""
    return await v if inspect.isawaitable(v) else v


async def ids(pages):
    out = []
    while pages.has_next:
        out.extend(s.sandbox_id for s in await w(pages.next_items()))
    return out


def result(r):
    return {"stdout": r.stdout, "stderr": r.stderr, "exit_code": r.exit_code}


def exit_error(e):
    return {"type": type(e).__name__, "exit_code": getattr(e, "exit_code", None), "stderr": getattr(e, "stderr", None)}


async def scenario(rec, cls, mode):
    run_id = uuid.uuid4().hex[:12]
    sb = await rec.astep("Sandbox.create(metadata, envs)", lambda: w(cls.create(TEMPLATE, timeout=120, metadata={"suite": "py-matrix", "run": run_id}, envs={"FROM_CREATE": "yes"})))
    if sb is None:
        return
    rec.steps[-1]["value"] = {"sandbox_id": sb.sandbox_id}
    killed = False
    try:
        await commands(rec, sb)
        await files(rec, sb, mode)
        async def host():
            return {"host": sb.get_host(3000), "sandbox_id": sb.sandbox_id}

        await rec.astep("get_host", host)

        async def metrics():
            ms = await w(sb.get_metrics())
            return {"count": len(ms), "cpu_count": ms[0].cpu_count if ms else None}

        await rec.astep("get_metrics", metrics)

        async def by_metadata():
            return sb.sandbox_id in await ids(cls.list(query=SandboxQuery(metadata={"run": run_id})))

        async def by_state():
            return sb.sandbox_id in await ids(cls.list(query=SandboxQuery(state=[SandboxState.RUNNING])))

        await rec.astep("Sandbox.list(metadata filter)", lambda: aconverge(by_metadata))
        await rec.astep("Sandbox.list(state=running)", lambda: aconverge(by_state))
        await pause_connect(rec, cls, sb)
        await rec.astep("is_running", lambda: w(sb.is_running()))
        await rec.astep("Sandbox.kill(id)", lambda: w(cls.kill(sb.sandbox_id)))
        killed = True
        await rec.astep("is_running after kill", lambda: w(sb.is_running()))
        await rec.astep("Sandbox.kill(id) again", lambda: w(cls.kill(sb.sandbox_id)))
    finally:
        if not killed:
            await rec.astep("cleanup kill", lambda: w(sb.kill()))
    await idempotent_create(rec, cls)


async def commands(rec, sb):
    await rec.astep("commands.run(env from create)", lambda: run(sb, "echo $FROM_CREATE"))
    await rec.astep("commands.run(pwd)", lambda: run(sb, "pwd"))
    await rec.astep("commands.run(cwd=/tmp)", lambda: run(sb, "pwd", cwd="/tmp"))
    await rec.astep("commands.run(id -u)", lambda: run(sb, "id -u"))
    await rec.astep("commands.run(user=root)", lambda: run(sb, "id -u", user="root"))

    async def failing():
        try:
            await run(sb, "echo warn >&2; exit 3")
        except e2b.CommandExitException as e:
            return exit_error(e)
        return {"type": None}

    await rec.astep("commands.run(exit 3)", failing)

    async def streamed():
        chunks = []
        await run(sb, "for i in 1 2 3; do echo $i; sleep 0.05; done", on_stdout=chunks.append)
        return "".join(chunks)

    await rec.astep("commands.run(on_stdout)", streamed)

    async def background():
        h = await w(sb.commands.run("sleep 60", background=True))
        listed = h.pid in [p.pid for p in await w(sb.commands.list())]
        killed = await w(sb.commands.kill(h.pid))
        started = time.monotonic()
        gone = False
        while time.monotonic() - started < 10:
            if h.pid not in [p.pid for p in await w(sb.commands.list())]:
                gone = True
                break
            await asyncio.sleep(0.05)
        return {"listed": listed, "killed": killed, "gone": gone}

    await rec.astep("commands.run(background) / list / kill", background)

    async def timed_out():
        try:
            await run(sb, "sleep 30", timeout=1)
        except e2b.TimeoutException as e:
            return {"type": type(e).__name__}
        return {"type": None}

    await rec.astep("commands.run(timeout=1)", timed_out)

    async def stdin():
        h = await w(sb.commands.run("cat", background=True, stdin=True))
        await w(sb.commands.send_stdin(h.pid, "typed\n"))
        await w(sb.commands.close_stdin(h.pid))
        return (await w(h.wait())).stdout

    await rec.astep("commands.send_stdin / close_stdin", stdin)

    async def streamed():
        # Client-streaming StreamInput over Connect: the sync client takes an iterable, the async one an input handle.
        h = await w(sb.commands.run("cat", background=True, stdin=True))
        chunks = ["one\n", b"two\n", "three\n"]
        if isinstance(sb, AsyncSandbox):
            handle = sb.commands.stream_input(h.pid)
            for c in chunks:
                await handle.send(c)
            await handle.close()
        else:
            sb.commands.stream_input(h.pid, iter(chunks))
        await w(sb.commands.close_stdin(h.pid))
        return (await w(h.wait())).stdout

    await rec.astep("commands.stream_input", streamed)


async def run(sb, cmd, **kw):
    return result(await w(sb.commands.run(cmd, **kw)))


async def files(rec, sb, mode):
    async def tree():
        await w(sb.files.write("dir/a.txt", "alpha"))
        made = await w(sb.files.make_dir("dir/sub"))
        await w(sb.files.rename("dir/a.txt", "dir/sub/b.txt"))
        old, new = await w(sb.files.exists("dir/a.txt")), await w(sb.files.exists("dir/sub/b.txt"))
        entries = [[e.name, e.type.value if e.type else None] for e in await w(sb.files.list("dir", depth=2))]
        info = await w(sb.files.get_info("dir/sub/b.txt"))
        await w(sb.files.remove("dir"))
        return {"made": made, "old_exists": old, "new_exists": new, "entries": entries, "size": info.size, "gone": not await w(sb.files.exists("dir"))}

    await rec.astep("files.write/make_dir/rename/exists/list/get_info/remove", tree)

    async def batch():
        from e2b.sandbox.filesystem.filesystem import WriteEntry

        written = await w(sb.files.write_files([WriteEntry(path="batch/one.txt", data="1"), WriteEntry(path="batch/two.txt", data="2")]))
        return {"paths": sorted(x.path for x in written), "two": await w(sb.files.read("batch/two.txt"))}

    await rec.astep("files.write_files", batch)

    async def big():
        data = bytes((i * 7) % 256 for i in range(4 * 1024 * 1024))
        await w(sb.files.write("big.bin", data))
        back = await w(sb.files.read("big.bin", format="bytes"))
        return {"same": bytes(back) == data, "sha_in_sandbox_matches": (await run(sb, "sha256sum big.bin"))["stdout"].split(" ")[0] == hashlib.sha256(data).hexdigest()}

    await rec.astep("files.write/read bytes (4 MiB)", big)

    async def watch():
        await w(sb.files.make_dir("w"))
        seen = []
        if mode == "async":
            h = await sb.files.watch_dir("w", on_event=lambda e: seen.append(f"{e.type.value}:{e.name}"))
            await run(sb, "echo x > w/made.txt")
            started = time.monotonic()
            while "create:made.txt" not in seen and time.monotonic() - started < 10:
                await asyncio.sleep(0.05)
            await h.stop()
        else:
            # The sync client polls a watcher (CreateWatcher / GetWatcherEvents / RemoveWatcher) instead of streaming.
            h = sb.files.watch_dir("w")
            await run(sb, "echo x > w/made.txt")
            started = time.monotonic()
            while "create:made.txt" not in seen and time.monotonic() - started < 10:
                seen.extend(f"{e.type.value}:{e.name}" for e in h.get_new_events())
                time.sleep(0.05)
            h.stop()
        return "create:made.txt" in seen

    await rec.astep("files.watch_dir", watch)


async def pause_connect(rec, cls, sb):
    await run(sb, "echo kept > kept.txt")
    await rec.astep("pause", lambda: w(sb.pause()))

    async def paused_state():
        return (await w(cls.get_info(sb.sandbox_id))).state.value

    await rec.astep("Sandbox.get_info after pause", paused_state)

    async def connect():
        again = await w(cls.connect(sb.sandbox_id))
        return {"state": (await w(again.get_info())).state.value, "kept": await w(again.files.read("kept.txt"))}

    await rec.astep("Sandbox.connect (resume)", connect)


async def idempotent_create(rec, cls):
    """Two creates with one Idempotency-Key, as the SDK's own retry sends them: e2b answers the same sandbox."""
    key = f"py-matrix-{uuid.uuid4().hex[:16]}"
    made = []

    async def twice():
        for _ in range(2):
            made.append(await w(cls.create(TEMPLATE, timeout=60, idempotency_key=key)))
        return {"same": made[0].sandbox_id == made[1].sandbox_id}

    await rec.astep("Sandbox.create(idempotency_key) twice", twice)
    for s in {m.sandbox_id: m for m in made}.values():
        await w(s.kill())


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "sync"
    if mode not in ("sync", "async"):
        print(f"usage: {sys.argv[0]} sync|async", file=sys.stderr)
        sys.exit(2)
    rec = Record()
    asyncio.run(scenario(rec, Sandbox if mode == "sync" else AsyncSandbox, mode))
    from importlib.metadata import version

    print(json.dumps({"client": "e2b (Python)", "version": version("e2b"), "mode": mode, "http_version": os.environ.get("E2B_HTTP_VERSION") or "2", "steps": rec.steps}))


if __name__ == "__main__":
    main()
