#!/usr/bin/env bash
# The quick start: build warren (with its built-in plugins), then call tools in the
# sandbox.
# Run with: ./examples/quickstart/run.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$root/scripts/install-deps" build
"$root/scripts/build-warren"
warren="$root/target/debug/warren"
cd "$root/examples/quickstart"

step() { printf '\n\033[1m$ warren %s\033[0m\n' "$*"; }

step tools --profile reader
"$warren" tools --profile reader

step call list_dir '{"path":"/docs"}'
"$warren" call list_dir '{"path":"/docs"}'

step call search_text '{"path":"/docs","pattern":"sandbox"}'
"$warren" call search_text '{"path":"/docs","pattern":"sandbox"}'

step call write_file '{"path":"/notes/summary.md",...}' --profile writer
"$warren" call write_file '{"path":"/notes/summary.md","content":"warren keeps tools in a sandbox.\n"}' --profile writer

step call write_file '{"path":"/docs/hack.md",...}'   "# /docs is read-only: denied"
if "$warren" call write_file '{"path":"/docs/hack.md","content":"x"}'; then
  echo "unexpected: the write was allowed" >&2
  exit 1
fi

step call http_get '{"url":"http://169.254.169.254/latest/meta-data/"}'   "# not in capabilities.net: denied"
if "$warren" call http_get '{"url":"http://169.254.169.254/latest/meta-data/"}'; then
  echo "unexpected: the request was allowed" >&2
  exit 1
fi
printf '\nquick start finished: tools ran, and the sandbox refused what the profiles do not grant.\n'
