#!/usr/bin/env bash
# Builds the Python plugin into OUT (default: target/wasm/python-data.wasm).
# Run with: plugins/python-data/build.sh [OUT]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/wasm/python-data.wasm}"
if ! command -v componentize-py >/dev/null || [ "$(componentize-py --version)" != "componentize-py 0.25.1" ]; then
  python3 -m pip install --quiet --requirement "$here/requirements.txt"
fi
mkdir -p "$(dirname "$out")"
cd "$here"
componentize-py -d "$root/wit" -w warren:plugin/plugin componentize app -o "$out"
