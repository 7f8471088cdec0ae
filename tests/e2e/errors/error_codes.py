"""e2b's error_code cases through the stock Python SDK (e2b 2.63); tests/e2e/errors/error-codes.test.ts drives this
script once per case (CASE), with only the environment a user's script has (E2B_API_KEY, E2B_API_URL,
E2B_SANDBOX_URL, E2B_DOMAIN). Prints one JSON object on its last stdout line: {case: outcome}.
"""

import json
import os

from e2b import Sandbox

from outcomes import out, record


def mismatch():
    first = Sandbox.create("base", idempotency_key="codes-1", metadata={"try": "1"})
    try:
        Sandbox.create("base", idempotency_key="codes-1", metadata={"try": "2"})
    finally:
        first.kill()


case = os.environ["CASE"]
if case == "sandbox_capacity_unavailable":
    # retries=0: the SDK would otherwise retry the 503 itself.
    record(case, lambda: Sandbox.create("empty", retries=0))
elif case == "idempotency_request_mismatch":
    record(case, mismatch)
elif case == "sandbox_create_failed":
    record(case, lambda: Sandbox.create("base", retries=0))
else:
    raise SystemExit(f"unknown CASE {case}")
print(json.dumps(out))
