# Run inside the test's mount namespace (scheme.test.ts) with only E2B_DOMAIN, E2B_API_KEY and SSL_CERT_FILE set:
# the stock Python SDK finds https://api.<domain> and https://<port>-<id>.<domain> by itself (its resolver included).
# `py-client.py async` drives AsyncSandbox instead of Sandbox, the same calls.
import asyncio, json, os, random, socket, sys, time, urllib.error, urllib.request
import e2b.api.client_async as client_async
import e2b.api.client_sync as client_sync
from e2b import AsyncSandbox, Sandbox

# The HTTP version of every response the SDK's own transport (pyqwest over reqwest) got, per kind of request: the
# SDK builds its pools from these module globals, so a thin wrapper sees each response without changing a request.
# File downloads (GET /files on a sandbox host) are their own kind: the SDK pins them to HTTP/1.1 itself
# (e2b/envd/api.py ENVD_API_FILE_DOWNLOAD_HTTP_VERSION).
versions = {"api": set(), "sandbox": set(), "download": set()}


def note(request, response):
    host, _, path = request.url.split("://", 1)[-1].partition("/")
    kind = "api" if host.startswith("api.") else "download" if str(request.method).upper().endswith("GET") and path.startswith("files") else "sandbox"
    versions[kind].add(str(response.http_version))
    return response


class SyncTap:
    def __init__(self, **kw):
        self._inner = RealSync(**kw)

    def execute_sync(self, request):
        return note(request, self._inner.execute_sync(request))

    def __getattr__(self, name):
        return getattr(self._inner, name)


class AsyncTap:
    def __init__(self, **kw):
        self._inner = RealAsync(**kw)

    async def execute(self, request):
        return note(request, await self._inner.execute(request))

    def __getattr__(self, name):
        return getattr(self._inner, name)


RealSync, client_sync.SyncHTTPTransport = client_sync.SyncHTTPTransport, SyncTap
RealAsync, client_async.HTTPTransport = client_async.HTTPTransport, AsyncTap


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

async def serve_async(sbx):
    port = random.randint(20000, 40000)
    await sbx.commands.run(f"python3 -m http.server {port} --bind 127.0.0.1", background=True, timeout=0)
    for _ in range(100):
        if (await sbx.commands.run(f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 1)' && echo up || true")).stdout.strip() == "up":
            return port
        await asyncio.sleep(0.1)
    raise RuntimeError("the in-sandbox server did not start")


def state_of(info):
    return info.state.value if hasattr(info.state, "value") else str(info.state)


def run_sync(out):
    sbx = Sandbox.create("base")
    try:
        out["created"] = sbx.sandbox_id
        out["run"] = sbx.commands.run("echo from-python").stdout
        sbx.files.write("scheme.txt", "written over https")
        out["read"] = sbx.files.read("scheme.txt")
        out["host"] = sbx.get_host(49983)
        out["listed"] = any(x.sandbox_id == sbx.sandbox_id for x in Sandbox.list().next_items())
        out["info"] = state_of(sbx.get_info())
        # A public sandbox's user port at https://<port>-<id>.<domain>, as a browser opens it: no token at all.
        out["public_port"] = status_of("https://" + sbx.get_host(serve(sbx)) + "/")
        private = Sandbox.create("base", network={"allow_public_traffic": False})
        try:
            url = "https://" + private.get_host(serve(private)) + "/"
            out["traffic_token"] = bool(private.traffic_access_token)
            out["private_port"] = [status_of(url), status_of(url, {"e2b-traffic-access-token": private.traffic_access_token or ""})]
        finally:
            private.kill()
    finally:
        out["killed"] = sbx.kill()


async def run_async(out):
    sbx = await AsyncSandbox.create("base")
    try:
        out["created"] = sbx.sandbox_id
        out["run"] = (await sbx.commands.run("echo from-python")).stdout
        await sbx.files.write("scheme.txt", "written over https")
        out["read"] = await sbx.files.read("scheme.txt")
        out["host"] = sbx.get_host(49983)
        out["listed"] = any(x.sandbox_id == sbx.sandbox_id for x in await AsyncSandbox.list().next_items())
        out["info"] = state_of(await sbx.get_info())
        out["public_port"] = await asyncio.to_thread(status_of, "https://" + sbx.get_host(await serve_async(sbx)) + "/")
        private = await AsyncSandbox.create("base", network={"allow_public_traffic": False})
        try:
            url = "https://" + private.get_host(await serve_async(private)) + "/"
            out["traffic_token"] = bool(private.traffic_access_token)
            token = {"e2b-traffic-access-token": private.traffic_access_token or ""}
            out["private_port"] = [await asyncio.to_thread(status_of, url), await asyncio.to_thread(status_of, url, token)]
        finally:
            await private.kill()
    finally:
        out["killed"] = await sbx.kill()


mode = sys.argv[1] if len(sys.argv) > 1 else "sync"
out = {"mode": mode, "resolved": socket.gethostbyname("api." + os.environ["E2B_DOMAIN"]), "http": os.environ.get("E2B_HTTP_VERSION", "default")}
if mode == "async":
    asyncio.run(run_async(out))
else:
    run_sync(out)
out["versions"] = {k: sorted(v) for k, v in versions.items()}
print(json.dumps(out))
sys.stdout.flush()
