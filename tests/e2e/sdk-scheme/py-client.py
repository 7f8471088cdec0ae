# Run inside the test's mount namespace (scheme.test.ts) with only E2B_DOMAIN, E2B_API_KEY and SSL_CERT_FILE set:
# the stock Python SDK finds https://api.<domain> and https://<port>-<id>.<domain> by itself (its resolver included).
import json, os, random, socket, sys, time, urllib.error, urllib.request
from e2b import Sandbox


def status_of(url, headers=None):
    """GET url as a browser would (stdlib urllib: its own TLS, trusting SSL_CERT_FILE): the HTTP status. A request
    without the envd token finds a sandbox only once the proxy's fleet view has it (the full stack: the next
    NodeInventory publish; issue 20 part 2), so 502 is retried for up to 15 s."""
    deadline = time.monotonic() + 15
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            if e.code != 502 or time.monotonic() > deadline:
                return e.code
        time.sleep(0.2)


def serve(sbx):
    """An HTTP server inside the sandbox on a random port; waits until it answers there."""
    port = random.randint(20000, 40000)
    sbx.commands.run(f"python3 -m http.server {port} --bind 127.0.0.1", background=True, timeout=0)
    for _ in range(100):
        if sbx.commands.run(f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 1)' && echo up || true").stdout.strip() == "up":
            return port
        time.sleep(0.1)
    raise RuntimeError("the in-sandbox server did not start")

out = {"resolved": socket.gethostbyname("api." + os.environ["E2B_DOMAIN"]), "http": os.environ.get("E2B_HTTP_VERSION", "default")}
sbx = Sandbox.create("base")
try:
    out["created"] = sbx.sandbox_id
    out["run"] = sbx.commands.run("echo from-python").stdout
    sbx.files.write("scheme.txt", "written over https")
    out["read"] = sbx.files.read("scheme.txt")
    out["host"] = sbx.get_host(49983)
    out["info"] = sbx.get_info().state.value if hasattr(sbx.get_info().state, "value") else str(sbx.get_info().state)
    # A public sandbox's user port at https://<port>-<id>.<domain>, as a browser opens it: no token at all.
    out["public_port"] = status_of("https://" + sbx.get_host(serve(sbx)) + "/")
    private = Sandbox.create("base", network={"allow_public_traffic": False})
    try:
        port = serve(private)
        url = "https://" + private.get_host(port) + "/"
        out["traffic_token"] = bool(private.traffic_access_token)
        out["private_port"] = [status_of(url), status_of(url, {"e2b-traffic-access-token": private.traffic_access_token or ""})]
    finally:
        private.kill()
finally:
    out["killed"] = sbx.kill()
print(json.dumps(out))
sys.stdout.flush()
