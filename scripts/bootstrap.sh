#!/usr/bin/env bash
# Installs everything the project needs on a machine that has only Node/npm and Go:
# Bun (pinned, from npm), the JS dependencies (frozen lockfile), and the Go-built test peers
# (kube-apiserver with embedded etcd, helm, the versitygw S3 server) and the Python e2b SDK's venv, each cached under $SANDBOX_CACHE so a
# second run is instant.
# Source it (". scripts/bootstrap.sh") to get bun on PATH.
set -euo pipefail
BUN_VERSION=1.4.5
export SANDBOX_CACHE="${SANDBOX_CACHE:-$HOME/.cache/sandbox-control-plane}"
bun_dir="$SANDBOX_CACHE/bun-$BUN_VERSION"
if [ ! -x "$bun_dir/node_modules/.bin/bun" ]; then
  echo "bootstrap: installing bun $BUN_VERSION from npm into $bun_dir" >&2
  mkdir -p "$bun_dir"
  # Without a package.json here npm installs into the nearest ancestor holding a package.json or node_modules
  # (a stray ~/node_modules is enough), and bun would never appear under $bun_dir.
  [ -f "$bun_dir/package.json" ] || echo '{"private":true}' >"$bun_dir/package.json"
  (cd "$bun_dir" && npm install --no-save --no-audit --no-fund --loglevel=error "bun@$BUN_VERSION" >&2)
  if [ ! -x "$bun_dir/node_modules/.bin/bun" ]; then
    echo "bootstrap: npm install bun@$BUN_VERSION left no $bun_dir/node_modules/.bin/bun" >&2
    exit 1
  fi
fi
export PATH="$bun_dir/node_modules/.bin:$PATH"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# SANDBOX_SKIP_JS_INSTALL=1 leaves node_modules alone: for a checkout whose node_modules is another checkout's
# (a worktree sharing it), where an install would rewrite the other's tree (tests/integration/readme sets it then).
if [ "${SANDBOX_SKIP_JS_INSTALL:-}" = "1" ]; then
  echo "bootstrap: SANDBOX_SKIP_JS_INSTALL=1: JS dependencies left as they are" >&2
else
  (cd "$repo" && bun install --frozen-lockfile >&2)
fi
if [ "${SKIP_TEST_PEERS:-}" != "1" ]; then
  (cd "$repo" && bun run tests/kube/peers.ts ensure >&2)
  # The S3-compatible server the S3 upload store's tests run against (versitygw, posix backend). Fatal like the
  # kube peers: those tests run in CI. About 90 s cold, instant cached.
  (cd "$repo" && bun run tests/kube/versitygw.ts ensure >&2)
  # The images' and the single-node cluster's tools: buildah, qemu-user-static, containerd, runc, the CNI plugins,
  # iptables and conntrack from Debian (as root; without root the cluster tests say why they skip), then CoreDNS and
  # actionlint from the Go module proxy (the kubelet and its peers are built by peers.ts ensure above).
  if [ "$(id -u)" = "0" ]; then
    (cd "$repo" && bun run scripts/lib/host-packages.ts ensure >&2)
  fi
  (cd "$repo" && bun run tests/kube/coredns.ts ensure >&2)
  (cd "$repo" && bun run tests/kube/actionlint.ts ensure >&2)
  # The Python e2b SDK the SDK matrix drives (pinned in tests/support/python/requirements.txt), a venv in the cache.
  # Not fatal: the stack needs no Python, and the Python SDK tests make the venv themselves or say why they cannot.
  (cd "$repo" && bun run tests/support/python/venv.ts ensure >&2) || echo "bootstrap: no Python SDK venv (see above); the Python SDK tests will retry" >&2
fi
