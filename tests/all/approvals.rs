//! A person in the loop, through the `warren` binary against the fake
//! OpenAI-compatible server: a call a profile's `approval` rule names waits without its
//! slot (a queued sibling starts meanwhile) until `warren approve` from another
//! terminal lets it run once, or denies it with a reason the model sees; a deadline
//! denies; a run nobody watches denies at once, saying so; `ask_person`'s answer
//! reaches the asking agent; a SIGKILL while a request waits and `warren resume`
//! show the same request waiting, and the approved write happens once.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_llm::{model_table, newest, FakeLlm, Reply};
use crate::support::{text, World};

/// The fake model; a root `main` that spawns, one slot for sub-agents, a `writer`
/// whose `write_file` calls need approval (deadline `timeout_s`), a `sibling` and an
/// `asker` that may ask a person.
fn config(world: &World, server: &FakeLlm, timeout_s: u64) {
    world.config(&format!(
        r#"{}
[defaults]
max_concurrent = 1

[profiles.main]
description = "Coordinator"
system_prompt = "You coordinate."
model = "fake"
tools = []
[profiles.main.capabilities]
fs = [{{ host = "out", guest = "/out", mode = "rw" }}]

[profiles.writer]
description = "Writes a file"
tools = ["write_file"]
approval = ["write_file"]
approval_timeout_s = {timeout_s}
[profiles.writer.capabilities]
fs = [{{ host = "out", guest = "/out", mode = "rw" }}]

[profiles.sibling]
description = "Answers"
tools = []

[profiles.asker]
description = "Asks a person"
tools = ["ask_person"]
"#,
        model_table(&server.base_url)
    ));
}

fn calls(list: &[(&str, Value)]) -> Reply {
    Reply::tool_calls(list, (10, 5))
}

/// Spawns `profile` on `task` and waits for its answer (a foreground spawn).
fn spawn_and_wait(profile: &str, task: &str) -> Reply {
    let args = json!({"profile": profile, "task": task, "background": false});
    calls(&[("spawn_agent", args)])
}

/// Spawns each `(profile, task)` in the background.
fn spawns(list: &[(&str, &str)]) -> Reply {
    let spawns: Vec<(&str, Value)> = list
        .iter()
        .map(|(profile, task)| ("spawn_agent", json!({"profile": profile, "task": task})))
        .collect();
    calls(&spawns)
}

/// The root spawns the writer, then the sibling (queued behind it: one slot), and
/// waits for both; the writer writes `/out/a.txt` and reports what its call returned;
/// the sibling answers.
fn script(server: &FakeLlm) {
    server.route(
        "ROOT-TASK",
        spawns(&[("writer", "WRITE-TASK"), ("sibling", "SIBLING-TASK")]),
    );
    server.route(
        "WRITE-TASK",
        calls(&[(
            "write_file",
            json!({"path": "/out/a.txt", "content": "APPROVED-CONTENT"}),
        )]),
    );
    server.route("SIBLING-TASK", Reply::answer("SIBLING-DONE", (10, 5)));
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("Queued job") {
            return Some(calls(&[("await_agents", json!({"job_ids": "*"}))]));
        }
        if newest.contains("SIBLING-DONE") || newest.contains("WRITER-SAID") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        // The writer's turn after its call: it repeats what the call returned.
        if body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| !s.contains("You coordinate"))
            && newest.contains("\"role\":\"tool\"")
        {
            let said = newest.replace('"', "'");
            return Some(Reply::answer(&format!("WRITER-SAID {said}"), (10, 5)));
        }
        None
    }));
}

/// A project with [`config`] (deadline `timeout_s`) and its model playing [`script`].
async fn scripted(timeout_s: u64) -> (World, FakeLlm) {
    let (world, server) = project(timeout_s).await;
    script(&server);
    (world, server)
}

/// A project with [`config`] (deadline `timeout_s`) and its model, not yet scripted.
async fn project(timeout_s: u64) -> (World, FakeLlm) {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server, timeout_s);
    (world, server)
}

/// Asserts that `output` is a success; its stdout.
fn succeeded(output: &std::process::Output) -> String {
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

/// `warren ARGS` started in `world`, stdin closed, with its events in `events.jsonl`.
fn spawn_run(world: &World, args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(args)
        .arg("--events")
        .arg(world.path(&format!("events-{}.jsonl", args[0])))
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// `warren approve ARGS`, as from another terminal.
fn approve(world: &World, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .arg("approve")
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The one run in `world`'s journal directory, once there is one.
pub(crate) async fn only_run(world: &World) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let runs: Vec<String> = std::fs::read_dir(world.path(".warren/runs"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|entry| entry.path().is_dir())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        if let [run] = runs.as_slice() {
            return run.clone();
        }
        assert!(Instant::now() < deadline, "no run journaled: {runs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The requests `warren approve RUN --json` lists, once at least one waits.
pub(crate) async fn pending(world: &World, run: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = approve(world, &[run, "--json"]);
        if listed.status.success() {
            let requests: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap_or_default();
            if !requests.is_empty() {
                return requests;
            }
        }
        assert!(
            Instant::now() < deadline,
            "nothing waited: {}",
            text(&listed.stderr)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for `child` to end; its output.
async fn ended(child: tokio::process::Child) -> std::process::Output {
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the run ended")
        .unwrap()
}

/// The requests whose newest message contains `marker`.
fn saw(server: &FakeLlm, marker: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| newest(&r.body).contains(marker))
        .count()
}

#[tokio::test]
async fn a_write_waits_without_its_slot_until_warren_approve_lets_it_run_once() {
    let (world, server) = scripted(120).await;
    let run = spawn_run(
        &world,
        &[
            "run",
            "--approve",
            "ask",
            "--progress",
            "plain",
            "ROOT-TASK",
        ],
    );
    let id = only_run(&world).await;
    let requests = pending(&world, &id).await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    let request = &requests[0];
    assert_eq!(request["tool"], "write_file");
    assert_eq!(request["kind"], "approval");
    // Its exact arguments, what it could touch, and why it was asked.
    let arguments: Value = serde_json::from_str(request["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["content"], "APPROVED-CONTENT");
    assert!(
        request["touches"]
            .to_string()
            .contains("read and write /out"),
        "{request}"
    );
    assert_eq!(request["rule"], json!(["write_file"]));
    // While it waits, nothing is written, and the sibling queued behind the writer
    // (one slot) starts: the waiting writer gave its slot back.
    let deadline = Instant::now() + Duration::from_secs(30);
    while saw(&server, "SIBLING-TASK") == 0 {
        assert!(
            Instant::now() < deadline,
            "the queued sibling never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!world.path("out/a.txt").exists());
    // The human listing says what is asked and how long it waits.
    let listed = text(&approve(&world, &[&id]).stdout);
    assert!(
        listed.contains("wants to call write_file") && listed.contains("denied in"),
        "{listed}"
    );
    // A forged approval by id from nowhere, or a wrong kind of answer, changes nothing.
    let wrong = approve(&world, &[&id, "q00000000"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        text(&wrong.stderr).contains("no request `q00000000` waits"),
        "{}",
        text(&wrong.stderr)
    );
    let request_id = request["id"].as_str().unwrap();
    let answered = approve(&world, &[&id, request_id, "--from", "tester"]);
    succeeded(&answered);
    assert!(
        text(&answered.stdout).contains("approved once"),
        "{}",
        text(&answered.stdout)
    );
    let output = ended(run).await;
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE", "{stderr}");
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "APPROVED-CONTENT"
    );
    // The wait is in the events and the plain lines; the write ran once.
    let events = std::fs::read_to_string(world.path("events-run.jsonl")).unwrap();
    let kinds: Vec<Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of = |kind: &str| kinds.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(of("input_requested"), 1, "{events}");
    let answer = kinds
        .iter()
        .find(|e| e["type"] == "input_answered")
        .unwrap();
    assert_eq!(answer["verdict"], "approve");
    assert_eq!(answer["by"], "cli:tester");
    let writes = kinds
        .iter()
        .filter(|e| e["type"] == "tool_call_finished" && e["tool"] == "write_file")
        .count();
    assert_eq!(writes, 1, "{events}");
    assert!(stderr.contains("awaiting_approval write_file"), "{stderr}");
    // `warren show` names it, and the journal holds who answered.
    let journal =
        std::fs::read_to_string(world.path(&format!(".warren/runs/{id}/journal.jsonl"))).unwrap();
    assert!(journal.contains("\"type\":\"input_answered\"") && journal.contains("cli:tester"));
    // A replay serves the recorded answer: the same run again, nobody asked.
    let replayed = crate::support::warren(&world, &["replay", "last"]);
    succeeded(&replayed);
}

#[tokio::test]
async fn a_denial_reason_reaches_the_model_and_nothing_is_written() {
    let (world, server) = scripted(120).await;
    let run = spawn_run(&world, &["run", "--approve", "ask", "ROOT-TASK"]);
    let id = only_run(&world).await;
    let request = pending(&world, &id).await.remove(0);
    let denied = approve(
        &world,
        &[
            &id,
            request["id"].as_str().unwrap(),
            "--deny",
            "NOT-THIS-FILE",
            "--from",
            "tester",
        ],
    );
    succeeded(&denied);
    let output = ended(run).await;
    succeeded(&output);
    assert!(!world.path("out/a.txt").exists());
    assert!(saw(&server, "denied by a person (cli:tester): NOT-THIS-FILE") >= 1);
}

#[tokio::test]
async fn a_deadline_denies_and_a_run_nobody_watches_denies_at_once() {
    let (world, server) = scripted(1).await;
    let output = ended(spawn_run(&world, &["run", "--approve", "ask", "ROOT-TASK"])).await;
    succeeded(&output);
    assert!(!world.path("out/a.txt").exists());
    assert!(
        saw(
            &server,
            "nobody answered within 1 s (approval_timeout_s of profile `writer`)"
        ) >= 1
    );

    // No --approve and no terminal: denied at once, the model told how to change it.
    let (world, server) = scripted(120).await;
    let started = Instant::now();
    let output = ended(spawn_run(&world, &["run", "ROOT-TASK"])).await;
    succeeded(&output);
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(!world.path("out/a.txt").exists());
    assert!(saw(&server, "this run denies every request at once") >= 1);
}

#[tokio::test]
async fn a_question_is_answered_from_another_terminal() {
    let (world, server) = project(120).await;
    server.route("ROOT-TASK", spawn_and_wait("asker", "ASK-TASK"));
    server.route(
        "ASK-TASK",
        calls(&[(
            "ask_person",
            json!({"question": "Which colour?", "choices": ["red", "blue"]}),
        )]),
    );
    server.route("PERSON-SAID-BLUE", Reply::answer("ASKER-DONE", (10, 5)));
    server.route("ASKER-DONE", Reply::answer("ROOT-DONE", (10, 5)));
    let run = spawn_run(&world, &["run", "--approve", "ask", "ROOT-TASK"]);
    let id = only_run(&world).await;
    let request = pending(&world, &id).await.remove(0);
    assert_eq!(request["kind"], "question");
    assert_eq!(request["question"], "Which colour? (choices: red / blue)");
    let request_id = request["id"].as_str().unwrap();
    // An approval is not an answer.
    let wrong = approve(&world, &[&id, request_id]);
    assert!(
        text(&wrong.stderr).contains("is a question"),
        "{}",
        text(&wrong.stderr)
    );
    let answered = approve(&world, &[&id, request_id, "--answer", "PERSON-SAID-BLUE"]);
    succeeded(&answered);
    let output = ended(run).await;
    succeeded(&output);
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE");
    assert!(saw(&server, "answered: PERSON-SAID-BLUE") >= 1);
}

#[tokio::test]
async fn a_request_waiting_at_a_sigkill_waits_again_after_resume_and_the_write_happens_once() {
    let (world, server) = scripted(120).await;
    let mut run = spawn_run(&world, &["run", "--approve", "ask", "ROOT-TASK"]);
    let id = only_run(&world).await;
    let before = pending(&world, &id).await;
    // The sibling (which ran while the writer waited) is done and on disk first.
    let journal = world.path(&format!(".warren/runs/{id}/journal.jsonl"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&journal)
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("\"type\":\"agent_finished\"") && l.contains("SIBLING-DONE"))
    {
        assert!(Instant::now() < deadline, "the sibling never finished");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SIGKILL: nothing of the process is left to finish.
    run.start_kill().unwrap();
    let _ = run.wait().await;
    assert!(!world.path("out/a.txt").exists());
    // `warren show` tells where the dead run's writer stood.
    let shown = text(&crate::support::warren(&world, &["show", &id]).stdout);
    assert!(
        shown
            .lines()
            .any(|l| l.contains("writer") && l.contains("awaiting_approval")),
        "{shown}"
    );
    let asked = saw(&server, "WRITE-TASK");
    let resumed = spawn_run(&world, &["resume", &id, "--approve", "ask"]);
    let after = pending(&world, &id).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0]["id"], before[0]["id"]);
    assert_eq!(after[0]["arguments"], before[0]["arguments"]);
    // Not asked of the model again: its recorded call is what waits.
    assert_eq!(saw(&server, "WRITE-TASK"), asked);
    let answered = approve(&world, &[&id, after[0]["id"].as_str().unwrap()]);
    succeeded(&answered);
    let output = ended(resumed).await;
    succeeded(&output);
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "APPROVED-CONTENT"
    );
    let journal =
        std::fs::read_to_string(world.path(&format!(".warren/runs/{id}/journal.jsonl"))).unwrap();
    let started = journal
        .lines()
        .filter(|l| l.contains("\"type\":\"tool_started\"") && l.contains("write_file"))
        .count();
    assert_eq!(started, 1, "the write ran once:\n{journal}");
}

/// The official MCP Python SDK as the client of `warren mcp`: its agent's call that
/// needs approval is asked of the client as a form (elicitation), and the client's
/// approval lets it run once.
#[tokio::test]
async fn an_mcp_client_approves_through_elicitation() {
    let (world, server) = project(120).await;
    // The SDK passes the server a minimal environment: a model with no key variable.
    let path = world.path("warren.toml");
    let toml = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        toml.replace("api_key_env = \"CARGO_PKG_NAME\"\n", ""),
    )
    .unwrap();
    script(&server);
    let report = crate::mcp::client(&world, None, "approval").await;
    let elicited = report["elicited"].as_array().unwrap();
    assert_eq!(elicited.len(), 1, "{report}");
    let message = elicited[0]["message"].as_str().unwrap();
    assert!(
        message.contains("wants to call write_file") && message.contains("APPROVED-CONTENT"),
        "{message}"
    );
    assert!(
        report["result"].as_str().unwrap().contains("WRITER-SAID"),
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "APPROVED-CONTENT"
    );
    let journal = std::fs::read_to_string(
        std::fs::read_dir(world.path(".warren/runs"))
            .unwrap()
            .find_map(|e| Some(e.ok()?.path().join("journal.jsonl")))
            .unwrap(),
    )
    .unwrap();
    assert!(journal.contains("\"by\":\"mcp\""), "{journal}");
}

/// The same request approved in Chromium: the web view's card shows it and its
/// Approve button (behind the page's token) lets the write run once.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_approves_from_the_web_view_in_a_browser() {
    let (world, _server) = scripted(120).await;
    let served = crate::browser::Served::start(
        world.dir.path(),
        &["run", "--progress", "plain", "--web", "ROOT-TASK"],
    );
    let url = served.url.clone();
    tokio::task::spawn_blocking(move || {
        crate::browser::browse("approval", &url, "web-view-approval.png", |_| {})
    })
    .await
    .unwrap();
    let stderr = served.stderr.lock().unwrap().clone();
    drop(served);
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "APPROVED-CONTENT",
        "{stderr}"
    );
}

/// In a real terminal (tmux) with no `--approve`: the live tree shows the writer
/// waiting, the prompt under it asks, `y` approves, and the tree goes on to its end.
#[tokio::test(flavor = "multi_thread")]
async fn in_tmux_the_terminal_prompts_and_y_approves() {
    let (world, _server) = scripted(120).await;
    let command = format!(
        "cd {} && env -u WARREN_CONFIG RUST_LOG=warn {} run --progress tty ROOT-TASK; sleep 60",
        world.dir.path().display(),
        env!("CARGO_BIN_EXE_warren"),
    );
    let tmux = crate::support::Tmux::start("warren-test-approve", &command, (200, 40));
    let screen_with = |wanted: &str| tmux.screen_with(wanted);
    screen_with("y approve · a always");
    // The tree goes on under the prompt: the writer's wait shows once its event is in.
    let asking = screen_with("awaiting_approval write_file");
    // The tree is there, the writer's line says what it waits on, the prompt below.
    assert!(
        asking
            .lines()
            .any(|l| l.contains("writer") && l.contains("awaiting_approval write_file")),
        "{asking}"
    );
    assert!(asking.contains("wants to call write_file"), "{asking}");
    assert!(!world.path("out/a.txt").exists());
    tmux.keys(&["y", "Enter"]);
    let done = screen_with("total cost");
    drop(tmux);
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "APPROVED-CONTENT",
        "{done}"
    );
    // The final tree drew over the prompt: each agent once, the prompt gone.
    assert_eq!(done.matches("sibling ✓ ok").count(), 1, "{done}");
    assert!(!done.contains("y approve · a always"), "{done}");
}

/// A rule entry that is neither a tool nor an effect stops the configuration, naming
/// the file, the line (the key shown) and the entry.
#[test]
fn a_bad_approval_entry_is_refused_at_its_key() {
    let world = World::new();
    world.config("[profiles.main]\napproval = [\"write_file\", \"@writes-all\"]\n");
    let output = crate::support::warren(&world, &["tools"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("warren.toml")
            && stderr.contains("line 6")
            && stderr.contains("approval = [")
            && stderr.contains("`@writes-all` is not an effect"),
        "{stderr}"
    );
}

/// An agent file's `permissionMode: default` asks before writes, as Claude Code
/// does: its write waits for a person (here, nobody: denied at once, the file
/// untouched); `bypassPermissions` asks nothing and widens nothing.
#[tokio::test]
async fn an_agent_files_permission_mode_is_its_approval_rule() {
    let (world, server) = project(120).await;
    std::fs::create_dir_all(world.path(".claude/agents")).unwrap();
    std::fs::write(
        world.path(".claude/agents/careful.md"),
        "---\nname: careful\ndescription: Writes carefully\ntools: Write\npermissionMode: default\n---\nWrite.\n",
    )
    .unwrap();
    let toml = std::fs::read_to_string(world.path("warren.toml")).unwrap();
    std::fs::write(
        world.path("warren.toml"),
        format!("{toml}\n[defaults.capabilities]\nfs = [{{ host = \"out\", guest = \"/out\", mode = \"rw\" }}]\n"),
    )
    .unwrap();
    server.route("ROOT-TASK", spawn_and_wait("careful", "CAREFUL-TASK"));
    server.route(
        "CAREFUL-TASK",
        calls(&[(
            "write_file",
            json!({"path": "/out/a.txt", "content": "UNASKED"}),
        )]),
    );
    server.route(
        "this run denies every request",
        Reply::answer("CAREFUL-DONE", (10, 5)),
    );
    server.route("CAREFUL-DONE", Reply::answer("ROOT-DONE", (10, 5)));
    let output = ended(spawn_run(&world, &["run", "ROOT-TASK"])).await;
    succeeded(&output);
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE");
    assert!(!world.path("out/a.txt").exists());
    let listed = text(&crate::support::warren(&world, &["agents"]).stdout);
    assert!(
        !listed.contains("permissionMode: default"),
        "an honoured mode is not listed as ignored: {listed}"
    );
}

/// A child running on a worker (real Redis, a `warren worker` process) whose write
/// needs approval: its request reaches the parent's run, `warren approve` there lists
/// and approves it, the answer reaches the worker, and the write happens once.
#[tokio::test(flavor = "multi_thread")]
async fn a_child_on_a_worker_is_approved_from_the_parents_run() {
    let (world, _server) = scripted(120).await;
    let redis = crate::queue::Redis::start();
    let worker = crate::queue::Worker::start(world.dir.path(), &redis, "w1", 2);
    let url = redis.url();
    let run = spawn_run(
        &world,
        &[
            "run",
            "--approve",
            "ask",
            "--run-id",
            "remote-ask",
            "--redis",
            &url,
            "ROOT-TASK",
        ],
    );
    let requests = pending(&world, "remote-ask").await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["tool"], "write_file");
    assert!(requests[0]["arguments"]
        .as_str()
        .unwrap()
        .contains("APPROVED-CONTENT"));
    assert!(!world.path("out/a.txt").exists());
    let id = requests[0]["id"].as_str().unwrap();
    succeeded(&approve(&world, &["remote-ask", id, "--from", "tester"]));
    let output = ended(run).await;
    assert_eq!(
        succeeded(&output).trim(),
        "ROOT-DONE",
        "{}",
        worker.output()
    );
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "APPROVED-CONTENT"
    );
    assert!(
        worker
            .output()
            .contains("a person's answer from the parent's run"),
        "{}",
        worker.output()
    );
}

/// `--always` approves the tool for the rest of the run: the writer's second write
/// runs without asking anyone.
#[tokio::test]
async fn approving_the_tool_lets_its_later_calls_run_unasked() {
    let (world, server) = project(120).await;
    server.route("ROOT-TASK", spawn_and_wait("writer", "WRITE-TWICE"));
    server.route(
        "WRITE-TWICE",
        calls(&[(
            "write_file",
            json!({"path": "/out/a.txt", "content": "FIRST"}),
        )]),
    );
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("WRITER-DONE") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        if !newest.contains("\"role\":\"tool\"") {
            return None;
        }
        let writes = body.to_string().matches("write_file").count();
        Some(match body["messages"].as_array()?.len() {
            // After the first write's result: the second write.
            n if n <= 4 && writes > 0 => calls(&[(
                "write_file",
                json!({"path": "/out/b.txt", "content": "SECOND"}),
            )]),
            _ => Reply::answer("WRITER-DONE", (10, 5)),
        })
    }));
    let run = spawn_run(&world, &["run", "--approve", "ask", "ROOT-TASK"]);
    let id = only_run(&world).await;
    let request = pending(&world, &id).await.remove(0);
    succeeded(&approve(
        &world,
        &[&id, request["id"].as_str().unwrap(), "--always"],
    ));
    let output = ended(run).await;
    assert_eq!(succeeded(&output).trim(), "ROOT-DONE");
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "FIRST"
    );
    assert_eq!(
        std::fs::read_to_string(world.path("out/b.txt")).unwrap(),
        "SECOND"
    );
    let events = std::fs::read_to_string(world.path("events-run.jsonl")).unwrap();
    assert_eq!(
        events.matches("\"type\":\"input_requested\"").count(),
        1,
        "{events}"
    );
    assert!(events.contains("\"verdict\":\"approve_tool\""), "{events}");
}

/// `[defaults] max_pending_requests` holds: with one allowed, a second agent's
/// question while the first waits is refused at once, naming the key, and the first
/// is still answered.
#[tokio::test]
async fn a_request_past_the_pending_bound_is_refused_naming_the_key() {
    let (world, server) = project(120).await;
    let path = world.path("warren.toml");
    let toml = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        toml.replace(
            "max_concurrent = 1\n",
            "max_concurrent = 1\nmax_pending_requests = 1\n",
        ),
    )
    .unwrap();
    server.route(
        "ROOT-TASK",
        spawns(&[("asker", "ASK-ONE"), ("asker", "ASK-TWO")]),
    );
    server.route(
        "ASK-ONE",
        calls(&[("ask_person", json!({"question": "FIRST?"}))]),
    );
    server.route(
        "ASK-TWO",
        calls(&[("ask_person", json!({"question": "SECOND?"}))]),
    );
    server.route(
        "max_pending_requests",
        Reply::answer("TWO-REFUSED", (10, 5)),
    );
    server.route("answered: ONE-ANSWER", Reply::answer("ONE-DONE", (10, 5)));
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("Queued job") {
            return Some(calls(&[("await_agents", json!({"job_ids": "*"}))]));
        }
        (newest.contains("ONE-DONE") && newest.contains("TWO-REFUSED"))
            .then(|| Reply::answer("ROOT-DONE", (10, 5)))
    }));
    let run = spawn_run(&world, &["run", "--approve", "ask", "ROOT-TASK"]);
    let id = only_run(&world).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while saw(&server, "max_pending_requests") == 0 {
        assert!(
            Instant::now() < deadline,
            "the second question was never refused"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waiting = pending(&world, &id).await;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0]["question"], "FIRST?");
    let answered = approve(
        &world,
        &[
            &id,
            waiting[0]["id"].as_str().unwrap(),
            "--answer",
            "ONE-ANSWER",
        ],
    );
    succeeded(&answered);
    assert_eq!(succeeded(&ended(run).await).trim(), "ROOT-DONE");
}

/// `ask_person` bounds what it puts before a person: a question over 4 KiB, choices
/// that make it so, and a 17th choice are each refused to the model, naming the
/// argument, and no request is ever opened (the run needs no answer to end).
#[tokio::test]
async fn an_over_long_question_or_too_many_choices_is_refused_before_anyone_is_asked() {
    let (world, server) = project(120).await;
    server.route("ROOT-TASK", spawn_and_wait("asker", "ASK-TASK"));
    server.route(
        "ASK-TASK",
        calls(&[("ask_person", json!({"question": "Q".repeat(5000)}))]),
    );
    let long_choices =
        json!({"question": "Short?", "choices": ["c".repeat(3000), "d".repeat(3000)]});
    server.route("in all", calls(&[("ask_person", long_choices)]));
    let many: Vec<String> = (0..17).map(|i| format!("choice {i}")).collect();
    server.route(
        "in all",
        calls(&[("ask_person", json!({"question": "Which?", "choices": many}))]),
    );
    server.route("at most 16", Reply::answer("ASKER-DONE", (10, 5)));
    server.route("ASKER-DONE", Reply::answer("ROOT-DONE", (10, 5)));
    let run = spawn_run(&world, &["run", "--approve", "ask", "ROOT-TASK"]);
    let output = ended(run).await;
    assert_eq!(succeeded(&output).trim(), "ROOT-DONE");
    assert_eq!(saw(&server, "are 5000 bytes; at most 4096 in all"), 1);
    let composed = "Short? (choices: ".len() + 3000 + " / ".len() + 3000 + ")".len();
    assert_eq!(
        saw(&server, &format!("are {composed} bytes; at most 4096")),
        1
    );
    assert_eq!(saw(&server, "`choices` has 17 items; at most 16"), 1);
    let events = std::fs::read_to_string(world.path("events-run.jsonl")).unwrap();
    assert!(!events.contains("input_requested"), "a request was opened");
}

/// Approvals are a run's own: with two runs of one project waiting on the same kind
/// of call, approving the tool for the rest of one run lets that run write, and the
/// other's request still waits until it is answered there (here denied: nothing
/// written).
#[tokio::test]
async fn an_approval_in_one_run_never_reaches_another() {
    let (world, server) = project(120).await;
    for (root, write, file) in [("ROOT-A", "WRITE-A", "a"), ("ROOT-B", "WRITE-B", "b")] {
        server.route(root, spawn_and_wait("writer", write));
        let args = json!({"path": format!("/out/{file}.txt"), "content": write});
        server.route(write, calls(&[("write_file", args)]));
    }
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("WRITER-DONE") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        newest
            .contains("\"role\":\"tool\"")
            .then(|| Reply::answer("WRITER-DONE", (10, 5)))
    }));
    let run_a = spawn_run(&world, &["run", "--approve", "ask", "ROOT-A"]);
    let a = only_run(&world).await;
    let request_a = pending(&world, &a).await.remove(0);
    let run_b = spawn_run(&world, &["run", "--approve", "ask", "ROOT-B"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let b = loop {
        let other = std::fs::read_dir(world.path(".warren/runs"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .find(|name| *name != a && world.path(&format!(".warren/runs/{name}")).is_dir());
        if let Some(b) = other {
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "the second run was never journaled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let request_b = pending(&world, &b).await.remove(0);
    let id_a = request_a["id"].as_str().unwrap();
    succeeded(&approve(&world, &[&a, id_a, "--always"]));
    assert_eq!(succeeded(&ended(run_a).await).trim(), "ROOT-DONE");
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "WRITE-A"
    );
    // Run B's request is untouched by run A's answers.
    let still = pending(&world, &b).await;
    assert_eq!(still.len(), 1, "{still:?}");
    assert_eq!(still[0]["id"], request_b["id"]);
    assert!(!world.path("out/b.txt").exists());
    let id_b = request_b["id"].as_str().unwrap();
    succeeded(&approve(&world, &[&b, id_b, "--deny", "NOT-IN-B"]));
    assert_eq!(succeeded(&ended(run_b).await).trim(), "ROOT-DONE");
    assert!(!world.path("out/b.txt").exists());
    assert_eq!(saw(&server, "NOT-IN-B"), 1);
}
