"""Errors as the stock Python SDK (e2b 2.63) sees them (tests/e2e/errors/python.test.ts drives this script).

Each case runs one SDK call that must fail (or answer False) and records what the SDK raised: the exception's class
name, its base classes and its message. The environment is what a user's script has (E2B_API_KEY, E2B_API_URL,
E2B_SANDBOX_URL, E2B_DOMAIN); ERRORS_QUOTA_KEY names a key whose namespace may hold one sandbox, ERRORS_OTHER_KEY a
key of another namespace, ERRORS_RELAY_CAP=1 says the proxy allows one relay per sandbox (each unset: case left out). Prints one JSON object on its last stdout line: {case: outcome}.
"""

import json
import os
import sys
import time

from e2b import RateLimitException, Sandbox

UNKNOWN = "sbunknown0000000000000000"
from outcomes import out, record


def main():
    # Unset on a stack without them (the full stack): those cases are left out.
    quota_key = os.environ.get("ERRORS_QUOTA_KEY")
    other_key = os.environ.get("ERRORS_OTHER_KEY")
    relay_cap = os.environ.get("ERRORS_RELAY_CAP") == "1"

    # 429: the namespace quota on create (retries=0: the SDK would otherwise wait out Retry-After three times).
    if quota_key:
        first = Sandbox.create("base", api_key=quota_key)
        record("quota_create", lambda: Sandbox.create("base", api_key=quota_key, retries=0))
        first.kill()

    # Unknown ids through the class-level calls.
    record("unknown_get_info", lambda: Sandbox.get_info(UNKNOWN))
    record("unknown_set_timeout", lambda: Sandbox.set_timeout(UNKNOWN, 60))
    record("unknown_connect", lambda: Sandbox.connect(UNKNOWN))
    record("unknown_pause", lambda: Sandbox.pause(UNKNOWN))
    record("unknown_kill", lambda: Sandbox.kill(UNKNOWN))

    # Another tenant's sandbox reads as unknown.
    mine = Sandbox.create("base")
    if other_key:
        record("other_tenant_get_info", lambda: Sandbox.get_info(mine.sandbox_id, api_key=other_key))
        record("other_tenant_kill", lambda: Sandbox.kill(mine.sandbox_id, api_key=other_key))

    # The relay's per-sandbox cap (the stack runs with one relay per sandbox): a running command holds the slot.
    if relay_cap:
        mine.files.write("/home/user/a.txt", "a")
        held = mine.commands.run("sleep 3", background=True)
        record("relay_cap_files_read", lambda: mine.files.read("/home/user/a.txt"))
        try:
            held.kill()
        except Exception:
            pass
    # The slot frees when the command's stream closes: wait for it on a condition, not a fixed sleep.
    deadline = time.monotonic() + 15
    while True:
        try:
            mine.files.write("/home/user/b.txt", "b")
            break
        except RateLimitException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)

    # A killed sandbox: REST and data plane.
    mine.kill()
    record("killed_get_info", lambda: mine.get_info())
    record("killed_set_timeout", lambda: mine.set_timeout(60))
    record("killed_connect", lambda: Sandbox.connect(mine.sandbox_id))
    record("killed_kill", lambda: mine.kill())
    record("killed_commands_run", lambda: mine.commands.run("echo gone"))
    record("killed_files_read", lambda: mine.files.read("/home/user/b.txt"))
    record("killed_is_running", lambda: mine.is_running())

    # A paused sandbox: traffic with its token resumes it (autoResume).
    paused = Sandbox.create("base", lifecycle={"on_timeout": "pause", "auto_resume": True})
    paused.pause()
    record("paused_state_before", lambda: Sandbox.get_info(paused.sandbox_id).state.value)
    record("paused_commands_run", lambda: paused.commands.run("echo resumed").stdout)
    record("paused_state_after", lambda: Sandbox.get_info(paused.sandbox_id).state.value)
    paused.kill()


if __name__ == "__main__":
    try:
        main()
    finally:
        sys.stdout.write(json.dumps(out) + "\n")
