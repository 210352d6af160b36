#!/usr/bin/env bash
# Builds the Python plugin into OUT (default: target/wasm/python-data.wasm).
# Run with: plugins/python-data/build.sh [OUT]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(realpath -m "${1:-$root/target/wasm/python-data.wasm}")"
exec "$root/scripts/componentize-py" "$here" "$root/wit" warren:plugin/plugin "$out"
