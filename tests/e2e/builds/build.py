"""The stock Python SDK (e2b 2.63) builds the same template as js-sdk.test.ts, then creates a sandbox from it.

Pointed at the stack by E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL and E2B_DOMAIN; BUILD_CONTEXT is the directory
the COPY sources live in. Prints one JSON object of what it saw; the test judges it.
"""
import json
import os
import time

from e2b import Sandbox, Template, wait_for_file

ctx = os.environ["BUILD_CONTEXT"]
logs = []
template = (
    Template(file_context_path=ctx)
    .from_image("base")
    .run_cmd("echo built > /opt/marker", user="root")
    .run_cmd("echo visible-in-logs")
    .set_envs({"A": "1", "GREETING": "hello $A"})
    .set_workdir("/app")
    .set_user("app")
    .copy("data/", "/app/data/")
    .copy("single.txt", "/app/single.txt")
    .set_start_cmd("touch /tmp/started; sleep 600", wait_for_file("/tmp/started"))
)
info = Template.build(template, "pyapp:v1", on_build_logs=lambda e: logs.append(e.message))

sbx = None
deadline = time.time() + 15
while sbx is None:
    try:
        sbx = Sandbox.create("pyapp")
    except Exception:
        if time.time() > deadline:
            raise
        time.sleep(0.25)
try:
    run = lambda cmd: sbx.commands.run(cmd).stdout.strip()
    out = {
        "templateId": info.template_id,
        "tags": info.tags,
        "logs": logs,
        "marker": run("cat /opt/marker"),
        "env": run('echo "$A|$GREETING"'),
        "pwd": run("pwd"),
        "user": run("whoami"),
        "files": run("cat /app/data/a.txt /app/data/sub/b.txt /app/single.txt"),
    }
finally:
    sbx.kill()
print(json.dumps(out))
