//! `warren a2a` and a client written by others: the official A2A Python SDK
//! (`a2a-sdk` 1.3.0, `tests/fixtures/a2a-python/client.py`), which reads a
//! profile's card, streams a task whose tree spawns a sub-agent to COMPLETED (the
//! task's id is the run's, and its history and answer agree with `warren show`),
//! cancels a task, and answers an approval the task reported as INPUT_REQUIRED;
//! the bearer token, the Origin check and the protocol version guard the server.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::fake_llm::{newest, FakeLlm, Reply};
use crate::support::{root, text, warren, World};

pub(crate) const WARREN: &str = env!("CARGO_BIN_EXE_warren");
pub(crate) const TOKEN: &str = "a2a-test-token-0123456789";

/// The A2A SDK's Python, in its own virtual environment.
fn python_a2a() -> std::path::PathBuf {
    crate::guests::python_venv(
        "tests/fixtures/a2a-python",
        "target/a2a-python",
        "the A2A client tests",
    )
}

/// `main` spawns `worker`s and may write `out/` (each write waits for a person).
pub(crate) fn project(server: &FakeLlm) -> World {
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
description = "Answers questions about the project's documents"
model = "fake"
tools = ["read_file", "write_file"]
approval = ["write_file"]
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}, {{ host = "out", guest = "/out", mode = "rw" }}]

[profiles.worker]
description = "Answers"
tools = []
"#,
        url = server.base_url,
    ));
    world
}

/// The model: `TASK-TREE` spawns a worker on `TASK-OK` and waits for it, `TASK-OK`
/// answers `CHILD-DONE`, `HANG` never answers, `TASK-WRITE` writes
/// `/out/a.txt`; after a tool result the root answers `ROOT-DONE`.
pub(crate) fn script(server: &FakeLlm) {
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("\"role\":\"tool\"") {
            return Some(Reply::answer("ROOT-DONE", (10, 5)));
        }
        if newest.contains("HANG") {
            return Some(Reply::Hang);
        }
        if newest.contains("TASK-TREE") {
            let args = json!({"profile": "worker", "task": "TASK-OK", "background": false});
            return Some(Reply::tool_calls(&[("spawn_agent", args)], (10, 5)));
        }
        if newest.contains("TASK-WRITE") {
            let args = json!({"path": "/out/a.txt", "content": "APPROVED-BY-A2A"});
            return Some(Reply::tool_calls(&[("write_file", args)], (10, 5)));
        }
        newest
            .contains("TASK-OK")
            .then(|| Reply::answer("CHILD-DONE", (10, 5)))
    }));
}

/// `warren a2a --http 127.0.0.1:0` in `world`, with its stderr collected.
pub(crate) struct A2aServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    stderr: Arc<Mutex<String>>,
}

impl A2aServer {
    pub(crate) fn start(world: &World, args: &[&str]) -> A2aServer {
        A2aServer::start_with(world, args, &[])
    }

    /// With `env` set besides.
    pub(crate) fn start_with(world: &World, args: &[&str], env: &[(&str, &str)]) -> A2aServer {
        let mut child = Command::new(WARREN)
            .args(["a2a", "--http", "127.0.0.1:0"])
            .args(args)
            .current_dir(world.dir.path())
            .env_remove("WARREN_CONFIG")
            .env("WARREN_MCP_TOKEN", TOKEN)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, base) = mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap());
        let collected = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if let Some((_, url)) = line.split_once("serving on ") {
                    let url = url.split_whitespace().next().unwrap_or_default();
                    let _ = found.send(url.to_string());
                }
                collected.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let base = base
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| {
                panic!(
                    "warren a2a never said where it listens: {}",
                    stderr.lock().unwrap()
                )
            });
        A2aServer {
            child,
            base,
            stderr,
        }
    }

    pub(crate) fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for A2aServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `scenario` of the SDK's client against `url` (with the token unless
/// `token` is `None`, and `env`); its report.
async fn client(
    url: &str,
    scenario: &str,
    token: Option<&str>,
    env: &[(&str, &str)],
) -> (bool, Value) {
    let mut command = tokio::process::Command::new(python_a2a());
    command
        .arg(root().join("tests/fixtures/a2a-python/client.py"))
        .arg(url)
        .arg(scenario)
        .env("A2A_TIMEOUT", "60")
        .kill_on_drop(true);
    match token {
        Some(token) => command.env("A2A_TOKEN", token),
        None => command.env_remove("A2A_TOKEN"),
    };
    for (name, value) in env {
        command.env(name, value);
    }
    let output = tokio::time::timeout(Duration::from_secs(180), command.output())
        .await
        .unwrap_or_else(|_| panic!("the {scenario} scenario took over 180 s"))
        .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    let report = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (output.status.success(), report)
}

pub(crate) fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&output.stdout), text(&output.stderr)))
}

#[tokio::test]
async fn an_sdk_client_streams_a_tree_to_a_completed_task_that_warren_show_agrees_with() {
    let server = FakeLlm::start().await;
    script(&server);
    let world = project(&server);
    let a2a = A2aServer::start(&world, &["--profile", "main", "--profile", "worker"]);
    let url = format!("{}/a2a/main", a2a.base);
    let (ok, report) = client(
        &url,
        "stream",
        Some(TOKEN),
        &[("A2A_TEXT", "TASK-TREE: ask a worker")],
    )
    .await;
    assert!(ok, "{report}\n{}", a2a.log());
    assert_eq!(report["card_name"], "main", "{report}");
    assert_eq!(report["card_streaming"], true, "{report}");
    assert_eq!(
        report["card_interfaces"],
        json!([{"url": url, "binding": "JSONRPC", "version": "1.0"}]),
        "{report}"
    );
    assert_eq!(report["final_state"], "TASK_STATE_COMPLETED", "{report}");
    assert_eq!(report["artifact_texts"], json!(["ROOT-DONE"]), "{report}");
    assert_eq!(report["get_task_state"], "TASK_STATE_COMPLETED", "{report}");
    let kinds = report["event_kinds"].as_array().unwrap();
    assert_eq!(kinds[0], "task", "{report}");
    assert!(kinds.contains(&json!("artifact_update")), "{report}");
    let states: Vec<&str> = report["states"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(states.contains(&"TASK_STATE_WORKING"), "{report}");

    // The task is the run: `warren show` names it and lists both agents, and the
    // stream showed the sub-agent's progress by its id.
    let task_id = report["task_id"].as_str().unwrap();
    let shown = json_of(&warren(&world, &["show", task_id, "--json"]));
    let agents = shown["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{shown}");
    assert_eq!(agents[0]["text"], "ROOT-DONE", "{shown}");
    assert_eq!(agents[0]["task"], "TASK-TREE: ask a worker", "{shown}");
    let child = &agents[1];
    assert_eq!(
        (child["profile"].as_str(), child["state"].as_str()),
        (Some("worker"), Some("ok")),
        "{shown}"
    );
    let child_id = child["id"].as_str().unwrap();
    let lines: Vec<&str> = report["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(
        lines
            .iter()
            .any(|line| line.contains(child_id) && line.contains("worker")),
        "no progress of {child_id} in {lines:#?}"
    );

    // Sent without streaming, the task's history is the run's transcript: the
    // client's message first, then the root's turns and tool results as `warren
    // show --agent ROOT` prints them.
    let (ok, report) = client(
        &url,
        "send",
        Some(TOKEN),
        &[("A2A_TEXT", "TASK-TREE: again")],
    )
    .await;
    assert!(ok, "{report}\n{}", a2a.log());
    assert_eq!(report["final_state"], "TASK_STATE_COMPLETED", "{report}");
    assert_eq!(report["status_text"], "ROOT-DONE", "{report}");
    assert_transcript(&world, &report);
}

/// The history of the task `report` shows is its root agent's transcript, as
/// `warren show TASK --agent ROOT --json` has it.
fn assert_transcript(world: &World, report: &Value) {
    let history = report["history"].as_array().unwrap();
    let task = report["task_id"].as_str().unwrap();
    assert_eq!(history[0]["role"], "ROLE_USER", "{report}");
    let shown = json_of(&warren(world, &["show", task, "--json"]));
    assert_eq!(history[0]["text"], shown["agents"][0]["task"], "{report}");
    let root = shown["agents"][0]["id"].as_str().unwrap();
    let transcript = json_of(&warren(world, &["show", task, "--agent", root, "--json"]));
    let mut expected: Vec<Value> = Vec::new();
    for record in transcript["records"].as_array().unwrap() {
        match record["type"].as_str().unwrap() {
            "model_response" => {
                let mut data: Vec<Value> = Vec::new();
                for call in record["tool_calls"].as_array().into_iter().flatten() {
                    let arguments: Value =
                        serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
                    data.push(json!({"toolCall": {"id": call["id"], "name": call["name"], "arguments": arguments}}));
                }
                let mut message = json!({"role": "ROLE_AGENT", "text": record["text"]});
                if !data.is_empty() {
                    message["data"] = json!(data);
                }
                expected.push(message);
            }
            "tool_finished" => expected.push(json!({"role": "ROLE_AGENT", "text": "", "data": [
                {"toolResult": {"callId": record["call_id"], "outcome": record["outcome"], "content": record["content"]}}
            ]})),
            _ => {}
        }
    }
    expected.retain(|m| m["text"] != "" || m.get("data").is_some());
    assert!(expected.len() >= 3, "{transcript}");
    assert_eq!(
        &history[1..],
        &expected[..],
        "the history is not the transcript: {transcript}"
    );
}

#[tokio::test]
async fn a_task_outlives_its_server_in_the_journal_and_only_its_credential_reads_it() {
    let server = FakeLlm::start().await;
    script(&server);
    let world = project(&server);
    let other = "a2a-other-token-9876543210";
    std::fs::write(world.path("tokens"), format!("{TOKEN}\n{other}\n")).unwrap();
    let args = [
        "--profile",
        "main",
        "--profile",
        "worker",
        "--token-file",
        "tokens",
    ];
    let a2a = A2aServer::start(&world, &args);
    let url = format!("{}/a2a/main", a2a.base);
    let env = [("A2A_TEXT", "TASK-TREE: remember this")];
    let (ok, sent) = client(&url, "send", Some(TOKEN), &env).await;
    assert!(ok, "{sent}\n{}", a2a.log());
    assert_eq!(sent["final_state"], "TASK_STATE_COMPLETED", "{sent}");
    let task = sent["task_id"].as_str().unwrap().to_string();
    // Killed, and started again: the task is read from its run's journal.
    drop(a2a);
    let a2a = A2aServer::start(&world, &args);
    let url = format!("{}/a2a/main", a2a.base);
    let env = [("A2A_TASK_ID", task.as_str())];
    let (ok, got) = client(&url, "get", Some(TOKEN), &env).await;
    assert!(ok, "{got}\n{}", a2a.log());
    assert_eq!(got["task_id"], task.as_str(), "{got}");
    assert_eq!(got["state"], "TASK_STATE_COMPLETED", "{got}");
    assert_eq!(got["artifact_texts"], json!(["ROOT-DONE"]), "{got}");
    assert_eq!(got["status_text"], "ROOT-DONE", "{got}");
    assert_eq!(got["history"], sent["history"], "{got}");
    assert_transcript(&world, &got);
    for refused in ["send_error", "cancel_error"] {
        let error = got[refused].as_str().unwrap_or_default();
        assert!(
            error.contains("no longer run by this server"),
            "{refused}: {got}"
        );
    }
    // Another credential of the same server does not see it.
    let (ok, foreign) = client(&url, "get", Some(other), &env).await;
    assert!(ok, "{foreign}");
    let error = foreign["get_error"].as_str().unwrap_or_default();
    assert!(error.contains("no task"), "{foreign}");
    assert!(foreign.get("state").is_none(), "{foreign}");

    // ListTasks: the journaled task and one of this server, newest first, a page
    // at a time; filtered by state; none for the other credential.
    let (ok, second) = client(
        &url,
        "send",
        Some(TOKEN),
        &[("A2A_TEXT", "TASK-TREE: and again")],
    )
    .await;
    assert!(ok, "{second}");
    let (ok, listed) = client(&url, "list", Some(TOKEN), &[]).await;
    assert!(ok, "{listed}\n{}", a2a.log());
    let pages = listed["pages"].as_array().unwrap();
    let ids: Vec<&Value> = pages.iter().map(|p| &p["ids"][0]).collect();
    assert_eq!(ids, [&second["task_id"], &json!(task)], "{listed}");
    assert!(
        pages
            .iter()
            .all(|p| p["total"] == 2 && p["history"] == json!([0])),
        "{listed}"
    );
    let completed = listed["completed"].as_array().unwrap();
    assert_eq!(completed.len(), 2, "{listed}");
    assert!(
        completed
            .iter()
            .all(|t| t["artifact_texts"] == json!(["ROOT-DONE"])),
        "{listed}"
    );
    assert!(
        completed
            .iter()
            .all(|t| t["history"].as_array().unwrap().len() == 2),
        "{listed}"
    );
    let (ok, foreign) = client(&url, "list", Some(other), &[]).await;
    assert!(ok, "{foreign}");
    assert_eq!(
        foreign["pages"],
        json!([{"ids": [], "states": [], "total": 0, "history": []}]),
        "{foreign}"
    );
}

#[tokio::test]
async fn an_sdk_client_cancels_a_task_and_its_tree_stops() {
    let server = FakeLlm::start().await;
    script(&server);
    let world = project(&server);
    let a2a = A2aServer::start(&world, &[]);
    let (ok, report) = client(
        &format!("{}/a2a/main", a2a.base),
        "cancel",
        Some(TOKEN),
        &[],
    )
    .await;
    assert!(ok, "{report}\n{}", a2a.log());
    let after_send = report["states"]["after_send"].as_str().unwrap();
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&after_send),
        "{report}"
    );
    assert_eq!(report["final_state"], "TASK_STATE_CANCELED", "{report}");
    assert_eq!(
        report["states"]["cancel_response"], "TASK_STATE_CANCELED",
        "{report}"
    );
    // A second cancel, and an unknown task, are errors the SDK raises.
    assert!(report["second_cancel_error"].is_string(), "{report}");
    assert!(report["unknown_task_error"].is_string(), "{report}");
    let shown = json_of(&warren(
        &world,
        &["show", report["task_id"].as_str().unwrap(), "--json"],
    ));
    assert_eq!(shown["agents"][0]["state"], "cancelled", "{shown}");
}

#[tokio::test]
async fn an_approval_waits_as_input_required_and_the_clients_reply_answers_it() {
    let server = FakeLlm::start().await;
    script(&server);
    let world = project(&server);
    let a2a = A2aServer::start(&world, &[]);
    let url = format!("{}/a2a/main", a2a.base);

    let env = [
        ("A2A_TEXT", "TASK-WRITE the notes"),
        ("A2A_REPLIES", "approve"),
    ];
    let (ok, report) = client(&url, "reply", Some(TOKEN), &env).await;
    assert!(ok, "{report}\n{}", a2a.log());
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps[0]["state"], "TASK_STATE_INPUT_REQUIRED", "{report}");
    let asked = steps[0]["status_text"].as_str().unwrap();
    assert!(
        asked.contains("write_file") && asked.contains("/out/a.txt"),
        "{asked}"
    );
    assert_eq!(steps[1]["state"], "TASK_STATE_COMPLETED", "{report}");
    assert_eq!(report["artifact_texts"], json!(["ROOT-DONE"]), "{report}");
    assert_eq!(
        std::fs::read_to_string(world.path("out/a.txt")).unwrap(),
        "APPROVED-BY-A2A"
    );
    // The reply is in the history, after the request.
    let history = report["history"].as_array().unwrap();
    assert!(
        history
            .iter()
            .any(|m| m["role"] == "ROLE_USER" && m["text"] == "approve"),
        "{report}"
    );

    std::fs::remove_file(world.path("out/a.txt")).unwrap();
    let env = [
        ("A2A_TEXT", "TASK-WRITE again"),
        ("A2A_REPLIES", "deny not today"),
    ];
    let (ok, report) = client(&url, "reply", Some(TOKEN), &env).await;
    assert!(ok, "{report}\n{}", a2a.log());
    assert_eq!(report["final_state"], "TASK_STATE_COMPLETED", "{report}");
    assert!(!world.path("out/a.txt").exists(), "a denied write ran");
    let told = server
        .requests()
        .into_iter()
        .map(|r| newest(&r.body))
        .any(|newest| newest.contains("not today"));
    assert!(told, "the model was not told the reason of the denial");
}

/// A raw JSON-RPC request to `url`.
async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn the_token_the_origin_and_the_protocol_version_guard_the_server() {
    let server = FakeLlm::start().await;
    script(&server);
    let world = project(&server);
    let a2a = A2aServer::start(&world, &[]);
    let url = format!("{}/a2a/main", a2a.base);
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}});
    let bearer = format!("Bearer {TOKEN}");

    // The card is public (it says how to authenticate); nothing else is.
    let card = reqwest::get(format!("{}/.well-known/agent-card.json", a2a.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let card: Value = serde_json::from_str(&card).unwrap();
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert_eq!(post(&url, &[], &get).await.0, 401);
    assert_eq!(
        post(
            &url,
            &[("authorization", "Bearer wrong-token-0123456789")],
            &get
        )
        .await
        .0,
        401
    );
    let (ok, report) = client(&url, "send", None, &[]).await;
    assert!(
        !ok && report["error"].as_str().unwrap().contains("401"),
        "{report}"
    );

    let origin = [
        ("authorization", bearer.as_str()),
        ("origin", "http://evil.example"),
    ];
    assert_eq!(post(&url, &origin, &get).await.0, 403);

    let (status, body) = post(&url, &[("authorization", &bearer)], &get).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["code"],
        -32001,
        "{body}"
    );
    let old = [("authorization", bearer.as_str()), ("a2a-version", "0.3")];
    let (_, body) = post(&url, &old, &get).await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["code"],
        -32009,
        "{body}"
    );
    let legacy = json!({"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {}});
    let (_, body) = post(&url, &[("authorization", &bearer)], &legacy).await;
    let error = &serde_json::from_str::<Value>(&body).unwrap()["error"];
    assert_eq!(error["code"], -32601, "{body}");
    assert!(
        error["message"].as_str().unwrap().contains("SendMessage"),
        "{body}"
    );
    assert!(
        a2a.log()
            .contains("refused a request without this server's bearer token"),
        "{}",
        a2a.log()
    );
}

/// The SDK's echo agent (`server.py`) on a free port, requiring `token`; its URL.
pub(crate) struct EchoAgent {
    child: Child,
    pub(crate) url: String,
    pub(crate) log: Arc<Mutex<String>>,
}

impl EchoAgent {
    pub(crate) fn start(token: &str) -> EchoAgent {
        EchoAgent::start_with(token, None)
    }

    /// With `wire`: every request and response is appended to that file.
    pub(crate) fn start_with(token: &str, wire: Option<&std::path::Path>) -> EchoAgent {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(python_a2a())
            .arg(root().join("tests/fixtures/a2a-python/server.py"))
            .arg(port.to_string())
            .env("A2A_TOKEN", token)
            .envs(wire.map(|path| ("A2A_WIRE_LOG", path)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let collected = log.clone();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                collected.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(
            line.starts_with("listening http://"),
            "server.py said {line:?}: {}",
            log.lock().unwrap()
        );
        EchoAgent {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        }
    }
}

impl Drop for EchoAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The model: a task holding `trigger` spawns `echo` on `task` and waits; given a
/// result that holds `expect` the root answers `yes`, else `ROOT-MISSED`.
pub(crate) fn echo_script(
    trigger: &'static str,
    task: &'static str,
    expect: &'static str,
    yes: &'static str,
) -> crate::fake_llm::Responder {
    Arc::new(move |body: &Value| {
        let newest = newest(body);
        if newest.contains("\"role\":\"tool\"") {
            let said = if newest.contains(expect) {
                yes
            } else {
                "ROOT-MISSED"
            };
            return Some(Reply::answer(said, (10, 5)));
        }
        newest.contains(trigger).then(|| {
            let args = json!({"profile": "echo", "task": task, "background": false});
            Reply::tool_calls(&[("spawn_agent", args)], (10, 5))
        })
    })
}

/// A project whose `main` may spawn `echo`, the SDK's agent at `url`.
pub(crate) fn remote_project(server: &FakeLlm, url: &str) -> World {
    let world = World::new();
    world.config(&format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{base}"
model = "fake-model"
stream = false
max_retries = 0

[profiles.main]
model = "fake"
tools = ["read_file"]

[profiles.echo]
description = "Echoes, served by the A2A Python SDK"
timeout_s = 60
[profiles.echo.a2a]
url = "{url}"
token_env = "ECHO_A2A_TOKEN"
unsandboxed = true
"#,
        base = server.base_url,
    ));
    world
}

#[tokio::test]
async fn a_parent_spawns_a_remote_a2a_agent_served_by_the_sdk_and_awaits_its_answer() {
    const ECHO_TOKEN: &str = "echo-token-0123456789abcdef";
    let echo = EchoAgent::start(ECHO_TOKEN);
    let server = FakeLlm::start().await;
    server.respond_with(echo_script(
        "ASK-ECHO",
        "hello from warren",
        "ECHO: hello from warren",
        "ROOT-SAW-ECHO",
    ));
    let world = remote_project(&server, &echo.url);
    // Async: the model is served by this test's runtime.
    let output = tokio::process::Command::new(WARREN)
        .args(["run", "--json", "ASK-ECHO"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("ECHO_A2A_TOKEN", ECHO_TOKEN)
        .env("RUST_LOG", "info")
        .output()
        .await
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(
        output.status.success(),
        "{}\n{stderr}\necho: {}",
        text(&output.stdout),
        echo.log.lock().unwrap()
    );
    let shown = json_of(&warren(&world, &["show", "last", "--json"]));
    let agents = shown["agents"].as_array().unwrap();
    assert_eq!(agents[0]["text"], "ROOT-SAW-ECHO", "{shown}");
    let child = &agents[1];
    assert_eq!(
        (child["profile"].as_str(), child["state"].as_str()),
        (Some("echo"), Some("ok")),
        "{shown}"
    );
    assert_eq!(child["text"], "ECHO: hello from warren", "{shown}");
    // The token went to the agent (it refuses requests without it) and never to a log.
    assert!(!stderr.contains(ECHO_TOKEN), "{stderr}");

    // Without the token's variable the child fails, saying which variable to set.
    let output = tokio::process::Command::new(WARREN)
        .args(["run", "--json", "ASK-ECHO"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env_remove("ECHO_A2A_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let shown = json_of(&warren(&world, &["show", "last", "--json"]));
    let child = &shown["agents"][1];
    assert_eq!(child["state"], "error", "{shown}");
    assert!(
        child["error"]
            .as_str()
            .unwrap_or_default()
            .contains("ECHO_A2A_TOKEN"),
        "{shown}"
    );
}

#[tokio::test]
async fn cancelling_a_remote_child_cancels_its_a2a_task() {
    const ECHO_TOKEN: &str = "echo-token-0123456789abcdef";
    let echo = EchoAgent::start(ECHO_TOKEN);
    let server = FakeLlm::start().await;
    let log = echo.log.clone();
    let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    server.respond_with(Arc::new(move |body: &Value| {
        let newest = newest(body);
        if newest.contains("Started job")
            && !cancelled.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            // Once the remote task exists (a blocking wait: warren and the agent are
            // other processes).
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !log.lock().unwrap().contains("SendStreamingMessage")
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            let id = newest
                .split("Started job ")
                .nth(1)?
                .split(|c: char| !c.is_ascii_alphanumeric())
                .next()?
                .to_string();
            return Some(Reply::tool_calls(
                &[("cancel_agent", json!({"job_id": id}))],
                (10, 5),
            ));
        }
        if newest.contains("ASK-HANG") {
            let args = json!({"profile": "echo", "task": "HANG please"});
            return Some(Reply::tool_calls(&[("spawn_agent", args)], (10, 5)));
        }
        Some(Reply::answer("ROOT-DONE", (10, 5)))
    }));
    let world = remote_project(&server, &echo.url);
    let output = tokio::process::Command::new(WARREN)
        .args(["run", "--json", "ASK-HANG"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("ECHO_A2A_TOKEN", ECHO_TOKEN)
        .output()
        .await
        .unwrap();
    let asked: Vec<String> = server.requests().iter().map(|r| newest(&r.body)).collect();
    assert!(
        output.status.success(),
        "{}\n{asked:#?}",
        text(&output.stderr)
    );
    let shown = json_of(&warren(&world, &["show", "last", "--json"]));
    assert_eq!(shown["agents"][1]["state"], "cancelled", "{shown}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !echo.log.lock().unwrap().contains("CancelTask") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        echo.log.lock().unwrap().contains("CancelTask"),
        "{}",
        echo.log.lock().unwrap()
    );
}

#[test]
fn a_remote_profile_must_opt_in_and_may_not_write_what_warren_cannot_enforce() {
    for (table, says) in [
        ("url = \"http://127.0.0.1:9\"", "unsandboxed = true"),
        (
            "url = \"ftp://x\"\nunsandboxed = true",
            "http:// or https://",
        ),
        (
            "url = \"http://127.0.0.1:9\"\ntoken_env = \"A B\"\nunsandboxed = true",
            "token_env",
        ),
    ] {
        let world = World::new();
        world.config(&format!("[profiles.echo.a2a]\n{table}\n"));
        let output = warren(&world, &["agents"]);
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
        assert!(
            text(&output.stderr).contains(says),
            "{}",
            text(&output.stderr)
        );
    }
    let world = World::new();
    world.config("[profiles.echo]\ntools = [\"read_file\"]\n[profiles.echo.a2a]\nurl = \"http://127.0.0.1:9\"\nunsandboxed = true\n");
    let output = warren(&world, &["agents"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("profiles.echo.tools") && stderr.contains("refused"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_large_body_and_tasks_past_the_limit_are_refused_before_any_run() {
    let server = FakeLlm::start().await;
    script(&server);
    let world = project(&server);
    let a2a = A2aServer::start(&world, &["--max-tasks", "1"]);
    let url = format!("{}/a2a/main", a2a.base);
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("authorization", bearer.as_str())];

    // A body past 1 MiB is refused with 413, and no run is made for it.
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"role": "ROLE_USER", "parts": [{"text": "x".repeat(2 << 20)}]}
    }});
    assert_eq!(post(&url, &auth, &huge).await.0, 413);

    // One task per credential: the second is refused, naming the flag.
    let send = |text: &str| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {
            "message": {"role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": true}
        }})
    };
    let (_, first) = post(&url, &auth, &send("HANG first")).await;
    assert!(first.contains("\"task\""), "{first}");
    let (_, second) = post(&url, &auth, &send("HANG second")).await;
    let error = &serde_json::from_str::<Value>(&second).unwrap()["error"];
    assert!(
        error["message"].as_str().unwrap().contains("--max-tasks 1"),
        "{second}"
    );
    // The refused task never reached a model; the admitted one did.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let asked: Vec<String> = server.requests().iter().map(|r| newest(&r.body)).collect();
    assert!(asked.iter().any(|n| n.contains("HANG first")), "{asked:#?}");
    assert!(
        !asked.iter().any(|n| n.contains("HANG second")),
        "{asked:#?}"
    );
}

#[tokio::test]
async fn a_remote_agents_card_past_its_bound_fails_the_child_naming_it() {
    // 2 MiB of card: more than a remote agent's answer may hold.
    let card: &'static str =
        Box::leak(format!("{{\"name\": \"{}\"}}", "x".repeat(2 << 20)).into_boxed_str());
    let (port, _) = crate::support::http_server(card).await;
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(|body: &Value| {
        let newest = newest(body);
        if newest.contains("ASK-ECHO") {
            let args = json!({"profile": "echo", "task": "hello", "background": false});
            return Some(Reply::tool_calls(&[("spawn_agent", args)], (10, 5)));
        }
        Some(Reply::answer("ROOT-DONE", (10, 5)))
    }));
    let world = remote_project(&server, &format!("http://127.0.0.1:{port}"));
    let output = tokio::process::Command::new(WARREN)
        .args(["run", "--json", "ASK-ECHO"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("ECHO_A2A_TOKEN", "unused-token-0123456789")
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let shown = json_of(&warren(&world, &["show", "last", "--json"]));
    let child = &shown["agents"][1];
    assert_eq!(child["state"], "error", "{shown}");
    assert!(
        child["error"]
            .as_str()
            .unwrap_or_default()
            .contains("1048576 bytes"),
        "{shown}"
    );
}
