#!/usr/bin/env bash
# Fuzz the e2b surface from its own /openapi.json with schemathesis (PyPI), installed on demand into the cache.
# Passes when no generated request, whatever its input, gets a 5xx (check not_a_server_error) or a response that
# breaks the documented schema (response_schema_conformance). Usage: bash tests/fuzz/schemathesis.sh [max-examples]
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="${SANDBOX_CACHE:-$HOME/.cache/sandbox-control-plane}"
venv="$cache/schemathesis-venv"
version="4.32.5"
if [ ! -x "$venv/bin/st" ] || ! "$venv/bin/st" --version 2>/dev/null | grep -q "$version"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "schemathesis==$version"
fi
out="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$out"' EXIT
bun tests/fuzz/e2b-stack.ts >"$out/stack.json" 2>"$out/stack.log" &
pid=$!
for _ in $(seq 1 100); do
  [ -s "$out/stack.json" ] && break
  sleep 0.1
done
[ -s "$out/stack.json" ] || { cat "$out/stack.log"; echo "fuzz stack did not start" >&2; exit 1; }
api=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["apiUrl"])' "$out/stack.json")
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$out/stack.json")
config="$(pwd)/tests/fuzz/schemathesis.toml"
# Run from the temp dir: schemathesis keeps its example database in ./.schemathesis.
cd "$out"
"$venv/bin/st" --config-file "$config" run "$api/openapi.json" \
  -H "X-API-KEY: $key" \
  --checks not_a_server_error,response_schema_conformance \
  --max-examples "${1:-40}" \
  --seed 9 \
  --phases coverage,fuzzing,stateful \
  --workers 1
