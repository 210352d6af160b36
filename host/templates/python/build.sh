#!/usr/bin/env bash
# Builds {{name}}.wasm with componentize-py. Run with: ./build.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if ! command -v componentize-py >/dev/null || [ "$(componentize-py --version)" != "componentize-py 0.25.1" ]; then
  python3 -m pip install --quiet --requirement requirements.txt
fi
componentize-py -d wit -w warren:plugin/plugin componentize app -o {{name}}.wasm
