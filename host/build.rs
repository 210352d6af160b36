//! Builds the bundled plugins for wasm32-wasip2 and copies them into OUT_DIR, where
//! `builtin` embeds them: the `warren` binary then carries its standard tools and
//! works on its own (`cargo install --path host`). The Rust ones (`plugins/`: files,
//! http) build with cargo; the code-running tools with their interpreters' toolchains:
//! `run_python` (`plugins/run-python`, componentize-py from PyPI into a virtual
//! environment) and `run_js` (`plugins/run-js`, componentize-js from npm, Node.js 20 or
//! later). `scripts/install-deps build` installs what they need. All are loaded as
//! components and sandboxed like any plugin.

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
    let interpreters = Interpreters {
        root: &root,
        wasm: &target_dir,
        out: &out_dir,
    };
    interpreters.python();
    interpreters.javascript();
    // Each built-in's SHA-256 (its name in the compile cache and in a run's journal),
    // so a process need not read tens of megabytes of embedded interpreter to learn it.
    for name in ["files", "http", "run-python", "run-js"] {
        let wasm = out_dir.join(format!("{name}.wasm"));
        let bytes =
            std::fs::read(&wasm).unwrap_or_else(|e| panic!("reading {}: {e}", wasm.display()));
        let digest: String = <sha2::Sha256 as sha2::Digest>::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(out_dir.join(format!("{name}.wasm.sha256")), digest)
            .expect("writing a built-in's digest into OUT_DIR");
    }
}

/// Builds the code-running tools, each only when its sources are newer than what
/// `target/wasm` holds (the toolchains take seconds), and copies them into OUT_DIR.
struct Interpreters<'a> {
    root: &'a Path,
    wasm: &'a Path,
    out: &'a Path,
}

impl Interpreters<'_> {
    fn python(&self) {
        let dir = self.root.join("plugins/run-python");
        let sources = [
            dir.join("app.py"),
            dir.join("build.sh"),
            self.root.join("scripts/componentize-py"),
            self.root.join("plugins/python-data/requirements.txt"),
        ];
        let built = self.wasm.join("run-python.wasm");
        if !up_to_date(&built, &sources, self.root) {
            run(
                Command::new(dir.join("build.sh")).arg(&built),
                "building the built-in `run_python` tool (plugins/run-python) needs python3 with venv and pip, to install componentize-py from PyPI: run `scripts/install-deps build`, then build again",
            );
        }
        copy(&built, &self.out.join("run-python.wasm"));
    }

    fn javascript(&self) {
        let dir = self.root.join("plugins/run-js");
        let sources = ["run.js", "build.mjs", "package-lock.json"].map(|f| dir.join(f));
        let built = self.wasm.join("run-js.wasm");
        let hint = "building the built-in `run_js` tool (plugins/run-js) needs Node.js 20 or later and npm, to install componentize-js: run `scripts/install-deps build`, then build again";
        if !up_to_date(&built, &sources, self.root) {
            // Node 22 from npm where the system's is too old (scripts/install-deps): first
            // on PATH for npm too, which would otherwise run under the old Node and skip
            // the optional native packages componentize-js needs (their engines ask 20).
            let local = self.root.join("target/node/node_modules/.bin");
            let node = if local.join("node").exists() {
                local.join("node")
            } else {
                PathBuf::from("node")
            };
            let path = match std::env::var_os("PATH") {
                Some(path) if local.join("node").exists() => {
                    std::env::join_paths(std::iter::once(local).chain(std::env::split_paths(&path)))
                        .expect("PATH entries join")
                }
                Some(path) => path,
                None => local.into_os_string(),
            };
            // Installed by this script with that Node, once (a stamp says so): a tree
            // npm left half-installed under another Node is installed again.
            let stamp = dir.join("node_modules/.warren-npm-ci");
            if !stamp.exists() {
                run(
                    Command::new("npm")
                        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                        .env("PATH", &path)
                        .current_dir(&dir),
                    hint,
                );
                std::fs::write(&stamp, "npm ci done by host/build.rs\n")
                    .unwrap_or_else(|e| panic!("writing {}: {e}", stamp.display()));
            }
            run(
                Command::new(node)
                    .arg("build.mjs")
                    .arg(&built)
                    .env("PATH", &path)
                    .current_dir(&dir),
                hint,
            );
        }
        copy(&built, &self.out.join("run-js.wasm"));
    }
}

/// Whether `built` exists and is newer than every one of `sources` and the WIT files.
fn up_to_date(built: &Path, sources: &[PathBuf], root: &Path) -> bool {
    for source in sources {
        println!("cargo:rerun-if-changed={}", source.display());
    }
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let Some(built) = modified(built) else {
        return false;
    };
    let wit = std::fs::read_dir(root.join("wit"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path());
    sources
        .iter()
        .cloned()
        .chain(wit)
        .all(|source| modified(&source).is_some_and(|time| time <= built))
}

/// Runs `command`, its output shown only when it fails, with `hint`.
fn run(command: &mut Command, hint: &str) {
    // The outer build's target directory and flags are not the guest toolchains'.
    for var in ["CARGO_TARGET_DIR", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"] {
        command.env_remove(var);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{hint}\n\n{command:?}: {e}"));
    if !output.status.success() {
        panic!(
            "{hint}\n\n{command:?} failed ({})\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
}
