//! Builds the guest components (bundled plugins and test fixtures) for wasm32-wasip2,
//! once per process. Shared by the integration tests and the benchmarks.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Paths of the built guest components.
pub(crate) struct Guests {
    pub(crate) files: PathBuf,
    pub(crate) http: PathBuf,
    pub(crate) hostile: PathBuf,
}

/// Builds `plugins/` and `tests/fixtures/` for wasm32-wasip2 once per test process.
pub(crate) fn guests() -> &'static Guests {
    static GUESTS: OnceLock<Guests> = OnceLock::new();
    GUESTS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let target = root.join("target").join("wasm");
        for manifest in ["plugins/Cargo.toml", "tests/fixtures/Cargo.toml"] {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let output = Command::new(cargo)
                .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
                .arg(root.join(manifest))
                .env("CARGO_TARGET_DIR", &target)
                .output()
                .expect("running cargo to build the guest plugins");
            assert!(
                output.status.success(),
                "building {manifest} for wasm32-wasip2 failed (is the target installed? `rustup target add wasm32-wasip2`):\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let dir = target.join("wasm32-wasip2").join("release");
        Guests { files: dir.join("files.wasm"), http: dir.join("http.wasm"), hostile: dir.join("hostile.wasm") }
    })
}

/// Builds the Python plugin (componentize-py, installed from PyPI by its build script
/// when missing) once per process.
pub(crate) fn python_plugin() -> &'static PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let out = root.join("target").join("wasm").join("python-data.wasm");
        let output = Command::new(root.join("plugins/python-data/build.sh"))
            .arg(&out)
            .output()
            .expect("running plugins/python-data/build.sh");
        assert!(
            output.status.success(),
            "building the Python plugin failed (it needs python3 with pip, to install componentize-py from PyPI):\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        out
    })
}

/// Builds the JavaScript plugin (componentize-js from npm, pinned by package-lock.json)
/// once per process.
pub(crate) fn js_plugin() -> &'static PathBuf {
    static JS: OnceLock<PathBuf> = OnceLock::new();
    JS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let dir = root.join("plugins/js-markdown");
        let out = root.join("target").join("wasm").join("js-markdown.wasm");
        let run = |program: &str, args: &[&str]| {
            let output = Command::new(program)
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap_or_else(|e| panic!("running {program} (Node.js and npm are needed for the JavaScript plugin): {e}"));
            assert!(
                output.status.success(),
                "{program} {args:?} failed:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        };
        if !dir.join("node_modules/@bytecodealliance/componentize-js").exists() {
            run("npm", &["install", "--no-audit", "--no-fund"]);
        }
        run("node", &["build.mjs", out.to_str().unwrap()]);
        out
    })
}

/// Builds the C plugin (Debian clang + wasi-libc, wit-bindgen's C bindings, then
/// `warren plugin componentize`) once per process.
pub(crate) fn c_plugin(warren: &str) -> &'static PathBuf {
    static C: OnceLock<PathBuf> = OnceLock::new();
    C.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let out = root.join("target").join("wasm").join("c-checksum.wasm");
        let output = Command::new(root.join("plugins/c-checksum/build.sh"))
            .arg(&out)
            .env("WARREN", warren)
            .output()
            .expect("running plugins/c-checksum/build.sh");
        assert!(
            output.status.success(),
            "building the C plugin failed (needs: apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32):\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        out
    })
}
