//! `warren mcp` and clients of the MCP 2026-07-28 revision (no sessions, every request
//! carrying its version and capabilities), through the official Python SDK
//! (`tests/fixtures/mcp-python/modern_client.py`, the SDK's `mode` pinned to
//! 2026-07-28 with no fallback, left to negotiate, or pinned to the 2025-11-25
//! handshake): tools listed with their annotations and called under the profile's
//! sandbox, and with the tasks extension a background spawn as a task followed to its
//! end, another cancelled, and a write waiting for approval as `input_required` and
//! approved with `tasks/update`; the bearer token guards these requests as the
//! others.

use std::time::Duration;

use serde_json::{json, Value};

use crate::fake_llm::{newest, FakeLlm, Reply};
use crate::mcp::{python_mcp, HttpServer, TOKEN};
use crate::support::{root, text, World};

const WARREN: &str = env!("CARGO_BIN_EXE_warren");

/// The MCP client's `main` reads `docs/` and may write `out/`; its sub-agents are
/// `worker`s and `writer`s whose writes need a person's yes. The model needs no key
/// (the SDK starts a stdio server with almost no environment).
fn project(server: &FakeLlm) -> World {
    let world = World::new();
    world.config(&format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{url}"
model = "fake-model"
stream = false
max_retries = 0

[profiles.main]
description = "What the MCP client gets"
model = "fake"
tools = ["read_file"]
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}, {{ host = "out", guest = "/out", mode = "rw" }}]

[profiles.worker]
description = "Answers"
tools = []

[profiles.writer]
description = "Writes a file"
tools = ["write_file"]
approval = ["write_file"]
[profiles.writer.capabilities]
fs = [{{ host = "out", guest = "/out", mode = "rw" }}]
"#,
        url = server.base_url,
    ));
    world
}

/// The model: `TASK-OK` answers, `TASK-HANG` never does (until a message
/// `TELL-NOW` cuts in), `TASK-WRITE` writes `/out/a.txt` and then says what its
/// call returned.
fn script(server: &FakeLlm) {
    server.respond_with(std::sync::Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("\"role\":\"tool\"") {
            return Some(Reply::answer("WRITER-DONE", (10, 5)));
        }
        if newest.contains("TELL-NOW") {
            return Some(Reply::answer("TOLD-AND-ANSWERED", (10, 5)));
        }
        if newest.contains("TASK-HANG") {
            return Some(Reply::Hang);
        }
        if newest.contains("TASK-WRITE") {
            let args = json!({"path": "/out/a.txt", "content": "APPROVED-BY-TASKS-UPDATE"});
            return Some(Reply::tool_calls(&[("write_file", args)], (10, 5)));
        }
        newest
            .contains("TASK-OK")
            .then(|| Reply::answer("CHILD-DONE", (10, 5)))
    }));
}

/// Runs `scenario` of the modern client in SDK mode `mode`, over stdio or through
/// `server`; its report.
async fn modern(world: &World, server: Option<&HttpServer>, mode: &str, scenario: &str) -> Value {
    let mut command = tokio::process::Command::new(python_mcp());
    command
        .arg(root().join("tests/fixtures/mcp-python/modern_client.py"))
        .current_dir(world.dir.path());
    match server {
        None => command
            .arg("--stdio")
            .arg(WARREN)
            .arg(world.path("warren.toml")),
        Some(server) => command
            .env("WARREN_MCP_TOKEN", TOKEN)
            .arg("--http")
            .arg(&server.url),
    };
    command.arg(mode).arg(scenario).kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(240), command.output())
        .await
        .unwrap_or_else(|_| panic!("the {scenario} scenario ({mode}) took over 240 s"))
        .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    let server_log = server.map_or_else(String::new, |s| s.stderr.lock().unwrap().clone());
    assert!(
        output.status.success(),
        "modern_client.py {mode} {scenario} failed:\n{stdout}\n{stderr}\nserver:\n{server_log}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// The `tools` scenario's report, checked: `protocol` is what was negotiated.
fn check_tools(report: &Value, protocol: &str) {
    assert_eq!(report["protocol"], protocol, "{report}");
    assert_eq!(
        report["tools"],
        json!([
            "await_agents",
            "cancel_agent",
            "list_agents",
            "message_agent",
            "read_file",
            "spawn_agent"
        ]),
        "{report}"
    );
    assert!(
        report["annotations"]["read_file"]["title"].is_string(),
        "{report}"
    );
    assert_eq!(report["annotations"]["spawn_agent"]["openWorldHint"], true);
    assert_eq!(
        report["allowed"]["text"],
        "alpha\nthe quick brown fox\nomega\n"
    );
    assert_eq!(report["allowed"]["is_error"], false);
    let denied = report["denied"]["text"].as_str().unwrap();
    assert!(
        denied.contains("denied") && denied.contains("/etc/passwd"),
        "{denied}"
    );
    assert_eq!(report["denied"]["is_error"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_pinned_to_2026_07_28_lists_and_calls_tools_over_stdio() {
    let server = FakeLlm::start().await;
    let world = project(&server);
    check_tools(
        &modern(&world, None, "2026-07-28", "tools").await,
        "2026-07-28",
    );
}

/// Over HTTP: a pinned client, one left to negotiate (it discovers 2026-07-28), and
/// one pinned to the 2025-11-25 handshake are all served by the same server; the
/// sessionless requests run in one standing tree for the credential, journaled as
/// one run, not one per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_both_eras_are_served_over_http() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = HttpServer::start(&world);
    check_tools(
        &modern(&world, Some(&server), "2026-07-28", "tools").await,
        "2026-07-28",
    );
    check_tools(
        &modern(&world, Some(&server), "auto", "tools").await,
        "2026-07-28",
    );
    check_tools(
        &modern(&world, Some(&server), "legacy", "tools").await,
        "2025-11-25",
    );
    let runs = std::fs::read_dir(world.path(".warren/runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 2, "one standing tree and one legacy session");
    assert_eq!(server.stop(), "", "warren mcp --http wrote to stdout");
}

/// The tasks scenario's report, checked, and the approved write made.
fn check_tasks(world: &World, report: &Value) {
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_eq!(report["created"]["type"], "CreateTaskResult", "{report}");
    assert_eq!(report["created"]["status"], "working", "{report}");
    let ok = &report["ok"];
    assert_eq!(
        ok["statuses"].as_array().unwrap().last().unwrap(),
        "completed"
    );
    assert!(
        ok["text"].as_str().unwrap().contains("CHILD-DONE"),
        "{report}"
    );
    assert_eq!(
        report["cancelled"]["statuses"],
        json!(["cancelled"]),
        "{report}"
    );
    assert!(
        report["cancelled"]["message"]
            .as_str()
            .unwrap()
            .contains("tasks/cancel"),
        "{report}"
    );
    let asked = &report["input_required"];
    assert_eq!(
        asked["statuses"].as_array().unwrap().last().unwrap(),
        "input_required"
    );
    assert_eq!(asked["methods"], json!(["elicitation/create"]), "{report}");
    let message = asked["messages"][0].as_str().unwrap();
    assert!(
        message.contains("write_file") && message.contains("APPROVED-BY-TASKS-UPDATE"),
        "{message}"
    );
    assert_eq!(
        report["approved"]["statuses"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        "completed"
    );
    assert!(
        report["approved"]["text"]
            .as_str()
            .unwrap()
            .contains("WRITER-DONE"),
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "APPROVED-BY-TASKS-UPDATE"
    );
    // A message in tasks/update's `_meta` reached the hanging agent, which answered
    // it; one with a mode that is not one was refused, naming the field.
    let messaged = &report["messaged"];
    assert_eq!(
        messaged["statuses"].as_array().unwrap().last().unwrap(),
        "completed",
        "{report}"
    );
    assert!(
        messaged["text"]
            .as_str()
            .unwrap()
            .contains("TOLD-AND-ANSWERED"),
        "{report}"
    );
    let bad = report["bad_message"].as_str().unwrap_or_default();
    assert!(
        bad.contains("warren/message") && bad.contains("mode"),
        "{report}"
    );
    assert_eq!(report["foreground"]["type"], "CallToolResult", "{report}");
    assert!(report["foreground"]["text"]
        .as_str()
        .unwrap()
        .contains("CHILD-DONE"));
    assert!(
        report["unknown"]
            .as_str()
            .unwrap()
            .contains("no task `no-such-task`"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_spawns_are_tasks_followed_cancelled_and_approved_over_http() {
    let model = FakeLlm::start().await;
    script(&model);
    let world = project(&model);
    let server = HttpServer::start(&world);
    check_tasks(
        &world,
        &modern(&world, Some(&server), "2026-07-28", "tasks").await,
    );
    assert_eq!(server.stop(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_spawns_are_tasks_over_stdio_when_negotiated() {
    let model = FakeLlm::start().await;
    script(&model);
    let world = project(&model);
    check_tasks(&world, &modern(&world, None, "auto", "tasks").await);
}

/// A sessionless request without the token is refused before anything is made for it
/// (no standing tree, no run); with it, it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_sessionless_requests() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = HttpServer::start(&world);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}});
    let post = |token: Option<&str>| {
        let mut request = reqwest::Client::new()
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        request.send()
    };
    for token in [None, Some("wrong-token-0123456789")] {
        let answer = post(token).await.unwrap();
        assert_eq!(answer.status(), 401, "{token:?}");
    }
    assert!(
        !world.path(".warren/runs").exists(),
        "a refused request made a run"
    );
    let answer = post(Some(TOKEN)).await.unwrap();
    assert_eq!(answer.status(), 200);
    let listed = answer.text().await.unwrap();
    assert!(listed.contains("\"read_file\""), "{listed}");
    assert_eq!(server.stop(), "");
}

/// A 2026-07-28 request's `_meta.traceparent` joins warren's spans to the client's
/// trace: the call's span is a child of the client's span, and the sub-agent it spawns
/// nests under the call's (its span ended though the agent rests, waiting for
/// follow-ups).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_traceparent_joins_warrens_spans_to_its_trace() {
    let model = FakeLlm::start().await;
    script(&model);
    let receiver = FakeLlm::start().await;
    receiver.respond_with(std::sync::Arc::new(|_: &Value| {
        Some(Reply::json(json!({})))
    }));
    let world = project(&model);
    let endpoint = receiver.base_url.trim_end_matches("/v1").to_string();
    let server = HttpServer::launch_with(
        &world,
        &[],
        None,
        Some(TOKEN),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", Some(endpoint.as_ref())),
            ("WARREN_OTEL_GENAI_COMPAT", None),
        ],
    );
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "traceparent": format!("00-{trace}-{parent}-01"),
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "spawn_agent",
        "arguments": {"profile": "worker", "task": "TASK-OK", "background": false},
        "_meta": meta,
    }});
    let answer = reqwest::Client::new()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "spawn_agent")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let called = answer.text().await.unwrap();
    assert!(called.contains("CHILD-DONE"), "{called}");
    let in_trace = |spans: &[Value], name: &str| {
        spans
            .iter()
            .filter(|s| s["traceId"] == trace)
            .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .cloned()
    };
    let mut spans = Vec::new();
    for _ in 0..100 {
        spans = receiver.otlp_spans();
        if in_trace(&spans, "invoke_agent worker").is_some()
            && in_trace(&spans, "mcp.call").is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let call = in_trace(&spans, "mcp.call")
        .unwrap_or_else(|| panic!("no call span in the client's trace: {spans:#?}"));
    assert_eq!(call["parentSpanId"], parent, "{call:#}");
    let child = in_trace(&spans, "invoke_agent worker")
        .unwrap_or_else(|| panic!("the spawned agent is not in the client's trace: {spans:#?}"));
    let mut above = child;
    while above["spanId"] != call["spanId"] {
        above = spans
            .iter()
            .find(|s| s["spanId"] == above["parentSpanId"])
            .cloned()
            .unwrap_or_else(|| {
                panic!("the agent's span does not nest under the call's: {above:#}")
            });
    }
    assert_eq!(server.stop(), "");
}
