//! Host bindings of the `warren:plugin/plugin` world. The WASI and wasi:http imports map
//! to wasmtime-wasi's own bindings; only `host-log` and the `tool` export are new.
#![allow(missing_docs, unreachable_pub)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "warren:plugin/plugin",
    exports: { default: async },
    with: {
        "wasi:cli": wasmtime_wasi::p2::bindings::cli,
        "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        "wasi:filesystem": wasmtime_wasi::p2::bindings::filesystem,
        "wasi:io": wasmtime_wasi::p2::bindings::io,
        "wasi:random": wasmtime_wasi::p2::bindings::random,
        "wasi:sockets": wasmtime_wasi::p2::bindings::sockets,
        "wasi:http": wasmtime_wasi_http::p2::bindings::http,
    },
});
