//! The built-in plugins: the bundled Rust plugins (`files`, `http`), compiled for
//! wasm32-wasip2 by `build.rs` and embedded in the binary. They load through the
//! compile cache and run sandboxed exactly like plugin files.

/// Name and component bytes of each built-in plugin.
pub const BUILTINS: [(&str, &[u8]); 2] = [
    (
        "files",
        include_bytes!(concat!(env!("OUT_DIR"), "/files.wasm")),
    ),
    (
        "http",
        include_bytes!(concat!(env!("OUT_DIR"), "/http.wasm")),
    ),
];

/// The names of the built-in plugins.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|(name, _)| *name)
}
