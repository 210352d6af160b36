//! Messages to running sub-agents (`message_agent`), through the `warren` binary
//! against the fake OpenAI-compatible server: a queued message reaches a running
//! child's next request and its sender is told; an interrupt cuts a child's model
//! request at once; a follow-up resumes a finished child with its history and its own
//! model; messages that cannot be delivered are rejected with the reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_llm::{newest, FakeLlm, Recorded, Reply};
use crate::support::{text, World};

/// The fake model, a root `main` and a `worker` that may list `/docs`; messages of
/// at most 8 KiB.
fn config(world: &World, server: &FakeLlm) {
    world.config(&format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{}"
model = "fake-model"
api_key_env = "CARGO_PKG_NAME"
stream = false
max_retries = 0

[defaults]
max_message_kb = 8

[profiles.main]
description = "Coordinator"
system_prompt = "You coordinate."
model = "fake"
tools = []

[profiles.worker]
description = "Does one thing"
system_prompt = "You are a worker."
tools = ["list_dir"]
[profiles.worker.capabilities]
fs = [{{ host = ".", guest = "/docs", mode = "ro" }}]
"#,
        server.base_url
    ));
}

/// The id in the newest "Started job ID" of `body`'s messages.
fn started_job(body: &Value) -> Option<String> {
    body["messages"]
        .as_array()?
        .iter()
        .rev()
        .filter_map(|m| m["content"].as_str())
        .find_map(|text| {
            let rest = text.split("Started job ").nth(1)?;
            Some(rest.split_whitespace().next()?.to_string())
        })
}

fn calls(list: &[(&str, Value)]) -> Reply {
    Reply::tool_calls(list, (10, 5))
}

/// Runs `warren run TASK` with its events written, and waits for `ready` (given the
/// requests so far) to open `gate` once.
async fn run_until(
    world: &World,
    server: &FakeLlm,
    task: &str,
    gate: Option<(&Arc<tokio::sync::Semaphore>, &str)>,
) -> (std::process::Output, Vec<Value>) {
    let events = world.path("events.jsonl");
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "--progress", "plain", "--events"])
        .arg(&events)
        .arg(task)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some((gate, ready)) = gate {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !server
            .requests()
            .iter()
            .any(|r| newest(&r.body).contains(ready))
        {
            assert!(Instant::now() < deadline, "no request showed {ready:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gate.add_permits(1);
    }
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the run ended")
        .unwrap();
    let events = std::fs::read_to_string(&events)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect();
    (output, events)
}

/// `warren replay last` finds the run the same: each message served where the
/// recording read it, each receipt as recorded, a turn an interrupt cut skipped.
fn replays_the_same(world: &World) {
    let replayed = crate::support::warren(world, &["replay", "last"]);
    let (stdout, stderr) = (text(&replayed.stdout), text(&replayed.stderr));
    assert!(replayed.status.success(), "{stdout}\n{stderr}");
}

/// The requests whose newest message contains `marker`.
fn requests_with(server: &FakeLlm, marker: &str) -> Vec<Recorded> {
    server
        .requests()
        .into_iter()
        .filter(|r| newest(&r.body).contains(marker))
        .collect()
}

#[tokio::test]
async fn a_queued_message_reaches_a_running_childs_next_request_and_its_sender_is_told() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-TASK"}),
        )]),
    );
    // The child's first turn waits until its parent's message is in its mailbox.
    server.route(
        "CHILD-TASK",
        Reply::Gated(
            gate.clone(),
            Box::new(calls(&[("list_dir", json!({"path": "/docs"}))])),
        ),
    );
    server.route("STEER-TEXT", Reply::answer("CHILD-SAW-STEER", (10, 5)));
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("Started job") {
            let id = started_job(body)?;
            let message = json!({"job_id": id, "message": "STEER-TEXT: look only at /docs"});
            return Some(calls(&[("message_agent", message)]));
        }
        if newest.contains("is queued") {
            return Some(calls(&[("await_agents", json!({"job_ids": "*"}))]));
        }
        if newest.contains("was delivered") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        None
    }));
    let (output, events) =
        run_until(&world, &server, "ROOT-TASK", Some((&gate, "is queued"))).await;
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE", "{stderr}");
    // The child's second request carries the message, marked as one, after its tool
    // result: read at its turn boundary.
    let steered = requests_with(&server, "STEER-TEXT");
    assert_eq!(steered.len(), 1, "{stderr}");
    let message = newest(&steered[0].body);
    assert!(message.contains("<agent_message seq="), "{message}");
    assert!(message.contains("from=\\\"main["), "{message}");
    assert!(message.contains("mode=\\\"queue\\\""), "{message}");
    let messages = steered[0].body["messages"].as_array().unwrap();
    assert_eq!(messages[messages.len() - 2]["role"], "tool", "{messages:?}");
    // Its sender was told it was queued, then delivered.
    let receipt = requests_with(&server, "was delivered");
    assert_eq!(receipt.len(), 1);
    assert!(
        newest(&receipt[0].body).contains("in the request of its turn 2"),
        "{}",
        newest(&receipt[0].body)
    );
    // The plain progress lines name the message and its delivery.
    assert!(stderr.contains("] message #1 from main["), "{stderr}");
    assert!(
        stderr.contains("] message #1 delivered (turn 2)"),
        "{stderr}"
    );
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let sent = kinds.iter().position(|k| *k == "agent_message");
    let delivered = kinds.iter().position(|k| *k == "agent_message_delivered");
    assert!(sent.is_some() && delivered > sent, "{kinds:?}");
    replays_the_same(&world);
}

#[tokio::test]
async fn an_interrupt_cuts_a_childs_model_request_and_is_its_next_input() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-TASK"}),
        )]),
    );
    // The child's first model request never answers.
    server.route("CHILD-TASK", Reply::Hang);
    server.route("STOP-NOW", Reply::answer("CHILD-STOPPED", (10, 5)));
    let hangs = server.hangs.clone();
    server.respond_with(Arc::new(move |body: &Value| {
        let newest = newest(body);
        if newest.contains("Started job") {
            // Sent once the child's request hangs, so the interrupt cuts it.
            let id = started_job(body)?;
            let message =
                json!({"job_id": id, "message": "STOP-NOW and report", "mode": "interrupt"});
            return Some(Reply::Gated(
                hangs.clone(),
                Box::new(calls(&[("message_agent", message)])),
            ));
        }
        if newest.contains("is being cut") {
            return Some(calls(&[("await_agents", json!({"job_ids": "*"}))]));
        }
        if newest.contains("CHILD-STOPPED") || newest.contains("was delivered") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        None
    }));
    let started = Instant::now();
    let (output, _) = run_until(&world, &server, "ROOT-TASK", None).await;
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE", "{stderr}");
    assert!(
        server
            .hang_dropped
            .load(std::sync::atomic::Ordering::SeqCst),
        "the child's hanging request was not cut"
    );
    let interrupted = requests_with(&server, "STOP-NOW");
    assert_eq!(interrupted.len(), 1, "{stderr}");
    assert!(newest(&interrupted[0].body).contains("mode=\\\"interrupt\\\""));
    // A hanging request is cut at once, not at the child's time limit.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    replays_the_same(&world);
}

#[tokio::test]
async fn messages_that_cannot_be_delivered_are_rejected_with_the_reason() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-TASK"}),
        )]),
    );
    // The child fails: its model refuses the request.
    server.route(
        "CHILD-TASK",
        Reply::status(400, r#"{"error":{"message":"bad request"}}"#),
    );
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("Started job") {
            return Some(calls(&[("await_agents", json!({"job_ids": "*"}))]));
        }
        if newest.contains(": ERROR]") {
            let id = started_job(body)?;
            let huge = "x".repeat(9 * 1024);
            return Some(calls(&[
                (
                    "message_agent",
                    json!({"job_id": id, "message": "too late"}),
                ),
                ("message_agent", json!({"job_id": id, "message": huge})),
                (
                    "message_agent",
                    json!({"job_id": "zz9999", "message": "anyone?"}),
                ),
                (
                    "message_agent",
                    json!({"job_id": id, "message": "hi", "mode": "shout"}),
                ),
                (
                    "message_agent",
                    json!({"job_id": "f".repeat(10_000), "message": "hi"}),
                ),
            ]));
        }
        if newest.contains("rejected") || newest.contains("`mode`:") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        None
    }));
    let (output, _) = run_until(&world, &server, "ROOT-TASK", None).await;
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let last = server.requests().last().unwrap().body.clone();
    let results: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    let results = &results[results.len() - 5..];
    assert!(
        results[0].contains("rejected: agent")
            && results[0].contains("ended error: only an agent that finished ok can be resumed"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("at most 8 KiB ([defaults] max_message_kb)"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("there is no agent zz9999"),
        "{}",
        results[2]
    );
    assert!(
        results[3].contains("`mode`: the mode must be"),
        "{}",
        results[3]
    );
    // An id no job could have is refused without being echoed back.
    assert!(results[4].contains("not a job id"), "{}", results[4]);
    assert!(results[4].len() < 300, "{}", results[4].len());
}

#[tokio::test]
async fn interrupting_a_parent_leaves_its_children_running_and_loses_none_of_their_results() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    let profiles = world.path("warren.toml");
    let mut written = std::fs::read_to_string(&profiles).unwrap();
    written = written.replace("[defaults]\n", "[defaults]\nmax_depth = 2\n");
    written.push_str("\n[profiles.lead]\ndescription = \"Leads a worker\"\nsystem_prompt = \"You lead.\"\ntools = []\n");
    std::fs::write(&profiles, written).unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "lead", "task": "LEAD-TASK"}),
        )]),
    );
    server.route(
        "LEAD-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "WORK-TASK"}),
        )]),
    );
    // The worker answers only once its lead has been interrupted.
    server.route(
        "WORK-TASK",
        Reply::Gated(
            gate.clone(),
            Box::new(Reply::answer("WORK-RESULT", (10, 5))),
        ),
    );
    // The root interrupts its lead once the lead waits for its worker.
    let lead_waits = Arc::new(tokio::sync::Semaphore::new(0));
    server.respond_with(Arc::new(move |body: &Value| {
        let newest = newest(body);
        let lead = body.to_string().contains("You lead.");
        match () {
            _ if newest.contains("Started job") && newest.contains("(lead)") => {
                let id = started_job(body)?;
                let message = json!({"job_id": id, "message": "CHANGE-PLAN: report as soon as the worker does", "mode": "interrupt"});
                let interrupt = calls(&[("message_agent", message)]);
                Some(Reply::Gated(lead_waits.clone(), Box::new(interrupt)))
            }
            _ if lead && newest.contains("Started job") => {
                lead_waits.add_permits(1);
                Some(calls(&[("await_agents", json!({"job_ids": "*"}))]))
            }
            _ if lead && newest.contains("CHANGE-PLAN") => {
                Some(calls(&[("await_agents", json!({"job_ids": "*"}))]))
            }
            _ if lead && newest.contains("WORK-RESULT") => {
                Some(Reply::answer("LEAD-DONE with WORK-RESULT", (10, 5)))
            }
            _ if newest.contains("is being cut") => {
                Some(calls(&[("await_agents", json!({"job_ids": "*"}))]))
            }
            _ if newest.contains("was delivered") || newest.contains("LEAD-DONE") => {
                Some(Reply::answer("ROOT-DONE", (10, 5)))
            }
            _ => None,
        }
    }));
    let (output, events) =
        run_until(&world, &server, "ROOT-TASK", Some((&gate, "CHANGE-PLAN"))).await;
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE", "{stderr}");
    // The worker was spawned once, was not cancelled by its lead's interrupt, and its
    // result reached the lead, whose answer reached the root.
    assert_eq!(requests_with(&server, "WORK-TASK").len(), 1, "{stderr}");
    // The lead's wait was cut, and said so, before the message was its next input.
    let cut = requests_with(&server, "CHANGE-PLAN");
    assert_eq!(cut.len(), 1, "{stderr}");
    let messages = cut[0].body["messages"].as_array().unwrap();
    let before = &messages[messages.len() - 2];
    assert_eq!(before["role"], "tool", "{messages:?}");
    assert!(
        before["content"]
            .as_str()
            .unwrap()
            .contains("cut by an interrupt"),
        "{before}"
    );
    let finished: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "agent_finished")
        .map(|e| {
            (
                e["state"].as_str().unwrap_or(""),
                e["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(finished.contains(&("ok", "WORK-RESULT")), "{finished:?}");
    assert!(
        finished.contains(&("ok", "LEAD-DONE with WORK-RESULT")),
        "{finished:?}"
    );
    assert!(
        finished.iter().all(|(state, _)| *state == "ok"),
        "{finished:?}"
    );
}

/// The root of the durability tests: spawns a worker, sends it `DURABLE-NOTE` once it
/// started, awaits it once the message is queued, and ends `ROOT-DONE` once the worker
/// saw the note (or the root was told it was delivered).
fn durable_root(body: &Value) -> Option<Reply> {
    let newest = newest(body);
    if newest.contains("ROOT-TASK") {
        let spawn = json!({"profile": "worker", "task": "CHILD-TASK"});
        return Some(calls(&[("spawn_agent", spawn)]));
    }
    if newest.contains("Started job") {
        let id = started_job(body)?;
        let message = json!({"job_id": id, "message": "DURABLE-NOTE: keep it short"});
        return Some(calls(&[("message_agent", message)]));
    }
    if newest.contains("is queued") {
        return Some(calls(&[("await_agents", json!({"job_ids": "*"}))]));
    }
    if newest.contains("NOTE-SEEN") || newest.contains("was delivered") {
        return Some(Reply::answer("ROOT-DONE", (10, 5)));
    }
    None
}

/// Whether `body` is a request of the durability tests' worker.
fn is_worker(body: &Value) -> bool {
    body.to_string().contains("You are a worker.")
}

/// `warren resume RUN_ID`, which must end `ROOT-DONE`: the worker's requests it made
/// (those of the earlier process left out), and its stderr.
fn resumed_worker_requests(
    world: &World,
    server: &FakeLlm,
    run_id: &str,
) -> (Vec<Recorded>, String) {
    let asked = server.requests().len();
    let again = crate::support::warren(world, &["resume", run_id]);
    let stderr = text(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert_eq!(text(&again.stdout).trim(), "ROOT-DONE", "{stderr}");
    let worker = server.requests()[asked..]
        .iter()
        .filter(|r| is_worker(&r.body))
        .cloned()
        .collect();
    (worker, stderr)
}

/// How many of `lines` (a journal's) are records of `kind`.
fn records(lines: &[Value], kind: &str) -> usize {
    lines.iter().filter(|l| l["type"] == kind).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_accepted_before_a_sigkill_is_delivered_once_after_resume() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    server.respond_with(Arc::new(move |body: &Value| {
        let newest = newest(body);
        if is_worker(body) {
            // The first process: the worker's model never answers. After the resume:
            // it answers once the message is in its request.
            return Some(match newest.contains("DURABLE-NOTE") {
                true => Reply::answer("NOTE-SEEN", (10, 5)),
                false => Reply::Hang,
            });
        }
        durable_root(body)
    }));
    let run_id = "messages-durable";
    let child = crate::resume::start(&world, run_id);
    // Killed once the message was accepted (its receipt reached the root's model)
    // and before the worker could read it (its model request hangs).
    let deadline = Instant::now() + Duration::from_secs(30);
    while requests_with(&server, "is queued").is_empty() {
        assert!(Instant::now() < deadline, "the message was never accepted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    crate::resume::kill(child);
    let before = crate::resume::journal_lines(&world, run_id);
    assert_eq!(records(&before, "message_sent"), 1, "{before:#?}");
    assert_eq!(records(&before, "message_delivered"), 0, "{before:#?}");

    let resumed = crate::support::warren(&world, &["resume", run_id]);
    let stderr = text(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert_eq!(text(&resumed.stdout).trim(), "ROOT-DONE", "{stderr}");
    // The worker read the message once, in the resumed process's first request.
    let read: Vec<Recorded> = server
        .requests()
        .into_iter()
        .filter(|r| is_worker(&r.body) && r.body.to_string().contains("DURABLE-NOTE"))
        .collect();
    assert_eq!(read.len(), 1, "{stderr}");
    assert_eq!(
        read[0].body.to_string().matches("<agent_message").count(),
        1
    );
    let after = crate::resume::journal_lines(&world, run_id);
    assert_eq!(records(&after, "message_sent"), 1, "sent again: {after:#?}");
    assert_eq!(records(&after, "message_delivered"), 1, "{after:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_read_before_a_sigkill_is_in_the_rebuilt_history_once() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    let resumed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (after_resume, first_turn) = (resumed.clone(), gate.clone());
    server.respond_with(Arc::new(move |body: &Value| {
        let newest = newest(body);
        let turns = body["messages"].as_array()?.len();
        if is_worker(body) {
            let list = calls(&[("list_dir", json!({"path": "/docs"}))]);
            return Some(match () {
                // Turn 1 waits for the message; turn 2 reads it; turn 3 hangs until
                // the process dies, and answers after the resume.
                _ if turns <= 2 => Reply::Gated(first_turn.clone(), Box::new(list)),
                _ if newest.contains("DURABLE-NOTE") => list,
                _ if after_resume.load(std::sync::atomic::Ordering::SeqCst) => {
                    Reply::answer("NOTE-SEEN", (10, 5))
                }
                _ => Reply::Hang,
            });
        }
        if newest.contains("is queued") {
            first_turn.add_permits(1);
        }
        durable_root(body)
    }));
    let run_id = "messages-read";
    let child = crate::resume::start(&world, run_id);
    let deadline = Instant::now() + Duration::from_secs(30);
    let hanging = |server: &FakeLlm| {
        server.requests().iter().any(|r| {
            is_worker(&r.body) && r.body["messages"].as_array().is_some_and(|m| m.len() > 5)
        })
    };
    // Killed once the worker hangs in its third turn and the journal holds its second
    // (the one that read the message) with the delivery.
    let read = |lines: &[Value]| {
        records(lines, "message_delivered") == 1
            && lines
                .iter()
                .filter(|l| l["type"] == "model_response" && l["turn"] == 2)
                .count()
                >= 2
    };
    while !(hanging(&server) && read(&crate::resume::journal_lines(&world, run_id))) {
        assert!(
            Instant::now() < deadline,
            "the worker never reached its third turn"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    crate::resume::kill(child);
    let before = crate::resume::journal_lines(&world, run_id);
    assert_eq!(records(&before, "message_delivered"), 1, "{before:#?}");
    resumed.store(true, std::sync::atomic::Ordering::SeqCst);
    let (third, stderr) = resumed_worker_requests(&world, &server, run_id);
    // The resumed worker asked only its third turn, whose history holds the message
    // once, where it was read: before its second turn's answer.
    assert_eq!(third.len(), 1, "{stderr}");
    let messages = third[0].body["messages"].as_array().unwrap();
    let letters: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.to_string().contains("<agent_message"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(letters.len(), 1, "{messages:#?}");
    assert_eq!(
        messages[letters[0] + 1]["role"],
        "assistant",
        "{messages:#?}"
    );
    let after = crate::resume::journal_lines(&world, run_id);
    assert_eq!(records(&after, "message_sent"), 1, "{after:#?}");
    assert_eq!(records(&after, "message_delivered"), 1, "{after:#?}");
}

/// [`config`], its `worker` on a model of its own (`small-model`, so a follow-up can
/// be seen not to switch it to its parent's), and one follow-up per agent.
fn config_with_small_worker(world: &World, server: &FakeLlm) {
    config(world, server);
    let profiles = world.path("warren.toml");
    let mut written = std::fs::read_to_string(&profiles).unwrap();
    let small = format!(
        "[models.small]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"small-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n\n",
        server.base_url
    );
    written = written.replace(
        "[defaults]\n",
        &format!("{small}[defaults]\nmax_follow_ups = 1\n"),
    );
    written = written.replace(
        "system_prompt = \"You are a worker.\"\n",
        "system_prompt = \"You are a worker.\"\nmodel = \"small\"\n",
    );
    std::fs::write(&profiles, written).unwrap();
}

/// The id in the newest `[ID: OK]` result block of `body`'s messages.
pub(crate) fn finished_job(body: &Value) -> Option<String> {
    let text = newest(body);
    let (before, _) = text.split_once(": OK]")?;
    Some(before.rsplit('[').next()?.to_string())
}

#[tokio::test]
async fn a_follow_up_resumes_a_finished_child_with_its_history_and_its_own_model() {
    let world = World::new();
    let server = FakeLlm::start().await;
    // The worker runs on a model of its own: a follow-up must not switch it to its
    // parent's.
    config_with_small_worker(&world, &server);
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-TASK", "background": false}),
        )]),
    );
    server.route("CHILD-TASK", Reply::answer("FIRST-ANSWER", (10, 5)));
    // The resumed child answers only once its parent's next request is made: its new
    // result then reaches the parent through the await, not a notification.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    server.route(
        "FOLLOW-TEXT",
        Reply::Gated(
            gate.clone(),
            Box::new(Reply::answer("SECOND-ANSWER", (10, 5))),
        ),
    );
    server.respond_with(Arc::new(move |body: &Value| {
        let newest = newest(body);
        let all = body["messages"].to_string();
        if newest.contains("SECOND-ANSWER") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        if newest.contains("FIRST-ANSWER") {
            let id = finished_job(body)?;
            let follow = json!({"job_id": id, "message": "FOLLOW-TEXT: and the tests?", "mode": "follow_up"});
            return Some(calls(&[("message_agent", follow)]));
        }
        if all.contains("resumed job") && !all.contains("one more") {
            let id = all.split("resumed job ").nth(1)?.split(',').next()?.to_string();
            // A second follow-up is over `max_follow_ups`; then the await gets the
            // resumed child's new result.
            let again = json!({"job_id": id, "message": "one more", "mode": "follow_up"});
            gate.add_permits(1);
            return Some(calls(&[
                ("message_agent", again),
                ("await_agents", json!({"job_ids": [id]})),
            ]));
        }
        None
    }));
    let (output, events) = run_until(&world, &server, "ROOT-TASK", None).await;
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE", "{stderr}");
    // The resumed child's request holds its whole history, then the follow-up,
    // and goes to its own model.
    let resumed = requests_with(&server, "FOLLOW-TEXT");
    assert_eq!(resumed.len(), 1, "{stderr}");
    let body = &resumed[0].body;
    assert_eq!(body["model"], "small-model", "{body}");
    let history = body["messages"].to_string();
    let task = history.find("CHILD-TASK").expect("its task");
    let answer = history.find("FIRST-ANSWER").expect("its first answer");
    let follow = history
        .find("mode=\\\"follow_up\\\"")
        .expect("the follow-up, marked");
    assert!(task < answer && answer < follow, "{history}");
    // The root's first request went to its own model.
    assert_eq!(server.requests()[0].body["model"], "fake-model");
    // The second follow-up was over the limit; the await got the new result.
    let last = server.requests().last().unwrap().body.clone();
    let results: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    let n = results.len();
    assert!(
        results[n - 2].contains("[defaults] max_follow_ups"),
        "{}",
        results[n - 2]
    );
    assert!(
        results[n - 1].contains(": OK]") && results[n - 1].contains("SECOND-ANSWER"),
        "{}",
        results[n - 1]
    );
    assert!(results[n - 1].contains("2 turns"), "{}", results[n - 1]);
    // The child finished twice: once for its task, once for the follow-up.
    let finished = events
        .iter()
        .filter(|e| e["type"] == "agent_finished" && e["agent"].as_str() != Some(""))
        .filter(|e| e["text"].as_str().is_some_and(|t| t.contains("ANSWER")))
        .count();
    assert_eq!(finished, 2, "{events:?}");
    replays_the_same(&world);
}

/// `warren send ARGS` run in `dir`, as from another terminal.
fn send(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .arg("send")
        .args(args)
        .current_dir(dir)
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// The one run in `world`'s journal directory.
fn only_run(world: &World) -> String {
    let runs: Vec<_> = std::fs::read_dir(world.path(".warren/runs"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// The script of the tests where a person messages a child: the root spawns a
/// `worker` and awaits it; the child's first turn (a `list_dir` call) waits for the
/// returned gate; a request whose newest message holds `marker` is answered `answer`,
/// and the root ends `ROOT-DONE` once that answer reached it.
fn a_child_waiting_for_a_message(
    server: &FakeLlm,
    marker: &str,
    answer: &'static str,
) -> Arc<tokio::sync::Semaphore> {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-TASK"}),
        )]),
    );
    server.route(
        "CHILD-TASK",
        Reply::Gated(
            gate.clone(),
            Box::new(calls(&[("list_dir", json!({"path": "/docs"}))])),
        ),
    );
    server.route(marker, Reply::answer(answer, (10, 5)));
    server.respond_with(Arc::new(move |body: &Value| {
        if newest(body).contains("Started job") {
            return Some(calls(&[("await_agents", json!({"job_ids": "*"}))]));
        }
        if body["messages"].to_string().contains(answer) {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        None
    }));
    gate
}

/// `warren run --quiet ROOT-TASK` in `world`, in the background, its output piped.
fn run_in_background(world: &World) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "--quiet", "ROOT-TASK"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the root's first model request came (it may hang there).
async fn root_asking(server: &FakeLlm) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while requests_with(server, "ROOT-TASK").is_empty() {
        assert!(Instant::now() < deadline, "the root never asked its model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The id of the child once its first model request came (and waits).
async fn child_asking(server: &FakeLlm) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let started = server.requests().iter().find_map(|r| started_job(&r.body));
        if let (Some(id), false) = (started, requests_with(server, "CHILD-TASK").is_empty()) {
            return id;
        }
        assert!(Instant::now() < deadline, "the child never asked its model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn warren_send_from_another_terminal_reaches_a_running_agent_and_a_run_that_ended_refuses() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    let gate = a_child_waiting_for_a_message(&server, "PERSON-TEXT", "CHILD-SAW-PERSON");
    let run = run_in_background(&world);
    // Once the child's first request waits, a person sends it a message.
    let child = child_asking(&server).await;
    let run_id = only_run(&world);
    let (w, r, c) = (
        world.dir.path().to_path_buf(),
        run_id.clone(),
        child.clone(),
    );
    let sent = tokio::task::spawn_blocking(move || {
        send(
            &w,
            &[&r, &c, "PERSON-TEXT: check /docs first", "--from", "ada"],
        )
    })
    .await
    .unwrap();
    assert!(sent.status.success(), "{}", text(&sent.stderr));
    assert!(
        text(&sent.stdout).starts_with(&format!("queued: message #1 to {child}")),
        "{}",
        text(&sent.stdout)
    );
    gate.add_permits(1);
    let output = tokio::time::timeout(Duration::from_secs(60), run.wait_with_output())
        .await
        .expect("the run ended")
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE");
    // The child read it at its turn boundary, marked as a person's message.
    let steered = requests_with(&server, "PERSON-TEXT");
    assert_eq!(steered.len(), 1);
    let message = newest(&steered[0].body);
    assert!(message.contains("from=\\\"ada (a person)\\\""), "{message}");
    // `warren show --agent` prints the message where it came, and when it was read.
    let shown = crate::support::warren(&world, &["show", &run_id, "--agent", &child]);
    let shown = text(&shown.stdout);
    let sent_at = shown
        .find("── message #1 from ada (a person) (queue)\nPERSON-TEXT: check /docs first")
        .unwrap_or_else(|| panic!("{shown}"));
    let read_at = shown
        .find("── message #1 read in turn 2")
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(sent_at < read_at, "{shown}");
    // The run has ended: a message is refused, saying so; the socket is gone.
    let late = send(world.dir.path(), &[&run_id, &child, "too late"]);
    assert_eq!(late.status.code(), Some(1));
    assert!(
        text(&late.stderr).contains(&format!("run {run_id} has ended")),
        "{}",
        text(&late.stderr)
    );
    assert!(!world
        .path(&format!(".warren/runs/{run_id}/control.sock"))
        .exists());
    // A bad mode is a usage error.
    let bad = send(
        world.dir.path(),
        &[&run_id, &child, "hi", "--mode", "shout"],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}

#[tokio::test]
async fn warren_send_to_a_run_whose_process_died_says_how_to_resume_it() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    server.route("ROOT-TASK", Reply::Hang);
    let mut run = run_in_background(&world);
    root_asking(&server).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let run_id = only_run(&world);
    // Killed once its start is on disk (a run killed before has nothing to resume).
    let journal = world.path(&format!(".warren/runs/{run_id}/journal.jsonl"));
    while !std::fs::read_to_string(&journal).is_ok_and(|j| j.contains("agent_started")) {
        assert!(
            Instant::now() < deadline,
            "the run's start was never journaled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.start_kill().unwrap();
    run.wait().await.unwrap();
    let sent = send(world.dir.path(), &[&run_id, "root", "are you there?"]);
    assert_eq!(sent.status.code(), Some(1));
    let stderr = text(&sent.stderr);
    assert!(
        stderr.contains(&format!("run {run_id} is not running"))
            && stderr.contains(&format!("`warren resume {run_id}`")),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_control_socket_bounds_what_a_local_client_can_make_the_run_spend() {
    use std::io::{BufRead as _, Write as _};
    use std::os::unix::net::UnixStream;
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    server.route("ROOT-TASK", Reply::Hang);
    let mut run = run_in_background(&world);
    root_asking(&server).await;
    let run_id = only_run(&world);
    let socket = world.path(&format!(".warren/runs/{run_id}/control.sock"));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the socket is owner-only: {mode:o}");
    let answer = |stream: &UnixStream| {
        let mut line = String::new();
        std::io::BufReader::new(stream)
            .read_line(&mut line)
            .unwrap();
        line
    };
    let dir = world.dir.path().to_path_buf();
    let (socket_path, id) = (socket.clone(), run_id.clone());
    tokio::task::spawn_blocking(move || {
        // A request far over the message limit (8 KiB here) is cut off and refused.
        let mut huge = UnixStream::connect(&socket_path).unwrap();
        let _ = huge.write_all(&vec![b'x'; 1 << 20]);
        let refused = answer(&huge);
        assert!(refused.contains("max_message_kb"), "{refused}");
        // Eight clients that never send hold every place; a ninth is told to retry.
        let silent: Vec<UnixStream> = (0..8)
            .map(|_| UnixStream::connect(&socket_path).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let ninth = UnixStream::connect(&socket_path).unwrap();
        let busy = answer(&ninth);
        assert!(busy.contains("send again"), "{busy}");
        // The silent ones are given up on after 5 s; then a message gets through.
        let given_up = answer(&silent[0]);
        assert!(given_up.contains("no request within"), "{given_up}");
        drop(silent);
        let sent = send(&dir, &[&id, "root", "still there?"]);
        assert!(sent.status.success(), "{}", text(&sent.stderr));
        assert!(text(&sent.stdout).starts_with("queued: message #1"));
    })
    .await
    .unwrap();
    run.start_kill().unwrap();
    run.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_under_way_at_a_sigkill_resumes_its_agent_once_after_resume() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    let resumed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let after_resume = resumed.clone();
    server.respond_with(Arc::new(move |body: &Value| {
        let newest = newest(body);
        if is_worker(body) {
            // Its task is answered at once; the follow-up hangs until the process
            // dies, and is answered after the resume.
            return Some(match () {
                _ if !newest.contains("FOLLOW-TEXT") => Reply::answer("FIRST-ANSWER", (10, 5)),
                _ if after_resume.load(std::sync::atomic::Ordering::SeqCst) => {
                    Reply::answer("SECOND-ANSWER", (10, 5))
                }
                _ => Reply::Hang,
            });
        }
        if newest.contains("ROOT-TASK") {
            let spawn = json!({"profile": "worker", "task": "CHILD-TASK", "background": false});
            return Some(calls(&[("spawn_agent", spawn)]));
        }
        if newest.contains("SECOND-ANSWER") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        if newest.contains("FIRST-ANSWER") {
            let id = finished_job(body)?;
            let follow = json!({"job_id": id, "message": "FOLLOW-TEXT: and the tests?", "mode": "follow_up"});
            return Some(calls(&[("message_agent", follow)]));
        }
        // The receipt, then (or with it) the follow-up's delivery: await the worker.
        if newest.contains("resumed job") || newest.contains("was delivered") {
            let all = body["messages"].to_string();
            let id = all.split("resumed job ").nth(1)?.split(',').next()?.to_string();
            return Some(calls(&[("await_agents", json!({"job_ids": [id]}))]));
        }
        None
    }));
    let run_id = "follow-up-killed";
    let child = crate::resume::start(&world, run_id);
    // Killed once the resumed worker's follow-up request hangs, its letter on disk.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server
        .requests()
        .iter()
        .any(|r| is_worker(&r.body) && newest(&r.body).contains("FOLLOW-TEXT"))
    {
        assert!(
            Instant::now() < deadline,
            "the follow-up never reached the worker's model"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    crate::resume::kill(child);
    let before = crate::resume::journal_lines(&world, run_id);
    assert_eq!(records(&before, "message_sent"), 1, "{before:#?}");
    resumed.store(true, std::sync::atomic::Ordering::SeqCst);
    let (worker, stderr) = resumed_worker_requests(&world, &server, run_id);
    // After the resume the worker asked its model once, for the follow-up, with its
    // history rebuilt and the follow-up in it once; its first answer was not asked
    // again.
    assert_eq!(worker.len(), 1, "{stderr}");
    let history = worker[0].body["messages"].to_string();
    assert_eq!(history.matches("FOLLOW-TEXT").count(), 1, "{history}");
    assert!(
        history.find("FIRST-ANSWER") < history.find("FOLLOW-TEXT"),
        "{history}"
    );
    let after = crate::resume::journal_lines(&world, run_id);
    assert_eq!(records(&after, "message_sent"), 1, "sent again: {after:#?}");
    assert_eq!(records(&after, "message_delivered"), 1, "{after:#?}");
}

/// The live tree in a real terminal (tmux): a message sent with `warren send` shows on
/// its agent's line as unread, then as read once its turn carries it.
#[tokio::test(flavor = "multi_thread")]
async fn in_tmux_the_live_tree_shows_an_agents_messages_unread_then_read() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    let gate = a_child_waiting_for_a_message(&server, "TMUX-NOTE", "CHILD-SAW-NOTE");
    let command = format!(
        "cd {} && env -u WARREN_CONFIG RUST_LOG=warn {} run --progress tty ROOT-TASK; sleep 60",
        world.dir.path().display(),
        env!("CARGO_BIN_EXE_warren"),
    );
    let tmux = crate::support::Tmux::start("warren-test-mail", &command, (160, 30));
    let screen_with = |wanted: &str| tmux.screen_with(wanted);
    // Once the child waits for its model, a person sends it a message.
    let child = child_asking(&server).await;
    let run_id = only_run(&world);
    let sent = send(world.dir.path(), &[&run_id, &child, "TMUX-NOTE: hello"]);
    assert!(sent.status.success(), "{}", text(&sent.stderr));
    let unread = screen_with("✉ 1 (1 unread)");
    assert!(
        unread
            .lines()
            .any(|l| l.contains(&child) && l.contains("✉ 1 (1 unread)")),
        "{unread}"
    );
    // Its next turn reads it.
    gate.add_permits(1);
    let read = screen_with("✉ 1 read");
    assert!(
        read.lines()
            .any(|l| l.contains(&child) && l.contains("✉ 1 read")),
        "{read}"
    );
    screen_with("total cost");
}

/// The live tree of 61 agents in a 30-row terminal (tmux): it cannot be redrawn in
/// place whole, so it collapses to the root, the counts per state and the running
/// agents first, and redraws there as they finish.
#[tokio::test(flavor = "multi_thread")]
async fn in_tmux_a_tree_taller_than_the_terminal_collapses_to_counts() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    let profiles = world.path("warren.toml");
    let written = std::fs::read_to_string(&profiles).unwrap().replace(
        "[defaults]\n",
        "[defaults]\nmax_concurrent = 60\nmax_concurrent_total = 64\n",
    );
    std::fs::write(&profiles, written).unwrap();
    let spawns: Vec<(&str, Value)> = (0..60)
        .map(|i| {
            (
                "spawn_agent",
                json!({"profile": "worker", "task": format!("CHILD-{i}")}),
            )
        })
        .collect();
    server.route("ROOT-TASK", calls(&spawns));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let children = gate.clone();
    server.respond_with(Arc::new(move |body: &Value| {
        let all = body["messages"].to_string();
        if is_worker(body) {
            let done = Reply::answer("CHILD-DONE", (1, 1));
            return Some(Reply::Gated(children.clone(), Box::new(done)));
        }
        Some(match all.matches("CHILD-DONE").count() {
            60 => Reply::answer("ROOT-DONE", (1, 1)),
            _ => calls(&[("await_agents", json!({"job_ids": "*"}))]),
        })
    }));
    let command = format!(
        "cd {} && env -u WARREN_CONFIG RUST_LOG=warn {} run --progress tty ROOT-TASK; sleep 60",
        world.dir.path().display(),
        env!("CARGO_BIN_EXE_warren"),
    );
    let tmux = crate::support::Tmux::start("warren-test-tall", &command, (160, 30));
    let running = tmux.screen_with("61 agents: 60 running");
    assert_eq!(running.matches("61 agents:").count(), 1, "{running}");
    assert!(running.contains("more not shown"), "{running}");
    // Redrawn in place: one frame fills the screen, its root on the first row.
    assert!(
        running.lines().next().unwrap().contains(" main "),
        "{running}"
    );
    gate.add_permits(60);
    tmux.screen_with("total cost");
    // The last frame, then the table of the root and 39 children, not all 61.
    let all = tmux.history();
    assert!(
        all.contains("61 agents: 0 running · 0 queued · 60 ok · 0 failed"),
        "{all}"
    );
    assert!(all.contains("… 21 more agents, not listed"), "{all}");
}

/// The ids of the agents `agent_queued` records name in `lines`, root first.
fn agent_ids(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["type"] == "agent_queued")
        .filter_map(|l| l["agent"].as_str().map(str::to_string))
        .collect()
}

/// A follow-up to a child of a run that finished: `warren resume RUN --follow-up`
/// records it, brings the child back from the journal (its parent replayed, no model
/// asked again) and the child answers it live with its whole history on its own
/// model; its answer is printed. A follow-up to the root continues the run's
/// conversation. Follow-ups to a failed agent, to no agent, or over the limits are
/// refused with the reason, and nothing is recorded for them.
#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_to_a_child_of_a_finished_run_resumes_it_with_its_history() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config_with_small_worker(&world, &server);
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-TASK", "background": false}),
        )]),
    );
    server.route("CHILD-TASK", Reply::answer("FIRST-ANSWER", (10, 5)));
    server.route("FIRST-ANSWER", Reply::answer("ROOT-DONE", (10, 5)));
    let (output, _) = run_until(&world, &server, "ROOT-TASK", None).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "ROOT-DONE");
    let run_id = only_run(&world);
    let ids = agent_ids(&crate::resume::journal_lines(&world, &run_id));
    let (root, child) = (ids[0].clone(), ids[1].clone());
    // Without a follow-up a finished run is refused, naming the way to ask more.
    let again = crate::support::warren(&world, &["resume", &run_id]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("--follow-up"),
        "{}",
        text(&again.stderr)
    );

    let asked = server.requests().len();
    server.route("FOLLOW-TEXT", Reply::answer("SECOND-ANSWER", (10, 5)));
    let follow = [
        "resume",
        &run_id,
        "-q",
        "--follow-up",
        &child,
        "FOLLOW-TEXT: and the tests?",
    ];
    let resumed = crate::support::warren(&world, &follow);
    let stderr = text(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert_eq!(text(&resumed.stdout).trim(), "SECOND-ANSWER", "{stderr}");
    // One model request was made: the child's, with its whole history, the
    // follow-up last and marked, on its own model. The root asked nothing again.
    let new = &server.requests()[asked..];
    assert_eq!(new.len(), 1, "{new:?}");
    let body = &new[0].body;
    assert_eq!(body["model"], "small-model", "{body}");
    let history = body["messages"].to_string();
    let task = history.find("CHILD-TASK").expect("its task");
    let answer = history.find("FIRST-ANSWER").expect("its first answer");
    let marked = history.find("mode=\\\"follow_up\\\"").expect("marked");
    assert!(task < answer && answer < marked, "{history}");
    let lines = crate::resume::journal_lines(&world, &run_id);
    assert_eq!(records(&lines, "message_sent"), 1, "{lines:#?}");
    assert_eq!(records(&lines, "message_delivered"), 1, "{lines:#?}");
    let shown = crate::support::warren(&world, &["show", &run_id, "--agent", &child]);
    assert!(
        text(&shown.stdout).contains("SECOND-ANSWER"),
        "{}",
        text(&shown.stdout)
    );

    // Refused, each with its reason, and nothing recorded: over max_follow_ups, no
    // such agent, over max_message_kb.
    let over = crate::support::warren(&world, &["resume", &run_id, "--follow-up", &child, "more"]);
    assert!(!over.status.success());
    assert!(
        text(&over.stderr).contains("max_follow_ups"),
        "{}",
        text(&over.stderr)
    );
    let nobody =
        crate::support::warren(&world, &["resume", &run_id, "--follow-up", "ffffff", "hi"]);
    assert!(
        text(&nobody.stderr).contains("has no agent `ffffff`"),
        "{}",
        text(&nobody.stderr)
    );
    let long = "x".repeat(9 * 1024);
    let big = crate::support::warren(&world, &["resume", &run_id, "--follow-up", &root, &long]);
    assert!(
        text(&big.stderr).contains("max_message_kb"),
        "{}",
        text(&big.stderr)
    );
    let lines = crate::resume::journal_lines(&world, &run_id);
    assert_eq!(records(&lines, "message_sent"), 1, "{lines:#?}");

    // A follow-up to the root continues the run's conversation: its children are
    // not run again, and it answers live.
    server.route("ROOT-FOLLOW", Reply::answer("ROOT-SECOND", (10, 5)));
    let asked = server.requests().len();
    let follow = [
        "resume",
        &run_id,
        "-q",
        "--follow-up",
        &root,
        "ROOT-FOLLOW: summarise",
    ];
    let resumed = crate::support::warren(&world, &follow);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert_eq!(text(&resumed.stdout).trim(), "ROOT-SECOND");
    let new = &server.requests()[asked..];
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(new[0].body["model"], "fake-model");
    assert!(
        new[0].body.to_string().contains("SECOND-ANSWER"),
        "the child's newest answer"
    );
}

/// A follow-up to an agent that failed is refused, naming how it ended.
#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_to_a_failed_agent_of_a_finished_run_is_refused() {
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server);
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "CHILD-TASK", "background": false}),
        )]),
    );
    // The child's model fails (no reply: HTTP 599, no retries); the root answers.
    server.respond_with(Arc::new(|body: &Value| {
        body.to_string()
            .contains("You coordinate.")
            .then(|| Reply::answer("ROOT-DONE", (1, 1)))
    }));
    let (output, _) = run_until(&world, &server, "ROOT-TASK", None).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let run_id = only_run(&world);
    let ids = agent_ids(&crate::resume::journal_lines(&world, &run_id));
    let refused = crate::support::warren(
        &world,
        &["resume", &run_id, "--follow-up", &ids[1], "again?"],
    );
    assert!(!refused.status.success());
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains("ended error") && stderr.contains("finished ok"),
        "{stderr}"
    );
}
