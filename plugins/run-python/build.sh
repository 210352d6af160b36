#!/usr/bin/env bash
# Builds warren's built-in `run_python` tool into OUT (default: target/wasm/run-python.wasm).
# host/build.rs runs it; by hand: plugins/run-python/build.sh [OUT]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(realpath -m "${1:-$root/target/wasm/run-python.wasm}")"
exec "$root/scripts/componentize-py" "$here" "$root/wit" warren:plugin/plugin "$out"
