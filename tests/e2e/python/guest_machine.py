"""The simulator's namespaced guest through the stock Python e2b SDK (sync client): each sandbox is a small machine of
its own (services/sandboxd-sim/guest/README.md). pwd and cwd /tmp, /tmp private to each sandbox and to the host, the
host's /tmp and /root unseen, two sandboxes serving port 3000 at once (each get_host(3000) reaching its own server,
routed by that Host name through E2B_SANDBOX_URL), `user` (1000) by default and root on request, useradd and sudo
inside, pause and connect keeping files and a running process's state, and a fork child (the surface's
POST /sandboxes/{id}/fork) that sees its parent's files and then diverges.

Environment: the stack's E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN, and SCENARIO_NAME, a unique name the
bun test also uses for its host-side checks (it leaves /tmp/<name>.host and /root/<name>.host on the host and looks
for /tmp/<name> there afterwards). Prints one JSON record on the last stdout line (tests/support/python/scenario.ts).
"""

import http.client
import json
import os
import shutil
import sys
import time
import urllib.parse
import urllib.request

from e2b import Sandbox

from record import Record

TEMPLATE = os.environ.get("SCENARIO_TEMPLATE", "base")
NAME = os.environ["SCENARIO_NAME"]


def out(sb, cmd, **kw):
    return sb.commands.run(cmd, **kw).stdout.strip()


def via_host(sb, port, path="/"):
    """GET through E2B_SANDBOX_URL with the Host header get_host(port) names: the proxy routes by that name."""
    url = urllib.parse.urlsplit(os.environ["E2B_SANDBOX_URL"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": sb.get_host(port), "X-Access-Token": sb._envd_access_token or ""})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def wait_for(check, seconds=15.0):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last is not None:
                return last
        except Exception as e:  # not up yet: try again until the deadline
            last = e
        time.sleep(0.1)
    raise TimeoutError(f"not within {seconds} s (last: {last!r})")


def fork(sb):
    """The surface's fork (no SDK call exists for it): one child, then connected to through the SDK."""
    req = urllib.request.Request(
        f"{os.environ['E2B_API_URL']}/sandboxes/{sb.sandbox_id}/fork",
        data=json.dumps({"count": 1}).encode(),
        headers={"X-API-Key": os.environ["E2B_API_KEY"], "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=20) as r:
        children = json.loads(r.read())
    return Sandbox.connect(children[0]["sandbox"]["sandboxID"])


def record(rec):
    from importlib.metadata import version

    return json.dumps({"client": "e2b (Python)", "version": version("e2b"), "mode": "sync", "http_version": os.environ.get("E2B_HTTP_VERSION") or "2", "steps": rec.steps})


def main():
    rec = Record()
    made = []

    def create():
        sb = Sandbox.create(TEMPLATE, timeout=300)
        made.append(sb)
        return sb.sandbox_id

    rec.step("Sandbox.create (a)", create)
    rec.step("Sandbox.create (b)", create)
    if len(made) < 2:
        print(record(rec))
        return
    a, b = made

    rec.step("pwd", lambda: out(a, "pwd"))
    rec.step("pwd with cwd /tmp", lambda: out(a, "pwd", cwd="/tmp"))
    rec.step("id as the default user", lambda: out(a, "id -u; id -un; echo $HOME"))
    rec.step("id as root", lambda: out(a, "id -u; id -un; echo $HOME", user="root"))

    def tmp_private():
        out(a, f"echo from-a > {NAME}", cwd="/tmp")
        return {
            "a_reads": a.files.read(f"/tmp/{NAME}"),
            "b_exists": b.files.exists(f"/tmp/{NAME}"),
            "b_command": out(b, f"test -e /tmp/{NAME} && echo present || echo absent"),
        }

    rec.step("/tmp is each sandbox's own", tmp_private)
    rec.step(
        "the host's /tmp and /root are unseen",
        lambda: {
            "command": out(a, f"test -e /tmp/{NAME}.host && echo tmp-seen; test -e /root/{NAME}.host && echo root-seen; echo done", user="root"),
            "files_tmp": a.files.exists(f"/tmp/{NAME}.host"),
            "files_root": a.files.exists(f"/root/{NAME}.host", user="root"),
        },
    )

    def two_servers():
        for sb, text in ((a, "served by a"), (b, "served by b")):
            sb.files.write("site/index.html", text)
            sb.commands.run("cd site && exec python3 -m http.server 3000 --bind 127.0.0.1", background=True, timeout=0)
        got = {}
        for key, sb in (("a", a), ("b", b)):
            got[key] = wait_for(lambda sb=sb: (lambda r: r[1] if r[0] == 200 else None)(via_host(sb, 3000, "/index.html")))
            got[f"{key}_host"] = sb.get_host(3000)
        got["a_links"] = out(a, "ip -o link | cut -d: -f2 | tr -d ' '")
        return got

    rec.step("two sandboxes serve port 3000, each get_host(3000) its own", two_servers)

    rec.step(
        "useradd inside, the host's /etc untouched",
        lambda: {"id": out(a, "useradd -m dave && id -un dave && getent passwd dave | cut -d: -f6", user="root")},
    )
    # The issue asks for passwordless sudo where the host has sudo: then `sudo -n` works as user; else there is none.
    rec.step("sudo inside", lambda: {"host_has_sudo": shutil.which("sudo") is not None, "inside": out(a, "command -v sudo >/dev/null && sudo -n id -u || echo no-sudo")})

    def pause_resume():
        a.files.write("kept.txt", "kept")
        a.commands.run("i=0; while :; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.05; done", background=True, timeout=0)
        wait_for(lambda: True if int(a.files.read("/tmp/n") or "0") > 2 else None)
        a.pause()
        back = Sandbox.connect(a.sandbox_id)
        before = int(back.files.read("/tmp/n"))
        after = wait_for(lambda: (lambda n: n if n > before + 2 else None)(int(back.files.read("/tmp/n"))))
        return {"kept": back.files.read("kept.txt"), "before": before, "after": after}

    rec.step("pause and connect keep files and a running process", pause_resume)

    def forked():
        out(b, "echo parent > /tmp/f && echo parent > ~/h && useradd erin", user="root")
        child = fork(b)
        made.append(child)
        seen = out(child, "cat /tmp/f /root/h; id -un erin; hostname", user="root")
        child.commands.run("echo child > /tmp/f", user="root")
        b.commands.run("echo parent2 > /tmp/f", user="root")
        return {"seen": seen, "parent_host": out(b, "hostname"), "child": out(child, "cat /tmp/f"), "parent": out(b, "cat /tmp/f")}

    rec.step("a fork child sees its parent's files, then diverges", forked)

    for sb in made:
        rec.step("kill", lambda sb=sb: sb.kill())
    print(record(rec))


if __name__ == "__main__":
    sys.exit(main())
