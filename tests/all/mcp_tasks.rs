//! MCP tasks (issue 33 item 5) through `warren mcp --http`, driven by the official
//! MCP Python SDK's experimental task client (mcp 1.30, pinned in
//! `tests/fixtures/mcp-python-tasks/requirements.txt`; mcp 2.x has none): a
//! `spawn_agent` run as a task, polled, fetched and cancelled; fetched again from a
//! new session after the first disconnected; hidden from other credentials; bounded.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::fake_llm::{FakeLlm, Reply};
use crate::mcp::{project, HttpServer, TOKEN};
use crate::support::{root, text, World};

/// A second credential's token.
const OTHER: &str = "other-token-0123456789abcdef";
/// Longest a client scenario may run.
const SCENARIO_LIMIT: Duration = Duration::from_secs(240);

fn answer(text: &str) -> Reply {
    Reply::answer(text, (1200, 34))
}

/// A Python with the SDK's task client, in a venv under `target/`.
fn python() -> PathBuf {
    crate::guests::python_venv(
        "tests/fixtures/mcp-python-tasks",
        "target/mcp-python-tasks",
        "the MCP task tests",
    )
}

/// Runs `scenario` (with `args`) of the task client against `server`, sending
/// `token`; its report, or its stderr when it failed.
async fn client(
    world: &World,
    server: &HttpServer,
    token: &str,
    scenario: &str,
    args: &[&str],
) -> Result<Value, String> {
    let script = root().join("tests/fixtures/mcp-python-tasks/client.py");
    let mut command = tokio::process::Command::new(python());
    command
        .arg(script)
        .arg(&server.url)
        .arg(scenario)
        .args(args)
        .env("WARREN_MCP_TOKEN", token)
        .current_dir(world.dir.path())
        .kill_on_drop(true);
    let output = tokio::time::timeout(SCENARIO_LIMIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("the {scenario} scenario took over {SCENARIO_LIMIT:?}"))
        .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    if !output.status.success() {
        return Err(format!(
            "{stdout}\n{stderr}\nserver:\n{}",
            server.stderr.lock().unwrap()
        ));
    }
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(report["server"], "warren", "{report}");
    Ok(report)
}

async fn ok(world: &World, server: &HttpServer, scenario: &str, args: &[&str]) -> Value {
    client(world, server, TOKEN, scenario, args)
        .await
        .unwrap_or_else(|error| panic!("client.py {scenario} failed:\n{error}"))
}

/// A fake model where `HELD-TASK` agents answer once the returned semaphore gets a
/// permit, and `TASK-RUN` and `PLAIN-RUN` ones at once.
async fn model() -> (FakeLlm, Arc<tokio::sync::Semaphore>) {
    let server = FakeLlm::start().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    server.route(
        "HELD-TASK",
        Reply::Gated(gate.clone(), Box::new(answer("HELD-DONE: released"))),
    );
    server.route("TASK-RUN", answer("RUN-DONE: the notes mention a fox"));
    server.route("PLAIN-RUN", answer("PLAIN-DONE: no task needed"));
    server.route(
        "AWAITED-JOB",
        Reply::Delayed(
            Duration::from_millis(300),
            Box::new(answer("AWAIT-DONE: waited for")),
        ),
    );
    server.route("BIG-TASK", answer(&"x".repeat(4000)));
    (server, gate)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_task_client_spawns_polls_and_fetches_a_result() {
    let (llm, _gate) = model().await;
    let world = project(&llm);
    let server = HttpServer::start(&world);
    let report = ok(&world, &server, "run", &[]).await;

    // A task id at once: 128 random bits.
    let id = report["created"]["id"].as_str().unwrap();
    assert_eq!(id.len(), 32, "{report}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{report}");
    assert_eq!(report["created"]["status"], "working", "{report}");
    assert_eq!(report["created"]["ttl"], 3_600_000, "{report}");
    let seen = report["seen"].as_array().unwrap();
    let last = seen.last().unwrap();
    assert_eq!(last["status"], "completed", "{report}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains("] ok · 1 turns")),
        "the last status carries the agent's progress: {report}"
    );
    // The result is a synchronous foreground spawn's, structured content included.
    let result = &report["result"];
    assert_eq!(result["error"], false, "{report}");
    let text = result["text"].as_str().unwrap();
    assert!(
        text.contains(": OK] worker · 1 turns") && text.contains("RUN-DONE"),
        "{text}"
    );
    assert!(result["structured"].is_null(), "{report}");
    assert_eq!(report["listed"], serde_json::json!([id]), "{report}");
    // The server says it runs tasks, and that spawn_agent may be one.
    assert_eq!(
        report["tasks_capability"],
        serde_json::json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{report}"
    );
    assert_eq!(
        report["task_support"],
        serde_json::json!({"spawn_agent": "optional", "await_agents": "optional", "read_file": null}),
        "{report}"
    );
    // await_agents as a task: the session's background job, awaited to its end.
    let job = report["job"].as_str().unwrap();
    assert!(
        report["background"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Started job {job} (worker) in the background")),
        "{report}"
    );
    assert_eq!(report["await_created"]["status"], "working", "{report}");
    assert_eq!(
        report["await_seen"].as_array().unwrap().last().unwrap()["status"],
        "completed",
        "{report}"
    );
    let awaited = report["awaited"]["text"].as_str().unwrap();
    assert!(
        awaited.starts_with(&format!("[{job}: OK] worker")) && awaited.contains("AWAIT-DONE"),
        "{awaited}"
    );
    assert!(!awaited.contains("Still running"), "{awaited}");
    // The same client calling without `task` gets today's answer.
    let plain = report["plain"]["text"].as_str().unwrap();
    assert!(plain.contains("PLAIN-DONE"), "{report}");
    assert_eq!(server.stop(), "", "warren mcp --http wrote to stdout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_cancels_its_agent() {
    let (llm, _gate) = model().await;
    let world = project(&llm);
    let server = HttpServer::start(&world);
    let report = ok(&world, &server, "cancel", &[]).await;
    assert_eq!(report["running"]["status"], "working", "{report}");
    assert_eq!(report["cancelled"]["status"], "cancelled", "{report}");
    assert_eq!(report["after"]["status"], "cancelled", "{report}");
    assert!(
        report["result"]
            .as_str()
            .is_some_and(|e| e.contains("was cancelled")),
        "{report}"
    );
    assert!(
        report["again"]
            .as_str()
            .is_some_and(|e| e.contains("has already ended")),
        "{report}"
    );
    // The agent ended cancelled: its run's journal says so.
    let log = server.stderr.lock().unwrap().clone();
    assert!(log.contains("MCP task ended"), "{log}");
    let agent = task_agent(&world, "HELD-TASK: to be cancelled");
    assert_eq!(agent["state"], "cancelled", "{agent:#}");
}

/// The journaled agent whose task is `task`, as `warren show --json` gives it.
fn task_agent(world: &World, task: &str) -> Value {
    let warren = |args: &[&str]| -> Value {
        let output = Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(args)
            .current_dir(world.dir.path())
            .env_remove("WARREN_CONFIG")
            .output()
            .unwrap();
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&output.stderr)))
    };
    let runs = warren(&["runs", "--json"]);
    for run in runs["runs"].as_array().unwrap() {
        let shown = warren(&["show", run["run_id"].as_str().unwrap(), "--json"]);
        if let Some(agent) = shown["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|agent| agent["task"] == task)
        {
            return agent.clone();
        }
    }
    panic!("no journaled agent with task {task}: {runs:#}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_task_survives_a_server_restart() {
    let (llm, _gate) = model().await;
    let world = project(&llm);
    std::fs::write(world.path("tokens"), format!("{TOKEN}\n{OTHER}\n")).unwrap();
    let server = HttpServer::start_with(&world, &["--token-file", "tokens"], None);
    let report = ok(&world, &server, "run", &[]).await;
    let id = report["created"]["id"].as_str().unwrap().to_string();
    drop(server);
    // Kept beside its run's journal, owner-only like the journal.
    let kept: Vec<std::path::PathBuf> = std::fs::read_dir(world.path(".warren/runs"))
        .unwrap()
        .filter_map(|run| {
            let file = run.ok()?.path().join(format!("mcp-task-{id}.json"));
            file.is_file().then_some(file)
        })
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&kept[0]).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "{}", kept[0].display());
    // A new server process on the same journal: the ended task is still there, for
    // its credential only.
    let server = HttpServer::start_with(&world, &["--token-file", "tokens"], None);
    let fetched = ok(&world, &server, "fetch", &[&id]).await;
    assert_eq!(fetched["task"]["status"], "completed", "{fetched}");
    assert_eq!(fetched["result"], report["result"], "{fetched}");
    let elsewhere = client(&world, &server, OTHER, "missing", &[&id])
        .await
        .unwrap();
    assert!(
        elsewhere["get"]
            .as_str()
            .is_some_and(|e| e.starts_with("no task")),
        "{elsewhere}"
    );
    drop(server);
    // Past its retention, it is gone.
    let server = HttpServer::start_with(
        &world,
        &["--token-file", "tokens", "--task-retention", "1"],
        None,
    );
    std::thread::sleep(Duration::from_millis(1100));
    let gone = ok(&world, &server, "missing", &[&id]).await;
    assert!(
        gone["get"]
            .as_str()
            .is_some_and(|e| e.starts_with("no task")),
        "{gone}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_outlives_its_session_for_its_credential_only() {
    let (llm, gate) = model().await;
    let world = project(&llm);
    // Two credentials: the test's token and another.
    std::fs::write(world.path("tokens"), format!("{TOKEN}\n{OTHER}\n")).unwrap();
    let server = HttpServer::start_with(&world, &["--token-file", "tokens"], None);
    // The first client starts a task, sees its agent run, and disconnects (its
    // session is deleted: a session's own agents would be cancelled now).
    let started = ok(&world, &server, "start", &[]).await;
    let id = started["created"]["id"].as_str().unwrap().to_string();
    assert_eq!(started["running"]["status"], "working", "{started}");
    // The other credential sees no such task, cannot fetch or cancel it, lists none.
    let elsewhere = client(&world, &server, OTHER, "missing", &[&id])
        .await
        .unwrap();
    for method in ["get", "result", "cancel"] {
        assert!(
            elsewhere[method]
                .as_str()
                .is_some_and(|e| e.starts_with(&format!("no task `{id}`"))),
            "{elsewhere}"
        );
    }
    assert_eq!(elsewhere["listed"], serde_json::json!([]), "{elsewhere}");
    // A new session with the same token: the agent was not cancelled, and its result
    // comes once the model answers.
    gate.add_permits(1);
    let fetched = ok(&world, &server, "fetch", &[&id]).await;
    assert_eq!(fetched["task"]["status"], "completed", "{fetched}");
    assert_eq!(fetched["result"]["error"], false, "{fetched}");
    let text = fetched["result"]["text"].as_str().unwrap();
    assert!(
        text.contains(": OK] worker") && text.contains("HELD-DONE"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_bounded_in_number_and_result_size() {
    let (llm, _gate) = model().await;
    let world = project(&llm);
    let server = HttpServer::start_with(
        &world,
        &["--max-tasks", "2", "--task-result-limit", "2048"],
        None,
    );
    let report = ok(&world, &server, "bounds", &[]).await;
    let big = report["big"]["text"].as_str().unwrap();
    assert_eq!(report["big"]["error"], true, "{report}");
    assert!(
        big.contains("over the 2048 bytes a task keeps (--task-result-limit)"),
        "{big}"
    );
    assert!(
        report["over"]
            .as_str()
            .is_some_and(|e| e.contains("holds 2 tasks, the limit (--max-tasks)")),
        "{report}"
    );
    assert!(
        report["other"].as_str().is_some_and(
            |e| e.contains("does not run as a task: only spawn_agent and await_agents do")
        ),
        "{report}"
    );
}
