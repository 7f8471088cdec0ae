# Run inside the test's mount namespace (scheme.test.ts) with only E2B_DOMAIN, E2B_API_KEY and SSL_CERT_FILE set:
# the stock Python SDK finds https://api.<domain> and https://<port>-<id>.<domain> by itself (its resolver included).
import json, os, socket, sys
from e2b import Sandbox

out = {"resolved": socket.gethostbyname("api." + os.environ["E2B_DOMAIN"]), "http": os.environ.get("E2B_HTTP_VERSION", "default")}
sbx = Sandbox.create("base")
try:
    out["created"] = sbx.sandbox_id
    out["run"] = sbx.commands.run("echo from-python").stdout
    sbx.files.write("scheme.txt", "written over https")
    out["read"] = sbx.files.read("scheme.txt")
    out["host"] = sbx.get_host(49983)
    out["info"] = sbx.get_info().state.value if hasattr(sbx.get_info().state, "value") else str(sbx.get_info().state)
finally:
    out["killed"] = sbx.kill()
print(json.dumps(out))
sys.stdout.flush()
