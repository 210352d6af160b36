//! The built-in plugins, compiled for wasm32-wasip2 by `build.rs` and embedded in the
//! binary: the bundled Rust plugins (`files`, `http`) and the code-running tools
//! (`run-python`: CPython through componentize-py; `run-js`: SpiderMonkey through
//! componentize-js). They load through the compile cache and run sandboxed exactly like
//! plugin files.

/// The tables of the built-ins `build.rs` wrote in `OUT_DIR`, by name.
macro_rules! builtins {
    ($($name:literal),*) => {
        /// Name and component bytes of each built-in plugin.
        pub(crate) const BUILTINS: [(&str, &[u8]); [$($name),*].len()] =
            [$(($name, include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".wasm")))),*];

        /// Each built-in's SHA-256 (hex), computed by `build.rs`: its name in the
        /// compile cache and in a run's journal, known without reading the embedded
        /// bytes (tens of megabytes for the interpreters, which a run that never
        /// computes never touches).
        const DIGESTS: [(&str, &str); [$($name),*].len()] =
            [$(($name, include_str!(concat!(env!("OUT_DIR"), "/", $name, ".wasm.sha256")))),*];
    };
}

builtins!("files", "http", "run-python", "run-js");

/// The SHA-256 (hex) of built-in `name`'s component.
pub(crate) fn digest(name: &str) -> Option<&'static str> {
    DIGESTS
        .iter()
        .find(|(builtin, _)| *builtin == name)
        .map(|(_, digest)| *digest)
}

/// The built-ins whose code compiles only when one of their tools is first called:
/// interpreters of tens of megabytes (seconds to compile, ~0.1 s to load from the
/// cache), which most runs never call.
pub(crate) const ON_FIRST_CALL: [&str; 2] = ["run-python", "run-js"];

/// The names of the built-in plugins.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_recorded_digests_are_the_builtins_own() {
        for (name, bytes) in super::BUILTINS {
            assert_eq!(
                super::digest(name),
                Some(crate::plugin::cache::digest(bytes).as_str()),
                "{name}"
            );
        }
    }
}
