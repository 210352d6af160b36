//! The web view in a real browser: Playwright for Python (pinned in
//! `tests/fixtures/web-python/requirements.txt`, in a venv under `target/`) driving
//! Debian's `chromium` headless (`scripts/install-deps` installs it; Playwright never
//! downloads a browser). The run is scripted on the fake model; the browser script
//! (`tests/fixtures/web-python/browser.py`) does the clicking and checks what the
//! page shows, this file checks what warren recorded.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::browser::{browse, Served};
use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{text, warren, World};

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
        world.dir.path(),
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

    let served = Served::start(world.dir.path(), &["view", "last"]);
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || browse("view", &url, "web-view-journal.png", |_| {}))
        .await
        .unwrap();
    drop(served);

    let served = Served::start(world.dir.path(), &["view"]);
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || browse("runs", &url, "web-view-runs.png", |_| {}))
        .await
        .unwrap();
}
