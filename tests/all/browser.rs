//! Driving the web view in a browser, for the web tests and the web bench: Playwright
//! for Python (pinned in `tests/fixtures/web-python/requirements.txt`, in a venv under
//! `target/`) with Debian's `chromium` headless (`scripts/install-deps` installs it;
//! Playwright never downloads a browser), and a warren process serving a page.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::guests::root;

const WARREN: &str = env!("CARGO_BIN_EXE_warren");

/// Python with Playwright, and the system's chromium.
fn playwright() -> (PathBuf, PathBuf) {
    let python = crate::guests::python_venv(
        "tests/fixtures/web-python",
        "target/web-python",
        "the web view tests",
    );
    let chromium = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file())
        .expect("chromium is needed for the web view tests: scripts/install-deps installs it (apt-get install chromium)");
    (python, chromium)
}

/// A warren process serving a web view, its stderr collected.
pub(crate) struct Served {
    pub(crate) child: Child,
    /// The page's address, token included.
    pub(crate) url: String,
    /// What warren wrote on stderr so far.
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl Served {
    /// Starts `warren ARGS` in `world` and waits for the address it prints.
    pub(crate) fn start(dir: &Path, args: &[&str]) -> Served {
        Served::start_with(dir, args, None)
    }

    /// As [`Served::start`], with at most `descriptors` open files (`ulimit -n`)
    /// when given.
    pub(crate) fn start_with(dir: &Path, args: &[&str], descriptors: Option<u32>) -> Served {
        let mut command = match descriptors {
            Some(limit) => {
                let mut shell = Command::new("sh");
                shell
                    .arg("-c")
                    .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
                    .arg(WARREN);
                shell
            }
            None => Command::new(WARREN),
        };
        let mut child = command
            .args(args)
            .current_dir(dir)
            .env_remove("WARREN_CONFIG")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, url) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap());
        let collected = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if let Some(at) = line.find("web view at http://") {
                    let url = line[at + "web view at ".len()..]
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    let _ = found.send(url);
                }
                collected.lock().unwrap().push_str(&line);
                collected.lock().unwrap().push('\n');
            }
        });
        let url = url
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!("warren printed no web address:\n{}", stderr.lock().unwrap())
            });
        Served { child, url, stderr }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs browser.py's `scenario` against `url`, with `on_line` called on each line it
/// prints; panics with its output unless it ends with PASS.
pub(crate) fn browse(scenario: &str, url: &str, screenshot: &str, on_line: impl Fn(&str)) {
    let (python, chromium) = playwright();
    let shot = root().join("target").join(screenshot);
    let mut child = Command::new(python)
        .arg(root().join("tests/fixtures/web-python/browser.py"))
        .args([scenario, url])
        .arg(&chromium)
        .arg(&shot)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut printed: Vec<String> = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        on_line(&line);
        printed.push(line);
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success() && printed.last().map(String::as_str) == Some("PASS"),
        "browser scenario `{scenario}` failed:\n{}\n{}",
        printed.join("\n"),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(shot.is_file(), "no screenshot at {}", shot.display());
}
