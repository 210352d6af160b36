#!/usr/bin/env bash
# The offline demo: a scripted coordinator spawns three researchers in parallel over
# docs/, one of which is denied a write, and an analyst that totals docs/capacity.csv
# with run_python; then it awaits them and summarises.
# Run with: ./examples/demo/run.sh   (extra options go to `warren run`, e.g. --web)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$root/scripts/install-deps" build
"$root/scripts/build-warren"
exec "$root/target/debug/warren" --config "$root/examples/demo/warren.toml" run \
  "Summarise what the documents under /docs say about energy in 2025." "$@"
