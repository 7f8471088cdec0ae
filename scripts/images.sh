#!/usr/bin/env bash
# Builds the control plane's images (sandbox-apiserver, sandbox-envd-proxy, sandbox-e2b) for linux/amd64 and
# linux/arm64 without a Docker daemon: buildah and a base assembled from Debian's packages (scripts/images/).
# Installs what is missing first (Bun and the JS dependencies; buildah and qemu-user-static with apt-get as root).
# Writes dist/images/<image>.oci.tar (one OCI image index each) and dist/images/images.json.
# The release workflow (.github/workflows/release.yml) and the tests call this same command. Flags: --help.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SKIP_TEST_PEERS=1 . "$repo/scripts/bootstrap.sh"
cd "$repo"
exec bun run scripts/images/main.ts "$@"
