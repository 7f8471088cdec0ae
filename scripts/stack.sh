#!/usr/bin/env bash
# The one command that starts the local stack from a fresh clone: installs what is missing, then runs it.
#   bash scripts/stack.sh          the full stack (builds the Go test peers on first use: a few minutes once)
#   bash scripts/stack.sh --mesh   no Kubernetes, so no Go peers are needed
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for arg in "$@"; do
  if [ "$arg" = "--mesh" ]; then export SKIP_TEST_PEERS=1; fi
done
. "$repo/scripts/bootstrap.sh"
cd "$repo"
exec bun run scripts/stack.ts "$@"
