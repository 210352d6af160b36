#!/usr/bin/env bash
# Builds {{name}}.wasm. Run with: ./build.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
[ -d node_modules/@bytecodealliance/componentize-js ] || npm install --no-audit --no-fund
node build.mjs
