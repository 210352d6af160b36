#!/usr/bin/env bash
# The peer benchmark: one workload, 1000 sub-agents (a coordinator spawns 100 at once, ten
# times; each reads one file and answers), under warren and under the OpenAI Agents SDK,
# against the same scripted OpenAI-compatible server (server.py). Prints each client's
# host CPU time per sub-agent and peak RSS, and the CPU ratio; see docs/benchmarks.md.
# The SDK goes into a virtual environment (target/peer-swarm-venv, or $PEER_VENV) on the
# first run, from PyPI (requirements.txt). --unstreamed: warren's model gets
# `stream = false`, so neither client streams. --journal-cost N: warren alone, N runs
# with its run journal on and N with --no-journal (pairs in alternating order), and the
# ratio of the medians with a bootstrap interval. --profile FILE: warren alone, once, under
# perf record into FILE, and where its CPU went (breakdown.py).
# Run with: bench/peer-swarm/run.sh [--unstreamed] target/release/warren PLUGINS_DIR
# (the files plugin is taken from PLUGINS_DIR/files.wasm, e.g. in
# target/wasm/wasm32-wasip2/release after scripts/build-plugins)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${PEER_VENV:-$(cd "$here/../.." && pwd)/target/peer-swarm-venv}
if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  python3 -m venv "$venv" || {
    echo "$0: python3 -m venv failed; scripts/install-deps installs python3-venv" >&2; exit 2; }
  "$venv/bin/pip" install -q -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi
exec python3 "$here/swarm.py" --python "$venv/bin/python" "$@"
