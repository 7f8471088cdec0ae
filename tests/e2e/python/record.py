"""The record every scenario script prints (tests/support/python/scenario.ts validates it): one entry per SDK call,
with its status ("ok" with the value, "error" with the exception's type and message, or "skipped") and its duration.
A step that raises is recorded and the scenario goes on where it can: the bun test decides what each result means.
"""

import asyncio
import time
import traceback


class Record:
    def __init__(self):
        self.steps = []

    def _error(self, call, started, e):
        self.steps.append(
            {
                "call": call,
                "status": "error",
                "error": {"type": type(e).__name__, "message": str(e)[:500], "where": traceback.format_exc(limit=-2)[-800:]},
                "ms": round((time.monotonic() - started) * 1000),
            }
        )

    def _ok(self, call, started, value):
        self.steps.append({"call": call, "status": "ok", "value": value, "ms": round((time.monotonic() - started) * 1000)})

    def skip(self, call):
        # Recorded, not hidden: verdicts.ts judges a skipped step "fails" (an earlier step, e.g. create, failed).
        self.steps.append({"call": call, "status": "skipped", "ms": 0})

    def step(self, call, fn):
        started = time.monotonic()
        try:
            value = fn()
        except Exception as e:  # the record carries every failure: the bun test decides what it means
            self._error(call, started, e)
            return None
        self._ok(call, started, value)
        return value

    async def astep(self, call, fn):
        started = time.monotonic()
        try:
            value = await fn()
        except Exception as e:
            self._error(call, started, e)
            return None
        self._ok(call, started, value)
        return value


# A list right after a create or a kill is what agents do: record whether it already agreed, and how long until it did.
CONVERGE_S = 10


def converge(check):
    started = time.monotonic()
    at_once = check()
    ok = at_once
    while not ok and time.monotonic() - started < CONVERGE_S:
        time.sleep(0.05)
        ok = check()
    return {"at_once": at_once, "agreed": ok, "after_ms": round((time.monotonic() - started) * 1000)}


async def aconverge(check):
    started = time.monotonic()
    at_once = await check()
    ok = at_once
    while not ok and time.monotonic() - started < CONVERGE_S:
        await asyncio.sleep(0.05)
        ok = await check()
    return {"at_once": at_once, "agreed": ok, "after_ms": round((time.monotonic() - started) * 1000)}
