"""The stock Python SDK (e2b 2.63) sending the request fields this server refuses or must honour
(tests/e2e/errors/request-fields.test.ts drives this script): each create option the fleet does not offer, the
network update, and pause(strict=True) of a sandbox whose guest agent answers and of one whose guest agent is
wedged (the test wedges it in the simulator and passes both ids). Each case records what the SDK raised (class name,
base classes, message) or returned. Environment: E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN, and
FIELDS_HEALTHY_ID / FIELDS_WEDGED_ID. Prints one JSON object on its last stdout line: {case: outcome}.
"""

import json
import os

from e2b import Sandbox

from outcomes import out, record

CREATE = {
    "network.allow_out": {"network": {"allow_out": ["1.1.1.1"]}},
    "network.deny_out": {"network": {"deny_out": ["8.8.8.8"]}},
    "network.rules": {"network": {"rules": {"api.example.com": [{"transform": {"headers": {"x-k": "v"}}}]}, "allow_out": ["api.example.com"]}},
    "network.egress_proxy": {"network": {"egress_proxy": {"address": "http://proxy.example.com:3128"}}},
    "network.mask_request_host": {"network": {"mask_request_host": "${PORT}-sandbox.example.com"}},
    "network.https_ports": {"network": {"https_ports": [8443]}},
    "network.dns_servers": {"network": {"dns_servers": ["1.1.1.1"]}},
    "iam": {"iam": {"tokens": {"aws": {"audience": "sts.amazonaws.com", "token_type": "JWT-SVID"}}}},
    "volume_mounts": {"volume_mounts": {"/data": "my-volume"}},
    "mcp": {"mcp": {"exa": {"apiKey": "not-a-key"}}},
}

UPDATE = {
    "update_network(allow_out)": {"allow_out": ["1.1.1.1"]},
    "update_network(dns_servers)": {"dns_servers": ["1.1.1.1"]},
    "update_network(egress_proxy)": {"egress_proxy": {"address": "http://proxy.example.com:3128"}},
}


def created(kwargs):
    sbx = Sandbox.create("base", **kwargs)
    sbx.kill()
    return "created"


def main():
    for case, kwargs in CREATE.items():
        record(f"create({case})", lambda kwargs=kwargs: created(kwargs))
    healthy = os.environ["FIELDS_HEALTHY_ID"]
    wedged = os.environ["FIELDS_WEDGED_ID"]
    for case, network in UPDATE.items():
        record(case, lambda network=network: Sandbox.update_network(healthy, network))
    record("update_network({})", lambda: Sandbox.update_network(healthy, {}))
    record("pause(strict) wedged", lambda: Sandbox.pause(wedged, strict=True))
    record("get_info(wedged).state", lambda: Sandbox.get_info(wedged).state)
    record("pause(strict) healthy", lambda: Sandbox.pause(healthy, strict=True))
    record("get_info(healthy).state", lambda: Sandbox.get_info(healthy).state)
    print(json.dumps(out))


main()
