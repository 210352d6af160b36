#!/usr/bin/env bash
# Builds the Python plugin into OUT (default: target/wasm/python-data.wasm).
# Run with: plugins/python-data/build.sh [OUT]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/wasm/python-data.wasm}"
venv="$root/target/componentize-py"
requirements="$here/requirements.txt"
# componentize-py in a virtual environment of its own: Debian 12 and recent Ubuntu
# refuse `pip install` into the system interpreter (externally-managed-environment).
if [ ! -x "$venv/bin/componentize-py" ] || [ "$("$venv/bin/componentize-py" --version)" != "componentize-py 0.25.1" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --requirement "$requirements"
fi
mkdir -p "$(dirname "$out")"
cd "$here"
"$venv/bin/componentize-py" -d "$root/wit" -w warren:plugin/plugin componentize app -o "$out"
