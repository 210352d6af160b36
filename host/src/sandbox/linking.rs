//! The offline linker's contents: WASI p2 without `wasi:sockets`, and the network
//! imports of a component stubbed as traps, for profiles with no `net` grant.

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::Engine;

use super::classify::NotLinked;
use super::state::CallState;

/// Defines every `wasi:http` and `wasi:sockets` function `component` imports as a
/// trap, and the resources those interfaces own as empty host types, so a plugin that
/// imports the network still instantiates under a profile without `net` but can
/// create nothing. (wasmtime's `define_unknown_imports_as_traps` would also stub the
/// `wasi:io` types the network interfaces `use`, which then no longer match.)
pub(super) fn stub_network_imports(
    linker: &mut Linker<CallState>,
    component: &Component,
    engine: &Engine,
) -> anyhow::Result<()> {
    use wasmtime::component::types::ComponentItem;
    use wasmtime::component::ResourceType;
    let mut seen: Vec<ResourceType> = Vec::new();
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        let network = name.starts_with("wasi:http/") || name.starts_with("wasi:sockets/");
        let mut resources = Vec::new();
        let mut functions = Vec::new();
        for (export, item) in instance.exports(engine) {
            match item.ty {
                // A resource first seen here is this interface's own; later sightings
                // are `use`s of it, which the linker resolves by itself.
                ComponentItem::Resource(resource) if !seen.contains(&resource) => {
                    seen.push(resource);
                    resources.push(export.to_string());
                }
                ComponentItem::ComponentFunc(_) => functions.push(export.to_string()),
                _ => {}
            }
        }
        if !network {
            continue;
        }
        let mut stubs = linker.instance(name)?;
        for resource in resources {
            stubs.resource(&resource, ResourceType::host::<()>(), |_, _| Ok(()))?;
        }
        for function in functions {
            let (interface, called) = (name.to_string(), function.clone());
            stubs.func_new(&function, move |_, _, _, _| {
                Err(wasmtime::Error::new(NotLinked {
                    interface: interface.clone(),
                    function: called.clone(),
                }))
            })?;
        }
    }
    Ok(())
}

/// WASI p2 without `wasi:sockets`: io, clocks, filesystem, random and cli, for
/// profiles with no `net` grant.
pub(super) fn add_offline_wasi(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView as _};
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random};
    use wasmtime_wasi::random::WasiRandom;
    use wasmtime_wasi_io::bindings::wasi::io;

    /// The resource table, for `wasi:io`.
    struct HasIo;
    impl wasmtime::component::HasData for HasIo {
        type Data<'a> = &'a mut ResourceTable;
    }

    let l = linker;
    io::error::add_to_linker::<CallState, HasIo>(l, |t| &mut t.table)?;
    io::poll::add_to_linker::<CallState, HasIo>(l, |t| &mut t.table)?;
    io::streams::add_to_linker::<CallState, HasIo>(l, |t| &mut t.table)?;
    clocks::wall_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
    filesystem::preopens::add_to_linker::<CallState, WasiFilesystem>(l, CallState::filesystem)?;
    filesystem::types::add_to_linker::<CallState, WasiFilesystem>(l, CallState::filesystem)?;
    random::random::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    random::insecure::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    random::insecure_seed::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    cli::exit::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::environment::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_input::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_output::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    Ok(())
}
