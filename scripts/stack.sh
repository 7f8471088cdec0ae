#!/usr/bin/env bash
# The one command that starts the local stack from a fresh clone: installs what is missing, then runs it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/scripts/bootstrap.sh"
cd "$repo"
exec bun run scripts/stack.ts "$@"
