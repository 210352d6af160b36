#!/usr/bin/env bash
# Builds warren's built-in `run_python` tool into OUT (default: target/wasm/run-python.wasm).
# host/build.rs runs it; by hand: plugins/run-python/build.sh [OUT]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/wasm/run-python.wasm}"
venv="$root/target/componentize-py"
# componentize-py in a virtual environment of its own: Debian 12 and recent Ubuntu
# refuse `pip install` into the system interpreter (externally-managed-environment).
if [ ! -x "$venv/bin/componentize-py" ] || [ "$("$venv/bin/componentize-py" --version)" != "componentize-py 0.25.1" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --requirement "$here/requirements.txt"
fi
mkdir -p "$(dirname "$out")"
cd "$here"
"$venv/bin/componentize-py" -d "$root/wit" -w warren:plugin/plugin componentize app -o "$out"
