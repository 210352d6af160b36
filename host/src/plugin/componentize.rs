//! Wrapping a core WebAssembly module (wasm32-wasip1, e.g. from C with wasi-libc)
//! into a component: the WASI preview1 calls go through the reactor adapter, and the
//! component type information that wit-bindgen embedded in the module becomes the
//! component's imports and exports. This is `wasm-tools component new --adapt`, done
//! from Rust so building a C plugin needs no extra tool.

use std::path::Path;

use anyhow::Context as _;
use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;

/// Reads the core module at `input`, writes the component to `output`.
pub(crate) fn componentize(input: &Path, output: &Path) -> anyhow::Result<usize> {
    let module = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .with_context(|| format!("{} is not a core module with component type information (build it with wit-bindgen's bindings)", input.display()))?
        .adapter("wasi_snapshot_preview1", WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER)
        .context("loading the WASI preview1 reactor adapter")?
        .validate(true)
        .encode()
        .with_context(|| format!("turning {} into a component", input.display()))?;
    std::fs::write(output, &component).with_context(|| format!("writing {}", output.display()))?;
    Ok(component.len())
}
