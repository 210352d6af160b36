#!/usr/bin/env bash
# Builds {{name}}.wasm. Run with: ./build.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
cargo build --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm" {{name}}.wasm
