//! The web view in a real browser: Playwright for Python (pinned in
//! `tests/fixtures/web-python/requirements.txt`, in a venv under `target/`) driving
//! Debian's `chromium` headless (`scripts/install-deps` installs it; Playwright never
//! downloads a browser). The run is scripted on the fake model; the browser script
//! (`tests/fixtures/web-python/browser.py`) does the clicking and checks what the
//! page shows, this file checks what warren recorded.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{root, text, warren, World};

const WARREN: &str = env!("CARGO_BIN_EXE_warren");

fn answer(text: &str) -> Reply {
    Reply::answer(text, (100, 50))
}

fn calls(list: &[(&str, Value)]) -> Reply {
    Reply::tool_calls(list, (100, 50))
}

/// A project on the fake model: `main` spawns `worker`s; both may read `docs/`, not
/// write it.
fn project(world: &World, server: &FakeLlm) {
    world.config(&format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{}"
model = "fake-model"
api_key_env = "CARGO_PKG_NAME"
stream = false
max_retries = 0
price = {{ input_per_mtok = 1.0, output_per_mtok = 1.0 }}

[defaults]
max_depth = 2
budget_usd = 5.0

[profiles.main]
tools = []
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]

[profiles.worker]
description = "Reads the docs"
tools = ["read_file", "write_file"]
[profiles.worker.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]
"#,
        server.base_url
    ));
}

/// The reader's script: it reads notes.md, is denied a write to /docs, and answers.
fn script_reader(server: &FakeLlm) {
    server.route(
        "CHILD-READ",
        calls(&[("read_file", json!({"path": "/docs/notes.md"}))]),
    );
    server.route(
        "quick brown fox",
        calls(&[(
            "write_file",
            json!({"path": "/docs/summary.md", "content": "fox"}),
        )]),
    );
    server.route("read-only", answer("READER DONE"));
}

/// Python with Playwright, and the system's chromium.
fn playwright() -> (PathBuf, PathBuf) {
    static READY: Mutex<bool> = Mutex::new(false);
    let fixture = root().join("tests/fixtures/web-python");
    let venv = root().join("target/web-python");
    let python = venv.join("bin/python");
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    if !*ready {
        let hint = "python3 with venv and pip is needed for the web view tests (scripts/install-deps installs it)";
        if !python.exists() {
            let status = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .expect(hint);
            assert!(status.success(), "{hint}");
        }
        let status = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(fixture.join("requirements.txt"))
            .status()
            .expect(hint);
        assert!(
            status.success(),
            "pip install -r {}/requirements.txt failed (PyPI must be reachable once)",
            fixture.display()
        );
        *ready = true;
    }
    let chromium = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file())
        .expect("chromium is needed for the web view tests: scripts/install-deps installs it (apt-get install chromium)");
    (python, chromium)
}

/// A warren process serving a web view, its stderr collected.
struct Served {
    child: Child,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// Starts `warren ARGS` in `world` and waits for the address it prints.
    fn start(world: &World, args: &[&str]) -> Served {
        let mut child = Command::new(WARREN)
            .args(args)
            .current_dir(world.dir.path())
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
fn browse(scenario: &str, url: &str, screenshot: &str, on_line: impl Fn(&str)) {
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
    let mut printed = Vec::new();
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
        text(&output.stderr)
    );
    assert!(shot.is_file(), "no screenshot at {}", shot.display());
}

/// The newcomer's tour, live: the tree grows while the run spawns, a child's
/// transcript shows its tool call and the sandbox's denial, cancelling a running
/// child (after a confirm dialog) ends it as cancelled in the page and in `warren
/// show`, and a request without the token is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_live_run_is_watched_and_a_child_cancelled_in_the_browser() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    server.route(
        "ROOT-TASK",
        calls(&[
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "CHILD-READ", "description": "reader"}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "CHILD-SLOW", "description": "sleeper"}),
            ),
        ]),
    );
    script_reader(&server);
    server.route("CHILD-SLOW", Reply::Hang);
    server.route("CHILD-LATE", answer("LATE DONE"));
    // The root's later turns take the replies left in order, whatever its newest
    // message (a spawn's result, or a notice that a child finished). The third child
    // is spawned only once the browser has seen the first two.
    server.push(Reply::Gated(
        gate.clone(),
        Box::new(calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-LATE", "description": "late"}),
        )])),
    ));
    server.push(calls(&[("await_agents", json!({"job_ids": "*"}))]));
    server.push(answer("ROOT ANSWER"));
    project(&world, &server);

    let served = Served::start(
        &world,
        &["run", "--progress", "plain", "--web", "ROOT-TASK"],
    );
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || {
        browse("live", &url, "web-view-live.png", |line| {
            if line == "SAW 3" {
                gate.add_permits(1);
            }
        })
    })
    .await
    .unwrap();

    let stderr = served.stderr.lock().unwrap().clone();
    assert!(stderr.contains("the web view stays up"), "{stderr}");
    drop(served);
    let shown = warren(&world, &["show", "last", "--json"]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let state_of = |label: &str| {
        shown["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["label"] == label)
            .unwrap_or_else(|| panic!("no agent `{label}`: {shown}"))["state"]
            .clone()
    };
    assert_eq!(state_of("sleeper"), "cancelled", "{shown}");
    assert_eq!(state_of("reader"), "ok", "{shown}");
    assert_eq!(state_of("late"), "ok", "{shown}");
    assert_eq!(shown["run"]["state"], "ok", "{shown}");
}

/// A finished run, served afterwards from its journal by `warren view`: its tree, a
/// child's transcript with the denial, no cancelling; `warren view` without a run
/// lists the runs and opens one.
#[tokio::test(flavor = "multi_thread")]
async fn a_past_run_is_served_from_its_journal() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "CHILD-READ", "description": "reader"}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "CHILD-HELP", "description": "helper"}),
            ),
        ]),
    );
    script_reader(&server);
    server.route("CHILD-HELP", answer("HELPED"));
    server.push(calls(&[("await_agents", json!({"job_ids": "*"}))]));
    server.push(answer("ROOT ANSWER"));
    project(&world, &server);
    let run = warren(&world, &["run", "--json", "ROOT-TASK"]);
    assert!(run.status.success(), "{}", text(&run.stderr));

    let served = Served::start(&world, &["view", "last"]);
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || browse("view", &url, "web-view-journal.png", |_| {}))
        .await
        .unwrap();
    drop(served);

    let served = Served::start(&world, &["view"]);
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || browse("runs", &url, "web-view-runs.png", |_| {}))
        .await
        .unwrap();
}
