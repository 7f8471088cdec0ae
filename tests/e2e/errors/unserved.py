"""The stock Python SDK (e2b 2.63) against routes this server does not serve (tests/e2e/errors/unserved.test.ts drives
this script): Secret, Volume and the volume-content calls. Each case records what the SDK raised (class name, base
classes, message) or returned. The environment is what a user's script has: E2B_API_KEY, E2B_API_URL, E2B_DOMAIN,
and E2B_VOLUME_API_URL for the volume-content host (the volume token is the SDK's own Bearer, no API key). Prints one
JSON object on its last stdout line: {case: outcome}.
"""

import json

from e2b import Secret, Volume

from outcomes import out, record


def main():
    record("Secret.create", lambda: Secret.create("db-password", "hunter2"))
    record("Secret.get_info", lambda: Secret.get_info("sec-1"))
    record("Secret.update", lambda: Secret.update("sec-1", "hunter3"))
    record("Secret.exists", lambda: Secret.exists("sec-1"))
    record("Secret.destroy", lambda: Secret.destroy("sec-1"))
    record("Secret.list", lambda: Secret.list().next_items())
    record("Volume.create", lambda: Volume.create("data"))
    record("Volume.get_info", lambda: Volume.get_info("vol-1"))
    record("Volume.connect", lambda: Volume.connect("vol-1"))
    record("Volume.list", lambda: Volume.list())
    record("Volume.destroy", lambda: Volume.destroy("vol-1"))
    vol = Volume("vol-1", "data", token="a-volume-token")
    record("volume.list", lambda: vol.list("/"))
    record("volume.make_dir", lambda: vol.make_dir("/d"))
    record("volume.get_info", lambda: vol.get_info("/d"))
    record("volume.exists", lambda: vol.exists("/d"))
    record("volume.update_metadata", lambda: vol.update_metadata("/d", mode=0o755))
    record("volume.read_file", lambda: vol.read_file("/d/f"))
    record("volume.write_file", lambda: vol.write_file("/d/f", "x"))
    record("volume.remove", lambda: vol.remove("/d"))
    print(json.dumps(out))


main()
