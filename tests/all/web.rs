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

/// A person messages a running child from the browser: the message box sends an
/// interrupt that cuts the child's waiting model request, the receipt and the
/// child's transcript show it, and the child's next request carries it.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_interrupts_a_child_from_the_message_box_in_the_browser() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-LISTEN", "description": "listener"}),
        )]),
    );
    server.route("CHILD-LISTEN", Reply::Hang);
    server.route("PERSON-TEXT", answer("CHILD HEARD"));
    server.push(calls(&[("await_agents", json!({"job_ids": "*"}))]));
    server.push(answer("ROOT ANSWER"));
    project(&world, &server);
    let served = Served::start(
        world.dir.path(),
        &["run", "--progress", "plain", "--web", "ROOT-TASK"],
    );
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || browse("message", &url, "web-view-message.png", |_| {}))
        .await
        .unwrap();
    drop(served);
    let heard = server
        .requests()
        .into_iter()
        .filter(|r| r.body["messages"].to_string().contains("PERSON-TEXT"))
        .count();
    assert_eq!(
        heard, 1,
        "the child's next request carries the message once"
    );
    assert!(server
        .hang_dropped
        .load(std::sync::atomic::Ordering::SeqCst));
}

/// A finished run, served afterwards from its journal by `warren view`: its tree, a
/// child's transcript with the denial, no cancelling; `warren view` without a run
/// lists the runs and opens one.
#[tokio::test(flavor = "multi_thread")]
async fn a_past_run_is_served_from_its_journal() {
    let world = World::new();
    let server = FakeLlm::start().await;
    script_two_children(&server);
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

/// The root spawns a reader and a helper, awaits both and answers.
fn script_two_children(server: &FakeLlm) {
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
    script_reader(server);
    server.route("CHILD-HELP", answer("HELPED"));
    server.push(calls(&[("await_agents", json!({"job_ids": "*"}))]));
    server.push(answer("ROOT ANSWER"));
}

/// `warren run --web ADDR TASK`, the space form people type, serves the run; once it
/// has finished, its page (live, then again from its journal) stays quiet when its
/// stream ends, offers no `warren resume` (a finished run cannot be resumed), and
/// names each timeline bar beside a time axis in seconds.
#[tokio::test(flavor = "multi_thread")]
async fn a_finished_runs_page_is_quiet_offers_no_resume_and_names_its_bars() {
    let world = World::new();
    let server = FakeLlm::start().await;
    script_two_children(&server);
    project(&world, &server);
    let served = Served::start(
        world.dir.path(),
        &["run", "--web", "127.0.0.1:0", "ROOT-TASK"],
    );
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || browse("edges", &url, "web-edges-live.png", |_| {}))
        .await
        .unwrap();
    drop(served);
    let served = Served::start(world.dir.path(), &["view", "last"]);
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || browse("edges", &url, "web-edges-view.png", |_| {}))
        .await
        .unwrap();
}

/// The JSON API of a past run carries what the page shows beside each tool call and
/// the run: a plugin call's fuel and output bytes (none for a spawn tool, which runs
/// in the host), each agent's totals, and the run's budget and concurrency limit as
/// its journal recorded them.
#[tokio::test(flavor = "multi_thread")]
async fn the_api_carries_each_calls_sandbox_figures_and_the_runs_limits() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-READ", "description": "reader"}),
        )]),
    );
    script_reader(&server);
    server.push(calls(&[("await_agents", json!({"job_ids": "*"}))]));
    server.push(answer("ROOT ANSWER"));
    project(&world, &server);
    let run = warren(&world, &["run", "--json", "ROOT-TASK"]);
    assert!(run.status.success(), "{}", text(&run.stderr));

    let served = Served::start(world.dir.path(), &["view", "last"]);
    let (base, token) = served.url.split_once("?token=").unwrap();
    let http = reqwest::Client::new();
    let get = |path: String| {
        let request = http.get(format!("{base}{path}")).bearer_auth(token);
        async move {
            let response = request.send().await.unwrap();
            assert!(response.status().is_success(), "{path}: {response:?}");
            serde_json::from_str::<Value>(&response.text().await.unwrap()).unwrap()
        }
    };
    let snapshot = get("api/run".into()).await;
    assert_eq!(snapshot["run"]["budget_usd"], 5.0, "{snapshot}");
    assert_eq!(snapshot["run"]["max_concurrent"], 3, "{snapshot}");
    let agents = snapshot["agents"].as_array().unwrap();
    let reader = agents
        .iter()
        .find(|a| a["description"] == "reader")
        .unwrap();
    assert!(reader["fuel_used"].as_u64().unwrap() > 0, "{reader}");

    let records = |body: &Value| body["records"].as_array().unwrap().clone();
    let transcript = get(format!(
        "api/agents/{}/transcript",
        reader["id"].as_str().unwrap()
    ))
    .await;
    let results: Vec<Value> = records(&transcript)
        .into_iter()
        .filter(|r| r["type"] == "tool_finished")
        .collect();
    // read_file, then the denied write_file: both ran in the sandbox.
    assert_eq!(results.len(), 2, "{transcript}");
    let mut fuel = 0;
    for result in &results {
        let used = result["fuel_used"]
            .as_u64()
            .unwrap_or_else(|| panic!("{result}"));
        assert!(used > 0, "{result}");
        fuel += used;
        assert_eq!(
            result["output_bytes"].as_u64().unwrap(),
            result["content"].as_str().unwrap().len() as u64
        );
    }
    assert_eq!(reader["fuel_used"].as_u64().unwrap(), fuel, "{reader}");

    let root = agents[0]["id"].as_str().unwrap();
    let transcript = get(format!("api/agents/{root}/transcript")).await;
    let spawned = records(&transcript)
        .into_iter()
        .find(|r| r["type"] == "tool_finished")
        .unwrap();
    assert!(spawned.get("fuel_used").is_none(), "{spawned}");
    assert!(spawned["output_bytes"].as_u64().unwrap() > 0, "{spawned}");
}

/// A finished run of 1,201 agents (more than the tree draws at once) served by
/// `warren view`: only the rows in view are in the page, the keyboard reaches and
/// selects the last agent, and scrolling draws the rows that come into view. The
/// times to the first row and to the last agent selected are printed.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_runs_tree_draws_only_the_rows_in_view() {
    use std::fmt::Write as _;
    let world = World::new();
    let mut script = String::new();
    // Five turns of 240 spawns (a reply runs at most 256 calls).
    for turn in 0..5 {
        script.push_str("[[turns]]\nprofile = \"main\"\ntool_calls = [\n");
        for i in turn * 240..(turn + 1) * 240 {
            let _ = writeln!(
                script,
                "  {{ name = \"spawn_agent\", arguments = {{ profile = \"worker\", task = \"CHILD {i}\" }} }},"
            );
        }
        script.push_str("]\n\n");
    }
    script.push_str("[[turns]]\nprofile = \"main\"\ntool_calls = [{ name = \"await_agents\", arguments = { job_ids = \"*\" } }]\n\n");
    script.push_str("[[turns]]\nprofile = \"main\"\ntext = \"all done\"\n\n");
    for _ in 0..1200 {
        script.push_str("[[turns]]\nprofile = \"worker\"\nwhen = \"CHILD\"\ntext = \"done\"\n\n");
    }
    std::fs::write(world.path("script.toml"), script).unwrap();
    world.config(
        "[models.fake]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
         [defaults]\nmax_concurrent = 200\nmax_concurrent_total = 200\nmax_turns = 10\n\n\
         [profiles.main]\ntools = []\n\n[profiles.worker]\ntools = []\n",
    );
    let run = warren(&world, &["run", "--progress", "none", "go"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout).trim(), "all done");
    // Every child ended ok, and stays so in the journal after the process exited
    // (children resting for follow-ups were recorded again as errors at its exit).
    let shown = warren(&world, &["show", "last"]);
    assert!(
        !text(&shown.stdout).contains('✗'),
        "{}",
        text(&shown.stdout)
    );
    let served = Served::start(world.dir.path(), &["view", "last"]);
    let url = served.url.clone();
    let figures = Arc::new(std::sync::Mutex::new(String::new()));
    let printed = figures.clone();
    tokio::task::spawn_blocking(move || {
        browse("large", &url, "web-view-large.png", |line| {
            if line.starts_with('{') {
                *printed.lock().unwrap() = line.to_string();
            }
        })
    })
    .await
    .unwrap();
    let figures: Value = serde_json::from_str(&figures.lock().unwrap()).unwrap();
    assert_eq!(figures["agents"], 1201, "{figures}");
    println!("the web view of 1,201 agents: {figures}");
}
