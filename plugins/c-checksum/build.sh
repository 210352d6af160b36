#!/usr/bin/env bash
# Builds the C plugin into OUT (default: target/wasm/c-checksum.wasm).
# Needs: Debian's clang, lld, wasi-libc and libclang-rt-14-dev-wasm32; wit-bindgen-cli
# (installed with cargo, pinned, when missing); and the warren binary ($WARREN, or
# target/debug/warren) for `warren plugin componentize`.
# Run with: plugins/c-checksum/build.sh [OUT]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/wasm/c-checksum.wasm}"
warren="${WARREN:-$root/target/debug/warren}"
sysroot=/usr  # Debian installs wasi-libc as a multiarch sysroot (include/wasm32-wasi, lib/wasm32-wasi)
for need in clang /usr/include/wasm32-wasi/stdio.h; do
  if ! command -v "$need" >/dev/null 2>&1 && [ ! -e "$need" ]; then
    echo "missing $need: apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32" >&2
    exit 1
  fi
done
if [ "$(wit-bindgen --version 2>/dev/null | cut -d' ' -f2)" != "0.61.1" ]; then
  cargo install --quiet --locked wit-bindgen-cli --version 0.61.1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wit-bindgen c "$root/wit" --world warren:plugin/plugin --out-dir "$work" >/dev/null
clang --target=wasm32-wasi --sysroot="$sysroot" -mexec-model=reactor -O2 -Wall -Werror \
  -I "$work" "$here/checksum.c" "$work/plugin.c" "$work/plugin_component_type.o" -o "$work/core.wasm"
mkdir -p "$(dirname "$out")"
"$warren" plugin componentize "$work/core.wasm" -o "$out"
