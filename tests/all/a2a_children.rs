//! Talking to a remote A2A child served by the official Python SDK
//! (`tests/fixtures/a2a-python/server.py`): a question its task asks
//! (`INPUT_REQUIRED`) goes to a person through `warren approve` and the answer to
//! the task; a follow-up wakes the finished child as a new task in the same A2A
//! context, and its parent awaits it as any child; an interrupt cancels the
//! remote task and sends its message as the next. W3C trace context crosses A2A
//! both ways: a client's `traceparent` joins a `warren a2a` task to its trace, and
//! a remote child's requests carry the child's span.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::a2a::{echo_script, json_of, remote_project, A2aServer, EchoAgent, TOKEN, WARREN};
use crate::approvals::{only_run, pending};
use crate::fake_llm::{newest, FakeLlm, Reply};
use crate::messages::finished_job;
use crate::support::{text, warren, World};

const ECHO_TOKEN: &str = "echo-token-0123456789abcdef";

/// `warren run ARGS` in `world` with the echo agent's token, not waited for.
fn start_run(world: &World, args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(WARREN)
        .arg("run")
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("ECHO_A2A_TOKEN", ECHO_TOKEN)
        .env("RUST_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn a_remote_agents_question_goes_to_a_person_and_the_answer_to_its_task() {
    let echo = EchoAgent::start(ECHO_TOKEN);
    let server = FakeLlm::start().await;
    server.respond_with(echo_script(
        "ASK-ECHO",
        "ASK me something",
        "ECHO: you chose blue",
        "ROOT-SAW-CHOICE",
    ));
    let world = remote_project(&server, &echo.url);
    let run = start_run(&world, &["--approve", "ask", "ASK-ECHO"]);
    let id = only_run(&world).await;
    let request = pending(&world, &id).await.remove(0);
    assert_eq!(request["kind"], "question", "{request}");
    let question = request["question"].as_str().unwrap();
    assert!(
        question.contains("Which colour?") && question.contains("echo"),
        "{request}"
    );
    let answered = warren(
        &world,
        &[
            "approve",
            &id,
            request["id"].as_str().unwrap(),
            "--answer",
            "blue",
        ],
    );
    assert!(answered.status.success(), "{}", text(&answered.stderr));
    let output = tokio::time::timeout(Duration::from_secs(120), run.wait_with_output())
        .await
        .expect("the run did not end")
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(
        output.status.success(),
        "{stderr}\necho: {}",
        echo.log.lock().unwrap()
    );
    assert_eq!(text(&output.stdout).trim(), "ROOT-SAW-CHOICE", "{stderr}");
    let shown = json_of(&warren(&world, &["show", &id, "--json"]));
    let child = &shown["agents"][1];
    assert_eq!(child["state"], "ok", "{shown}");
    assert_eq!(child["text"], "ECHO: you chose blue", "{shown}");
    // The question and its answer are journaled as the child's.
    let transcript = text(
        &warren(
            &world,
            &[
                "show",
                &id,
                "--agent",
                child["id"].as_str().unwrap(),
                "--json",
            ],
        )
        .stdout,
    );
    assert!(
        transcript.contains("input_requested") && transcript.contains("input_answered"),
        "{transcript}"
    );

    // Unanswered (the run denies every request), the child fails saying so.
    let output = start_run(&world, &["--approve", "deny", "ASK-ECHO"])
        .wait_with_output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let shown = json_of(&warren(&world, &["show", "last", "--json"]));
    let child = &shown["agents"][1];
    assert_eq!(child["state"], "error", "{shown}");
    let error = child["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("asked for input") && error.contains("Which colour?"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_follow_up_wakes_a_finished_remote_child_as_a_new_task_in_its_context() {
    let echo = EchoAgent::start(ECHO_TOKEN);
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("second words (task 2 of this context)") {
            return Some(Reply::answer("ROOT-SAW-CONTEXT", (10, 5)));
        }
        // The follow-up's answer; its receipt may come in a message after it.
        let all = body["messages"].to_string();
        if all.contains("resumed job") && !all.contains(r#""name":"await_agents""#) {
            let id = all
                .split("resumed job ")
                .nth(1)?
                .split(',')
                .next()?
                .to_string();
            return Some(Reply::tool_calls(
                &[("await_agents", json!({"job_ids": [id]}))],
                (10, 5),
            ));
        }
        if newest.contains("ECHO: first words") {
            let id = finished_job(body)?;
            let follow = json!({"job_id": id, "message": "second words", "mode": "follow_up"});
            return Some(Reply::tool_calls(&[("message_agent", follow)], (10, 5)));
        }
        newest.contains("TWICE-ECHO").then(|| {
            let args = json!({"profile": "echo", "task": "first words", "background": false});
            Reply::tool_calls(&[("spawn_agent", args)], (10, 5))
        })
    }));
    let world = remote_project(&server, &echo.url);
    let child = ran(&world, &echo, "TWICE-ECHO", "ROOT-SAW-CONTEXT").await;
    let answer = child["text"].as_str().unwrap();
    assert!(
        answer.starts_with("ECHO: Message from ")
            && answer.ends_with("second words (task 2 of this context)"),
        "{child}"
    );
    // The parent's follow-up got a receipt saying it woke the child.
    let last = server.requests().last().unwrap().body.to_string();
    assert!(last.contains("message_agent"), "{last}");
}

#[tokio::test]
async fn an_interrupt_cancels_the_remote_task_and_its_message_is_the_next_task() {
    let echo = EchoAgent::start(ECHO_TOKEN);
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        let all = body["messages"].to_string();
        if all.contains("say hi instead (task 2 of this context)") {
            return Some(Reply::answer("ROOT-SAW-INTERRUPT", (10, 5)));
        }
        let id = || {
            let id = all.split("Started job ").nth(1)?;
            id.split(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .map(str::to_string)
        };
        if all.contains("Message #1 to job") && !all.contains(r#""name":"await_agents""#) {
            return Some(Reply::tool_calls(
                &[("await_agents", json!({"job_ids": [id()?]}))],
                (10, 5),
            ));
        }
        if newest.contains("Started job") {
            let cut = json!({"job_id": id()?, "message": "say hi instead", "mode": "interrupt"});
            return Some(Reply::tool_calls(&[("message_agent", cut)], (10, 5)));
        }
        newest.contains("INTERRUPT-ECHO").then(|| {
            let args = json!({"profile": "echo", "task": "HANG until told", "background": true});
            Reply::tool_calls(&[("spawn_agent", args)], (10, 5))
        })
    }));
    let world = remote_project(&server, &echo.url);
    let child = ran(&world, &echo, "INTERRUPT-ECHO", "ROOT-SAW-INTERRUPT").await;
    // The hanging task was cancelled there, and the message went as a new task.
    let log = echo.log.lock().unwrap().clone();
    assert!(log.contains("method=CancelTask"), "{log}");
    assert_eq!(
        log.matches("method=SendStreamingMessage").count(),
        2,
        "{log}"
    );
    let answer = child["text"].as_str().unwrap();
    assert!(
        answer.ends_with("say hi instead (task 2 of this context)"),
        "{child}"
    );
}

/// Runs `warren run TASK` in `world` to its end, which must be `said`; the
/// remote child as `warren show` has it (it ended ok).
async fn ran(world: &World, echo: &EchoAgent, task: &str, said: &str) -> Value {
    let output = start_run(world, &[task]).wait_with_output().await.unwrap();
    let stderr = text(&output.stderr);
    let log = echo.log.lock().unwrap().clone();
    assert!(output.status.success(), "{stderr}\necho: {log}");
    assert_eq!(text(&output.stdout).trim(), said, "{stderr}");
    let shown = json_of(&warren(world, &["show", "last", "--json"]));
    let child = shown["agents"][1].clone();
    assert_eq!(child["state"], "ok", "{shown}");
    child
}

/// The spans an OTLP/HTTP receiver got, once `ready` says they are all there.
async fn spans_when(receiver: &FakeLlm, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut spans = Vec::new();
    for _ in 0..150 {
        spans = receiver.otlp_spans();
        if ready(&spans) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    spans
}

fn named<'a>(spans: &'a [Value], trace: &str, name: &str) -> Option<&'a Value> {
    spans
        .iter()
        .filter(|s| s["traceId"] == trace)
        .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with(name)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_context_crosses_a2a_both_ways() {
    let receiver = FakeLlm::start().await;
    receiver.respond_with(Arc::new(|_: &Value| Some(Reply::json(json!({})))));
    let endpoint = receiver.base_url.trim_end_matches("/v1").to_string();
    let otel = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];

    // In: a client's traceparent makes the task's root agent a child of its span.
    let model = FakeLlm::start().await;
    crate::a2a::script(&model);
    let world = crate::a2a::project(&model);
    let a2a = A2aServer::start_with(&world, &[], &otel);
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "TASK-TREE traced"}]},
    }});
    let answer = reqwest::Client::new()
        .post(format!("{}/a2a/main", a2a.base))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("traceparent", format!("00-{trace}-{parent}-01"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let said = answer.text().await.unwrap();
    assert!(
        said.contains("TASK_STATE_COMPLETED"),
        "{said}\n{}",
        a2a.log()
    );
    let spans = spans_when(&receiver, |spans| {
        named(spans, trace, "invoke_agent main").is_some()
            && named(spans, trace, "invoke_agent worker").is_some()
            && named(spans, trace, "chat").is_some()
    })
    .await;
    let root = named(&spans, trace, "invoke_agent main")
        .unwrap_or_else(|| panic!("the task's root is not in the client's trace: {spans:#?}"));
    assert_eq!(root["parentSpanId"], parent, "{root:#}");
    assert!(
        named(&spans, trace, "invoke_agent worker").is_some(),
        "{spans:#?}"
    );
    drop(a2a);

    // Out: a remote child's requests carry its own span as their parent.
    let wire = world.path("echo-wire.log");
    let echo = EchoAgent::start_with(ECHO_TOKEN, Some(&wire));
    let model = FakeLlm::start().await;
    model.respond_with(echo_script(
        "ASK-ECHO",
        "traced hello",
        "ECHO: traced hello",
        "ROOT-DONE",
    ));
    let world = remote_project(&model, &echo.url);
    let output = tokio::process::Command::new(WARREN)
        .args(["run", "ASK-ECHO"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("ECHO_A2A_TOKEN", ECHO_TOKEN)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let logged = std::fs::read_to_string(&wire).unwrap();
    let sent = logged
        .lines()
        .find_map(|line| line.strip_prefix("traceparent: "))
        .unwrap_or_else(|| panic!("no traceparent reached the remote agent: {logged}"))
        .to_string();
    let parts: Vec<&str> = sent.split('-').collect();
    assert_eq!(parts.len(), 4, "{sent}");
    let (trace, span) = (parts[1].to_string(), parts[2].to_string());
    let spans = spans_when(&receiver, |spans| {
        named(spans, &trace, "invoke_agent echo").is_some()
    })
    .await;
    let child = named(&spans, &trace, "invoke_agent echo")
        .unwrap_or_else(|| panic!("no span of the remote child in trace {trace}: {spans:#?}"));
    assert_eq!(child["spanId"], span.as_str(), "{child:#}");
    assert!(
        child["attributes"].to_string().contains("warren.remote"),
        "{child:#}"
    );
    assert!(
        named(&spans, &trace, "invoke_agent main").is_some(),
        "{spans:#?}"
    );
}

/// A queued message to a remote child whose task works goes to that task: here the
/// remote agent is another warren (`warren a2a`), which leaves it for its root at
/// its next turn; the sender's receipt says it was sent.
#[tokio::test]
async fn a_queued_message_reaches_the_running_remote_task() {
    let server = FakeLlm::start().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let opened = gate.clone();
    server.respond_with(Arc::new(move |body: &Value| {
        let newest = newest(body);
        let all = body["messages"].to_string();
        // The parent, once the remote answered.
        if all.contains("REMOTE-SAW-EXTRA") {
            return Some(Reply::answer("ROOT-SAW-REMOTE", (10, 5)));
        }
        // The remote root: its task holds until the message was sent, then reads a
        // file; the message is in its next request.
        if newest.contains("EXTRA-INFO") {
            return Some(Reply::answer("REMOTE-SAW-EXTRA", (10, 5)));
        }
        if newest.contains("SLOW-TASK") {
            let read =
                Reply::tool_calls(&[("read_file", json!({"path": "/docs/none.txt"}))], (10, 5));
            let later = Reply::Delayed(Duration::from_secs(1), Box::new(read));
            return Some(Reply::Gated(opened.clone(), Box::new(later)));
        }
        if newest.contains("\"role\":\"tool\"") && all.contains("/docs/none.txt") {
            return Some(Reply::answer("REMOTE-MISSED-EXTRA", (10, 5)));
        }
        // The parent: spawn, message, await.
        let id = || {
            let id = all.split("Started job ").nth(1)?;
            id.split(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .map(str::to_string)
        };
        if all.contains("Message #1 to job") && !all.contains(r#""name":"await_agents""#) {
            return Some(Reply::tool_calls(
                &[("await_agents", json!({"job_ids": [id()?]}))],
                (10, 5),
            ));
        }
        if newest.contains("Started job") {
            opened.add_permits(1);
            let note = json!({"job_id": id()?, "message": "EXTRA-INFO", "mode": "queue"});
            return Some(Reply::tool_calls(&[("message_agent", note)], (10, 5)));
        }
        newest.contains("ASK-REMOTE").then(|| {
            let args = json!({"profile": "echo", "task": "SLOW-TASK", "background": true});
            Reply::tool_calls(&[("spawn_agent", args)], (10, 5))
        })
    }));
    let remote_world = crate::a2a::project(&server);
    let remote = A2aServer::start_with(
        &remote_world,
        &["--profile", "main"],
        &[("WARREN_MCP_TOKEN", ECHO_TOKEN)],
    );
    let world = remote_project(&server, &format!("{}/a2a/main", remote.base));
    let output = start_run(&world, &["ASK-REMOTE"])
        .wait_with_output()
        .await
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(
        output.status.success(),
        "{stderr}\nremote: {}",
        remote.log()
    );
    assert_eq!(
        text(&output.stdout).trim(),
        "ROOT-SAW-REMOTE",
        "{stderr}\nremote: {}",
        remote.log()
    );
    let shown = json_of(&warren(&world, &["show", "last", "--json"]));
    assert_eq!(shown["agents"][1]["text"], "REMOTE-SAW-EXTRA", "{shown}");
    let receipts: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.body["messages"].to_string())
        .filter(|all| all.contains("was delivered: sent to the remote A2A agent's task"))
        .collect();
    assert!(!receipts.is_empty(), "no receipt said the message was sent");
    drop(gate);
}
