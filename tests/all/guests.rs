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
    /// Offers a tool named `spawn_agent` (must be refused at load).
    pub(crate) impostor: PathBuf,
    /// The `stamp` tool, version one and version two (answers differ).
    pub(crate) stamp_one: PathBuf,
    pub(crate) stamp_two: PathBuf,
    /// Offers 100,000 tools (must be refused at load).
    pub(crate) toolbomb: PathBuf,
    /// A typed component (plain wit-bindgen) covering every WIT type.
    pub(crate) typed_rust: PathBuf,
    /// A typed component exporting a resource (must be refused at load).
    pub(crate) typed_resource: PathBuf,
    /// A typed component importing interfaces warren lacks (must be refused at load).
    pub(crate) typed_import: PathBuf,
    /// A typed component whose types nest too deep or share too often (refused).
    pub(crate) typed_bomb: PathBuf,
}

/// The repository root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Where guest components are built.
pub(crate) fn wasm_dir() -> PathBuf {
    root().join("target").join("wasm")
}

/// Runs a build command; on failure, panics with its output and `hint` (what the build
/// needs and how to get it).
fn build(command: &mut Command, hint: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{hint}: cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({hint}):\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Builds `plugins/` and `tests/fixtures/` for wasm32-wasip2 once per test process.
pub(crate) fn guests() -> &'static Guests {
    static GUESTS: OnceLock<Guests> = OnceLock::new();
    GUESTS.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        for manifest in ["plugins/Cargo.toml", "tests/fixtures/Cargo.toml"] {
            build(
                Command::new(&cargo)
                    .args([
                        "build",
                        "--release",
                        "--target",
                        "wasm32-wasip2",
                        "--manifest-path",
                    ])
                    .arg(root().join(manifest))
                    .env("CARGO_TARGET_DIR", wasm_dir()),
                "the wasm32-wasip2 target is needed: `rustup target add wasm32-wasip2`",
            );
        }
        let dir = wasm_dir().join("wasm32-wasip2").join("release");
        Guests {
            files: dir.join("files.wasm"),
            http: dir.join("http.wasm"),
            hostile: dir.join("hostile.wasm"),
            impostor: dir.join("impostor.wasm"),
            stamp_one: dir.join("stamp_one.wasm"),
            stamp_two: dir.join("stamp_two.wasm"),
            toolbomb: dir.join("toolbomb.wasm"),
            typed_rust: dir.join("typed_rust.wasm"),
            typed_resource: dir.join("typed_resource.wasm"),
            typed_import: dir.join("typed_import.wasm"),
            typed_bomb: dir.join("typed_bomb.wasm"),
        }
    })
}

/// Builds the Python plugin (componentize-py, installed from PyPI by its build script
/// when missing) once per process.
pub(crate) fn python_plugin() -> &'static PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        componentize_py(
            "plugins/python-data/build.sh",
            "python-data.wasm",
            "the Python plugin needs python3 with pip, to install componentize-py from PyPI",
        )
    })
}

/// Runs the componentize-py build script `script` into `name` under the wasm directory.
fn componentize_py(script: &str, name: &str, hint: &str) -> PathBuf {
    let out = wasm_dir().join(name);
    let script = root().join(script);
    if !up_to_date(&out, &[script.parent().unwrap(), &root().join("wit")]) {
        build(Command::new(&script).arg(&out), hint);
    }
    out
}

/// Whether `out` exists and is newer than every file under `sources` (dependency and
/// bytecode caches aside). The interpreted builds are not byte-for-byte reproducible,
/// so rebuilding an unchanged plugin would also recompile it in every test or bench run.
fn up_to_date(out: &Path, sources: &[&Path]) -> bool {
    fn newest(path: &Path) -> std::time::SystemTime {
        // A time that cannot be read counts as now: the plugin is rebuilt.
        let Ok(meta) = std::fs::metadata(path) else {
            return std::time::SystemTime::now();
        };
        let own = meta
            .modified()
            .unwrap_or_else(|_| std::time::SystemTime::now());
        if !meta.is_dir() {
            return own;
        }
        let skip = |name: &std::ffi::OsStr| name == "node_modules" || name == "__pycache__";
        // A directory's own time counts too: it changes when a file is removed.
        std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| !skip(&entry.file_name()))
            .map(|entry| newest(&entry.path()))
            .fold(own, std::cmp::max)
    }
    let Ok(built) = std::fs::metadata(out).and_then(|m| m.modified()) else {
        return false;
    };
    sources.iter().all(|source| newest(source) <= built)
}

/// Builds the JavaScript plugin (componentize-js from npm, pinned by package-lock.json)
/// once per process.
pub(crate) fn js_plugin() -> &'static PathBuf {
    static JS: OnceLock<PathBuf> = OnceLock::new();
    JS.get_or_init(|| {
        componentize_js(
            "plugins/js-markdown",
            "js-markdown.wasm",
            "the JavaScript plugin needs Node.js and npm",
        )
    })
}

/// Installs the npm project in `dir` exactly as its lock file says: `npm ci` never
/// rewrites the (tracked) lock file, as `npm install` does when it lacks an entry.
pub(crate) fn npm_ci(dir: &Path, hint: &str) {
    build(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(dir),
        hint,
    );
}

/// Builds the componentize-js project in `dir` (its `build.mjs`, with its pinned
/// node_modules installed first when missing) into `name` under the wasm directory.
fn componentize_js(dir: &str, name: &str, hint: &str) -> PathBuf {
    let dir = root().join(dir);
    let out = wasm_dir().join(name);
    if !dir
        .join("node_modules/@bytecodealliance/componentize-js")
        .exists()
    {
        npm_ci(&dir, hint);
    }
    if !up_to_date(&out, &[&dir, &root().join("wit")]) {
        build(
            Command::new("node")
                .arg("build.mjs")
                .arg(&out)
                .current_dir(&dir),
            hint,
        );
    }
    out
}

/// Builds the C plugin (Debian clang + wasi-libc, wit-bindgen's C bindings, then
/// `warren plugin componentize`) once per process.
pub(crate) fn c_plugin(warren: &str) -> &'static PathBuf {
    static C: OnceLock<PathBuf> = OnceLock::new();
    C.get_or_init(|| {
        let out = wasm_dir().join("c-checksum.wasm");
        build(
            Command::new(root().join("plugins/c-checksum/build.sh"))
                .arg(&out)
                .env("WARREN", warren),
            "the C plugin needs `apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32`",
        );
        out
    })
}

/// Builds the Python typed component (componentize-py, as for the Python plugin) once
/// per process.
pub(crate) fn typed_python() -> &'static PathBuf {
    static TYPED: OnceLock<PathBuf> = OnceLock::new();
    TYPED.get_or_init(|| {
        componentize_py(
            "tests/fixtures/typed-python/build.sh",
            "typed-python.wasm",
            "the Python typed fixture needs python3 with pip, to install componentize-py from PyPI",
        )
    })
}

/// Builds the JavaScript typed component (componentize-js from npm, pinned by its
/// package-lock.json) once per process.
pub(crate) fn typed_js() -> &'static PathBuf {
    static TYPED: OnceLock<PathBuf> = OnceLock::new();
    TYPED.get_or_init(|| {
        componentize_js(
            "tests/fixtures/typed-js",
            "typed-js.wasm",
            "the JavaScript typed fixture needs Node.js and npm",
        )
    })
}

/// The Python of a venv under `target/` (`venv`) with the packages pinned in
/// `fixture/requirements.txt`, created and installed on first use in this process (pip
/// leaves it as it is when nothing changed). `what` names the tests, for the error.
pub(crate) fn python_venv(fixture: &str, venv: &str, what: &str) -> PathBuf {
    static READY: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let (fixture, venv) = (root().join(fixture), root().join(venv));
    let python = venv.join("bin/python");
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    let key = venv.display().to_string();
    if !ready.contains(&key) {
        let hint = format!(
            "python3 with venv and pip is needed for {what} (scripts/install-deps installs it)"
        );
        if !python.exists() {
            let status = std::process::Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .expect(&hint);
            assert!(status.success(), "{hint}");
        }
        let status = std::process::Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(fixture.join("requirements.txt"))
            .status()
            .expect(&hint);
        assert!(
            status.success(),
            "pip install -r {}/requirements.txt failed (PyPI must be reachable once)",
            fixture.display()
        );
        ready.push(key);
    }
    python
}
