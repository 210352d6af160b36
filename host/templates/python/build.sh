#!/usr/bin/env bash
# Builds {{name}}.wasm with componentize-py. Run with: ./build.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
venv=.venv
requirements=requirements.txt
# componentize-py in a virtual environment of its own: Debian 12 and recent Ubuntu
# refuse `pip install` into the system interpreter (externally-managed-environment).
if [ ! -x "$venv/bin/componentize-py" ] || [ "$("$venv/bin/componentize-py" --version)" != "componentize-py 0.25.1" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --requirement "$requirements"
fi
"$venv/bin/componentize-py" -d wit -w warren:plugin/plugin componentize app -o {{name}}.wasm
