"""The stock Python desktop SDK (e2b-desktop, tests/support/python/requirements.txt) against a stack
(tests/e2e/sdk-matrix/desktop.test.ts drives this script): its create from the `desktop` template, then the
non-graphical calls on a desktop-template sandbox reached with its connect, and one graphical call. Environment:
E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN. Prints one JSON object on its last stdout line: {case: outcome}.
"""

import json

from e2b import Sandbox as Base
from e2b_desktop import Sandbox as Desktop

out = {}


def record(case, fn):
    try:
        value = fn()
        out[case] = {"returned": value if isinstance(value, (bool, int, str, type(None))) else type(value).__name__}
    except Exception as e:  # the point is what was raised
        out[case] = {"raised": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__], "message": str(e)[:400]}


def main():
    record("Sandbox.create()", lambda: Desktop.create(timeout=120).sandbox_id)
    base = Base.create("desktop", timeout=120, envs={"DISPLAY": ":0"})
    desk = Desktop.connect(base.sandbox_id)
    record("Sandbox.connect", lambda: desk.sandbox_id == base.sandbox_id)
    record("commands.run", lambda: desk.commands.run("echo $DISPLAY; uname -s").stdout)
    record("files.write / files.read", lambda: (desk.files.write("notes.txt", "desktop"), desk.files.read("notes.txt"))[1])
    record("screenshot", lambda: len(desk.screenshot()))
    record("kill", lambda: desk.kill())
    print(json.dumps(out))


main()
