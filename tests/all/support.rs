//! Shared test helpers: building the guest plugins, writing configs, a tiny HTTP
//! server on 127.0.0.1:0, and a digest of a directory tree to prove nothing changed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use warren::{Config, Sandbox, ToolAccess, ToolRegistry};

pub(crate) use crate::guests::{guests, root};

/// A shared compile cache so tests do not recompile the same components.
pub(crate) fn cache_dir() -> PathBuf {
    root().join("target").join("test-compile-cache")
}

/// A scratch world for one test: `docs/` (read-only material), `out/` (writable),
/// `secret.txt` beside them (must never be read or changed), and `warren.toml`.
pub(crate) struct World {
    pub(crate) dir: tempfile::TempDir,
}

impl World {
    pub(crate) fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        std::fs::write(
            dir.path().join("docs/notes.md"),
            "alpha\nthe quick brown fox\nomega\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("docs/sub")).unwrap();
        std::fs::write(
            dir.path().join("docs/sub/deep.txt"),
            "a fox in a subdirectory\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("secret.txt"), "TOP SECRET").unwrap();
        World { dir }
    }

    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// Writes `warren.toml` loading all three guests, then `profiles`.
    pub(crate) fn config(&self, profiles: &str) -> PathBuf {
        self.write_config("", profiles)
    }

    /// Writes `warren.toml` loading all three guests, with `plugins` (more keys of
    /// its `[plugins]` table), then `profiles`.
    fn write_config(&self, plugins: &str, profiles: &str) -> PathBuf {
        let guests = guests();
        let text = format!(
            "[plugins]\nfiles = [{:?}, {:?}, {:?}]\ncache_dir = {:?}\n{plugins}\n{profiles}",
            guests.files,
            guests.http,
            guests.hostile,
            cache_dir()
        );
        let path = self.path("warren.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Loads the config and the registry of the three guests (no built-ins), and
    /// gives access as `profile`.
    pub(crate) async fn load(
        &self,
        profiles: &str,
        profile: &str,
    ) -> (Arc<ToolRegistry>, ToolAccess) {
        let config = Config::load(&self.write_config("builtins = false\n", profiles)).unwrap();
        let sandbox = Arc::new(Sandbox::new().unwrap());
        let registry = ToolRegistry::for_config(sandbox, &config).await.unwrap();
        let access = ToolAccess::new(config.profile(profile).unwrap()).unwrap();
        (Arc::new(registry), access)
    }
}

/// A registry of plugin `files` alone (no built-ins), loaded as a configuration made
/// in code in `dir` names them, through the shared compile cache (or none, without
/// `cache`).
pub(crate) async fn load_plugins(
    dir: &Path,
    files: &[PathBuf],
    cache: bool,
) -> anyhow::Result<ToolRegistry> {
    let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let builder = Config::builder(dir)
        .set("plugins.builtins", false)
        .set("plugins.files", files);
    let config = match cache {
        true => builder.set("plugins.cache_dir", cache_dir().display().to_string()),
        false => builder.set("plugins.cache", false),
    }
    .build()?;
    ToolRegistry::for_config(Arc::new(Sandbox::new()?), &config).await
}

/// Every file under `dir` with its contents (symlinks as their targets), sorted: equal
/// digests before and after mean nothing was created, changed or removed.
pub(crate) fn tree_digest(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                out.push((
                    path.clone(),
                    std::fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else if meta.is_dir() {
                out.push((path.clone(), Vec::new()));
                stack.push(path);
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Serves `body` with status 200 to every request on 127.0.0.1:0; returns the port
/// and a counter of requests served.
pub(crate) async fn http_server(body: &'static str) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = served.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 8192];
                let mut request = Vec::new();
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nx-noise: hidden\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, served)
}

/// Runs the `warren` binary in `world` (no `WARREN_CONFIG`, logs at `warn`).
pub(crate) fn warren(world: &World, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// Bytes as text, for messages.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The demo's `warren.toml`, with its analyst's `run_python` compiled into the demo's
/// compile cache once per test process: on a fresh clone whose demo has not run, the
/// demo-based tests would otherwise each compile CPython at once, for seconds, inside
/// the analyst's 30 s limit.
pub(crate) fn demo_config() -> PathBuf {
    static WARM: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    let config = root().join("examples/demo/warren.toml");
    WARM.get_or_init(|| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_warren"))
            .arg("--config")
            .arg(&config)
            .args([
                "call",
                "--profile",
                "analyst",
                "run_python",
                r#"{"code": "1"}"#,
            ])
            .env_remove("WARREN_CONFIG")
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
    });
    config
}

/// The first `n` job ids a run of id `run_id` hands out, in order: a multiplicative
/// hash of a counter that starts from the run id's SHA-256, six hex digits each, as
/// warren's job tree derives them (so a test knows a child's id before its run makes it).
pub(crate) fn job_ids(run_id: &str, n: usize) -> Vec<String> {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(run_id.as_bytes());
    let mut counter = u64::from_le_bytes(digest[..8].try_into().unwrap());
    let mut ids: Vec<String> = Vec::new();
    while ids.len() < n {
        let hashed = counter.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        counter = counter.wrapping_add(1);
        let id = format!("{:06x}", (hashed >> 40) & 0xff_ffff);
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// A terminal of its own: a tmux server (`-L NAME`) running one command in a
/// session of that name, killed when dropped.
pub(crate) struct Tmux {
    name: String,
}

impl Tmux {
    /// Starts `command` (a shell line) in a `columns`×`rows` session named `name`.
    pub(crate) fn start(name: &str, command: &str, (columns, rows): (u32, u32)) -> Tmux {
        let tmux = Tmux { name: name.into() };
        let _ = tmux.run(&["kill-server"]);
        let (columns, rows) = (columns.to_string(), rows.to_string());
        let start = [
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            &columns,
            "-y",
            &rows,
            command,
        ];
        // A server just killed can refuse the next start for a moment.
        let mut started = tmux.run(&start);
        for _ in 0..3 {
            if started.status.success() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            started = tmux.run(&start);
        }
        assert!(started.status.success(), "{started:?}");
        tmux
    }

    /// `tmux ARGS` on this server.
    pub(crate) fn run(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .args(["-L", &self.name])
            .args(args)
            .output()
            .expect("tmux is needed for the terminal tests: apt-get install tmux (scripts/install-deps does)")
    }

    /// The screen, once it shows `wanted` (within 30 s; panics with the screen
    /// otherwise).
    pub(crate) fn screen_with(&self, wanted: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let screen = self.run(&["capture-pane", "-p", "-t", &self.name]);
            let screen = String::from_utf8_lossy(&screen.stdout).into_owned();
            if screen.contains(wanted) {
                return screen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the screen never showed {wanted:?}:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(40));
        }
    }

    /// The screen and everything scrolled off it.
    pub(crate) fn history(&self) -> String {
        let all = self.run(&["capture-pane", "-p", "-S", "-", "-t", &self.name]);
        String::from_utf8_lossy(&all.stdout).into_owned()
    }

    /// Types `keys` (tmux key names: `y`, `Enter`).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.name];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}
