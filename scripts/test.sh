#!/usr/bin/env bash
# The one command that runs every test from a fresh clone: installs what is missing, then runs the suite.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/scripts/bootstrap.sh"
cd "$repo"
exec bun run tests/run.ts "$@"
