#!/usr/bin/env bash
# Builds {{name}} and checks its tool through warren. Run with: ./test.sh
# Uses `warren` from PATH, or the binary named by $WARREN.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
warren="${WARREN:-warren}"
./build.sh
"$warren" plugin inspect {{name}}.wasm
got="$("$warren" --config warren.toml call {{prefix}}_greet '{"name":"warren"}')"
if [ "$got" != "Hello, warren!" ]; then
  echo "FAIL: {{prefix}}_greet returned: $got" >&2
  exit 1
fi
if "$warren" --config warren.toml call {{prefix}}_greet '{"name":5}' 2>/dev/null; then
  echo "FAIL: a bad argument was accepted" >&2
  exit 1
fi
echo "ok: {{name}} works under warren"
