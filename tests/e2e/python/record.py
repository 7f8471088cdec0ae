"""The record every scenario script prints (tests/support/python/scenario.ts validates it): one entry per SDK call,
with its status ("ok" with the value, "error" with the exception's type and message, or "skipped") and its duration.
A step that raises is recorded and the scenario goes on where it can: the bun test decides what each result means.
"""

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
