//! Builds the bundled Rust plugins (`plugins/`: files, http) for wasm32-wasip2 and
//! copies them into OUT_DIR, where `plugin::builtin` embeds them: the `warren` binary
//! then carries its standard tools and works on its own (`cargo install --path host`).
//! They are still loaded as components and sandboxed like any plugin.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The built-in plugins: crate names in `plugins/`.
const BUILTINS: [&str; 2] = ["files", "http"];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .parent()
        .expect("host/ is inside the repository")
        .to_path_buf();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    for watched in ["plugins/Cargo.toml", "plugins/Cargo.lock", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    for plugin in BUILTINS {
        println!(
            "cargo:rerun-if-changed={}",
            root.join("plugins").join(plugin).display()
        );
    }
    // The same directory scripts/build-plugins and the tests use, so the plugins are
    // built once.
    let target_dir = root.join("target").join("wasm");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(root.join("plugins/Cargo.toml"));
    // What the outer build set for the host must not leak into the guest build (flags,
    // clippy as a wrapper, a host target, the outer target directory). Cleared first:
    // the guest build's own target directory is set after this loop, not removed by it.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "CARGO_TARGET_DIR",
    ] {
        command.env_remove(var);
    }
    command.env("CARGO_TARGET_DIR", &target_dir);
    let output = command
        .output()
        .expect("running cargo to build the built-in plugins");
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("wasm32-wasip2")
            && (stderr.contains("not installed") || stderr.contains("can't find crate"))
        {
            "the wasm32-wasip2 target is missing: add it with `rustup target add wasm32-wasip2`, then build again"
        } else {
            "building the built-in plugins (plugins/) for wasm32-wasip2 failed"
        };
        panic!("{hint}\n\n{stderr}");
    }
    let built = target_dir.join("wasm32-wasip2").join("release");
    for plugin in BUILTINS {
        copy(
            &built.join(format!("{plugin}.wasm")),
            &out_dir.join(format!("{plugin}.wasm")),
        );
    }
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
}
