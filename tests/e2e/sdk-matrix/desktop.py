"""The stock Python desktop SDK (e2b-desktop, tests/support/python/requirements.txt) against a stack
(tests/e2e/sdk-matrix/desktop.test.ts drives this script): its create from the `desktop` template, then the
non-graphical calls on a desktop-template sandbox reached with its connect, and one graphical call. Environment:
E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN. Prints one JSON object on its last stdout line: {case: outcome}.
"""

import json
import sys
from pathlib import Path

from e2b import Sandbox as Base
from e2b_desktop import Sandbox as Desktop

# The errors suite's record of each case (returned or raised), shared rather than copied.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "errors"))
from outcomes import out, record  # noqa: E402


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
