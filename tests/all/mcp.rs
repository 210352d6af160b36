//! `warren mcp` driven by clients nobody here wrote: the official MCP Python SDK
//! (`tests/fixtures/mcp-python/client.py`, over stdio and over Streamable HTTP) and the
//! MCP Inspector's CLI mode, against the fake LLM server; plus raw JSON-RPC over stdio
//! where the test must see every byte (stdout carries only the protocol, closing stdin
//! cancels the session's agents) and the configuration errors that stop it at start.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{root, text, World};

/// The warren binary under test.
const WARREN: &str = env!("CARGO_BIN_EXE_warren");
/// Longest a client scenario may run.
const SCENARIO_LIMIT: Duration = Duration::from_secs(240);

/// A text answer with some usage.
fn answer(text: &str) -> Reply {
    Reply::answer(text, (1200, 34))
}

/// A turn calling one tool.
fn call(tool: &str, arguments: Value) -> Reply {
    Reply::tool_calls(&[(tool, arguments)], (1000, 20))
}

fn delayed(ms: u64, reply: Reply) -> Reply {
    Reply::Delayed(Duration::from_millis(ms), Box::new(reply))
}

/// A project whose `main` profile (the MCP client's) reads `docs/` and may spawn
/// `worker`s that read it too, all on the fake model.
pub(crate) fn project(server: &FakeLlm) -> World {
    let world = World::new();
    let config = format!(
        r#"
[plugins]
cache_dir = {cache:?}

[models.fake]
provider = "openai"
base_url = "{url}"
model = "fake-model"
stream = false
max_retries = 0
price = {{ input_per_mtok = 1.0, output_per_mtok = 1.0 }}

[defaults]
max_concurrent = 4

[profiles.main]
description = "What the MCP client gets"
tools = ["read_file", "list_dir", "write_file"]
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]

[profiles.worker]
description = "Reads the docs"
tools = ["read_file", "list_dir"]
[profiles.worker.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]
"#,
        cache = crate::support::cache_dir(),
        url = server.base_url,
    );
    std::fs::write(world.path("warren.toml"), config).unwrap();
    world
}

/// A Python with the official MCP SDK (pinned in
/// `tests/fixtures/mcp-python/requirements.txt`), in a venv under `target/`.
pub(crate) fn python_mcp() -> PathBuf {
    crate::guests::python_venv(
        "tests/fixtures/mcp-python",
        "target/mcp-python",
        "the MCP client tests",
    )
}

/// How the Python client reaches warren.
#[derive(Clone, Copy, Debug)]
enum Transport {
    Stdio,
    Http,
}

/// The bearer token test servers are given, and clients send.
pub(crate) const TOKEN: &str = "test-token-0123456789abcdef";

/// `warren mcp --http 127.0.0.1:0` in `world`, with its stderr collected.
pub(crate) struct HttpServer {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
    /// The bearer token clients send: the one it was given, or the one it printed.
    pub(crate) token: Option<String>,
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    pub(crate) fn start(world: &World) -> HttpServer {
        HttpServer::start_with(world, &[], None)
    }

    /// As [`HttpServer::start`], with `args` after `warren mcp --http 127.0.0.1:0`
    /// and, when `descriptors` is given, that many open files at most (`ulimit -n`).
    pub(crate) fn start_with(world: &World, args: &[&str], descriptors: Option<u32>) -> HttpServer {
        HttpServer::launch(world, args, descriptors, Some(TOKEN))
    }

    /// As [`HttpServer::start_with`], with `token` in `WARREN_MCP_TOKEN` (`None`:
    /// the variable unset, so the server generates one unless told otherwise).
    pub(crate) fn launch(
        world: &World,
        args: &[&str],
        descriptors: Option<u32>,
        token: Option<&str>,
    ) -> HttpServer {
        HttpServer::launch_with(world, args, descriptors, token, &[])
    }

    /// As [`HttpServer::launch`], with `env` set in the server's environment (`None`:
    /// the variable removed).
    pub(crate) fn launch_with(
        world: &World,
        args: &[&str],
        descriptors: Option<u32>,
        token: Option<&str>,
        env: &[(&str, Option<&std::ffi::OsStr>)],
    ) -> HttpServer {
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
        match token {
            Some(token) => command.env("WARREN_MCP_TOKEN", token),
            None => command.env_remove("WARREN_MCP_TOKEN"),
        };
        for (name, value) in env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        let mut child = command
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(args)
            .current_dir(world.dir.path())
            .env_remove("WARREN_CONFIG")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, url) = mpsc::channel();
        let (printed, generated) = mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap());
        let collected = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if let Some(at) = line.find("http://") {
                    let _ = found.send(line[at..].trim().to_string());
                }
                if let Some((_, token)) = line.split_once("this server's token") {
                    let token = token.rsplit(' ').next().unwrap_or_default();
                    let _ = printed.send(token.to_string());
                }
                collected.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let url = url
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| {
                panic!(
                    "warren mcp --http never said where it listens: {}",
                    stderr.lock().unwrap()
                )
            });
        // Printed before the address, when generated.
        let token = token
            .map(str::to_string)
            .or_else(|| generated.try_recv().ok());
        HttpServer {
            child,
            url,
            token,
            stderr,
        }
    }

    /// Stops it; returns what it wrote to stdout (which must stay empty).
    pub(crate) fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut stdout = String::new();
        let _ = self
            .child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout);
        stdout
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `scenario` of the Python client against `warren mcp` in `world` (over stdio,
/// or through `server`); returns its report.
pub(crate) async fn client(world: &World, server: Option<&HttpServer>, scenario: &str) -> Value {
    let python = python_mcp();
    let script = root().join("tests/fixtures/mcp-python/client.py");
    let mut command = tokio::process::Command::new(python);
    command.arg(script).current_dir(world.dir.path());
    match server {
        None => command
            .arg("--stdio")
            .arg(WARREN)
            .arg(world.path("warren.toml")),
        Some(server) => {
            if let Some(token) = &server.token {
                command.env("WARREN_MCP_TOKEN", token);
            }
            command.arg("--http").arg(&server.url)
        }
    };
    command.arg(scenario).kill_on_drop(true);
    let output = tokio::time::timeout(SCENARIO_LIMIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("the {scenario} scenario took over {SCENARIO_LIMIT:?}"))
        .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    let server_log = server.map_or_else(String::new, |s| s.stderr.lock().unwrap().clone());
    assert!(
        output.status.success(),
        "client.py {scenario} failed:\n{stdout}\n{stderr}\nserver:\n{server_log}"
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(report["server"], "warren", "{report}");
    report
}

/// Runs `scenario` over `transport` in `world`; for HTTP, also checks that the
/// server never wrote to stdout.
async fn scenario(world: &World, transport: Transport, scenario: &str) -> Value {
    match transport {
        Transport::Stdio => client(world, None, scenario).await,
        Transport::Http => {
            let server = HttpServer::start(world);
            let report = client(world, Some(&server), scenario).await;
            assert_eq!(server.stop(), "", "warren mcp --http wrote to stdout");
            report
        }
    }
}

async fn tools_listed_allowed_and_denied(transport: Transport) {
    let server = FakeLlm::start().await;
    let world = project(&server);
    let report = scenario(&world, transport, "tools").await;
    assert_eq!(
        report["tools"],
        json!([
            "list_dir",
            "read_file",
            "write_file",
            "spawn_agent",
            "await_agents",
            "cancel_agent",
            "message_agent",
            "list_agents"
        ]),
        "{report}"
    );
    assert!(
        report["descriptions"]["spawn_agent"]
            .as_str()
            .unwrap()
            .contains("returns a job id at once and you get its result with await_agents;"),
        "{report}"
    );
    assert_eq!(
        report["schemas"]["spawn_agent"]["properties"]["profile"]["enum"],
        json!(["main", "worker"]),
        "{report}"
    );
    assert_eq!(report["allowed"]["error"], false, "{report}");
    assert_eq!(
        report["allowed"]["text"],
        "alpha\nthe quick brown fox\nomega\n"
    );
    // The profile mounts docs/ read-only: the sandbox refuses, and says why.
    assert_eq!(report["denied"]["error"], true, "{report}");
    let denied = report["denied"]["text"].as_str().unwrap();
    assert!(
        denied.contains("denied") && denied.contains("/docs/new.md"),
        "{denied}"
    );
    assert!(!world.path("docs/new.md").exists());
    assert!(
        report["unknown"]
            .as_str()
            .unwrap()
            .contains("unknown tool `no_such_tool`"),
        "{report}"
    );
    assert!(server.requests().is_empty(), "no model was called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_lists_and_calls_tools_over_stdio() {
    tools_listed_allowed_and_denied(Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_lists_and_calls_tools_over_http() {
    tools_listed_allowed_and_denied(Transport::Http).await;
}

/// A typed component's functions are MCP tools like any other: listed with the
/// schema derived from their WIT types, called in the sandbox, bad arguments answered
/// with the path of the bad field.
async fn typed_tools(transport: Transport) {
    let server = FakeLlm::start().await;
    let world = project(&server);
    let config = std::fs::read_to_string(world.path("warren.toml")).unwrap();
    let typed = &crate::support::guests().typed_rust;
    std::fs::write(
        world.path("warren.toml"),
        config
            .replacen(
                "[plugins]\n",
                &format!("[plugins]\nfiles = [{typed:?}]\n"),
                1,
            )
            .replace(
                r#"tools = ["read_file", "list_dir", "write_file"]"#,
                r#"tools = ["read_file", "scalars_*"]"#,
            ),
    )
    .unwrap();
    let report = scenario(&world, transport, "typed").await;
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"scalars_negate"), "{tools:?}");
    assert!(tools.contains(&"spawn_agent"), "{tools:?}");
    assert_eq!(
        report["schemas"]["scalars_negate"]["properties"]["value"]["type"], "boolean",
        "{report}"
    );
    assert_eq!(report["good"], json!({"error": false, "text": "false"}));
    assert_eq!(report["bad"]["error"], true);
    let bad = report["bad"]["text"].as_str().unwrap();
    assert!(
        bad.contains(r#"$.value: expected a boolean, got "yes""#),
        "{bad}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_calls_typed_component_tools_over_stdio() {
    typed_tools(Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_calls_typed_component_tools_over_http() {
    typed_tools(Transport::Http).await;
}

/// Progress messages of one call, checked to be increasing.
fn progress_messages(report: &Value, key: &str) -> Vec<String> {
    let updates = report[key].as_array().unwrap();
    let values: Vec<f64> = updates
        .iter()
        .map(|u| u["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress must increase: {values:?}"
    );
    updates
        .iter()
        .map(|u| u["message"].as_str().unwrap().to_string())
        .collect()
}

async fn sub_agents_with_progress_and_logs(transport: Transport) {
    let server = FakeLlm::start().await;
    server.route(
        "FG-TASK",
        delayed(200, call("read_file", json!({"path": "/docs/notes.md"}))),
    );
    server.route(
        "quick brown fox",
        answer("FG-DONE: the notes mention a fox"),
    );
    server.route("BG-TASK", delayed(800, answer("BG-DONE: slow but done")));
    let world = project(&server);
    let report = scenario(&world, transport, "agents").await;

    let foreground = report["foreground"]["text"].as_str().unwrap();
    assert_eq!(report["foreground"]["error"], false, "{report}");
    assert!(
        foreground.contains(": OK] worker · 2 turns · 2,254 tokens")
            && foreground.contains("FG-DONE"),
        "{foreground}"
    );
    let progress = progress_messages(&report, "foreground_progress");
    let seen = |part: &str| progress.iter().any(|m| m.contains(part));
    assert!(
        seen("] turn 1 · calling read_file · 1,020 tokens · $0.0010"),
        "{progress:#?}"
    );
    assert!(seen("] turn 2 · "), "{progress:#?}");
    assert!(
        progress
            .last()
            .unwrap()
            .contains("] ok · 2 turns · 2,254 tokens · $0.0023"),
        "{progress:#?}"
    );

    // A client has no model turns to push results into: it is told to await.
    let started = report["started"].as_str().unwrap();
    assert!(
        started.ends_with(
            "in the background; get its result with await_agents (list_agents shows where it is)."
        ),
        "{started}"
    );
    let background = report["background"].as_str().unwrap();
    let awaited = report["awaited"].as_str().unwrap();
    assert!(
        awaited.starts_with(&format!("[{background}: OK] worker")) && awaited.contains("BG-DONE"),
        "{awaited}"
    );
    let progress = progress_messages(&report, "await_progress");
    assert!(
        progress
            .last()
            .is_some_and(|m| m.starts_with(&format!("[{background} worker] ok · 1 turns"))),
        "{progress:#?}"
    );
    let listed = report["listed"].as_str().unwrap();
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(
        listed.lines().all(|l| l.contains(" · worker · ok · ")),
        "{listed}"
    );

    // The client asked for info: agents' records reach it, tagged with their logger.
    let logs = report["logs"].as_array().unwrap();
    assert!(
        logs.iter().any(|l| l["level"] == "info"
            && l["logger"]
                .as_str()
                .is_some_and(|logger| logger.starts_with("warren::agent"))
            && l["data"]
                .as_str()
                .unwrap_or_default()
                .contains("agent finished")),
        "{logs:#?}"
    );
    assert!(logs.iter().all(|l| l["level"] != "debug"), "{logs:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_spawns_and_awaits_sub_agents_with_progress_over_stdio() {
    sub_agents_with_progress_and_logs(Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_spawns_and_awaits_sub_agents_with_progress_over_http() {
    sub_agents_with_progress_and_logs(Transport::Http).await;
}

/// An `await_agents` without `timeout_s` returns within the client's own timeout (the
/// Python client gives each call the Agents SDK's 5 s) while its agent is provably
/// still running (its model's answer is held until the client has its first answer),
/// with the agent's RUNNING block and the advice to call again; a later await gets
/// the result, with progress. Before the bound, the first await waited for the agent
/// and the client's call timed out.
async fn bounded_awaits(transport: Transport) {
    let server = FakeLlm::start().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    server.route(
        "BOUND-TASK",
        Reply::Gated(gate.clone(), Box::new(answer("BOUND-DONE: at last"))),
    );
    server.route("BOUND-RELEASE", answer("released"));
    let world = project(&server);
    let release = async {
        let asked = |r: &crate::fake_llm::Recorded| r.body.to_string().contains("BOUND-RELEASE");
        while !server.requests().iter().any(asked) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The client calls the later await as soon as that spawn is answered: give it
        // time to be under way, so the agent ends while it waits (and its end is
        // forwarded as progress), not before it was called.
        tokio::time::sleep(Duration::from_millis(500)).await;
        gate.add_permits(1);
        std::future::pending::<()>().await;
    };
    let report = tokio::select! {
        report = scenario(&world, transport, "bounded") => report,
        () = release => unreachable!("the release never ends"),
    };
    let held = report["held"].as_str().unwrap();
    assert_eq!(report["first"]["error"], false, "{report}");
    let first = report["first"]["text"].as_str().unwrap();
    assert!(
        first.starts_with(&format!("[{held}: RUNNING] worker")),
        "{first}"
    );
    assert!(
        first.ends_with(&format!(
            "Still running: {held}. Call await_agents again to keep waiting."
        )),
        "{first}"
    );
    let later = report["later"].as_array().unwrap();
    let last = later.last().unwrap().as_str().unwrap();
    assert!(
        last.starts_with(&format!("[{held}: OK] worker")) && last.contains("BOUND-DONE"),
        "{later:?}"
    );
    assert!(!last.contains("Still running"), "{last}");
    let progress = progress_messages(&report, "later_progress");
    assert!(
        progress
            .iter()
            .any(|m| m.starts_with(&format!("[{held} worker] ok · 1 turns"))),
        "{progress:#?}"
    );
    assert!(
        report["description"]
            .as_str()
            .unwrap()
            .contains("Without timeout_s it waits 4 s at most"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_await_without_timeout_returns_running_agents_within_the_client_timeout_over_stdio() {
    bounded_awaits(Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_await_without_timeout_returns_running_agents_within_the_client_timeout_over_http() {
    bounded_awaits(Transport::Http).await;
}

/// Waits up to `limit` for `condition`.
pub(crate) async fn eventually(limit: Duration, condition: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    condition()
}

async fn cancellation(transport: Transport) {
    let server = FakeLlm::start().await;
    server.route("HANG-ONE", Reply::Hang);
    server.route("HANG-TWO", Reply::Hang);
    let world = project(&server);
    let report = scenario(&world, transport, "cancel").await;

    let first = report["first"].as_str().unwrap();
    assert_eq!(
        report["cancelled"],
        format!("Cancelled job {first} (worker) and its descendants."),
        "{report}"
    );
    assert!(
        report["awaited"]
            .as_str()
            .unwrap()
            .starts_with(&format!("[{first}: CANCELLED] worker · cancelled")),
        "{report}"
    );
    // The abandoned foreground call: it had reported progress, the client cancelled
    // it, and the agent it started was cancelled with it.
    assert!(!progress_messages(&report, "foreground_progress").is_empty());
    assert_eq!(report["foreground_outcome"]["cancelled"], true, "{report}");
    let listed = report["listed"].as_str().unwrap();
    let second = listed
        .lines()
        .find(|l| !l.starts_with(first))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(second.contains(" · worker · cancelled · "), "{listed}");
    assert!(
        report["seconds_to_cancel"].as_f64().unwrap() < 10.0,
        "{report}"
    );
    // No model request is left hanging. (Whether each agent got as far as its request
    // before it was cancelled depends on timing: at least the foreground one did, as
    // the client cancelled it once it reported its first turn.)
    assert!(!server.requests().is_empty());
    assert!(
        eventually(Duration::from_secs(10), || server
            .hang_dropped
            .load(Ordering::SeqCst))
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_cancels_sub_agents_and_calls_over_stdio() {
    cancellation(Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_cancels_sub_agents_and_calls_over_http() {
    cancellation(Transport::Http).await;
}

/// A client that ends its HTTP session (the SDK sends DELETE on exit) leaves nothing
/// running: its agents are cancelled while the server serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_session_that_ends_cancels_its_agents() {
    let server = FakeLlm::start().await;
    server.route("HANG-LEAVE", Reply::Hang);
    let world = project(&server);
    let http = HttpServer::start(&world);
    let report = client(&world, Some(&http), "leave").await;
    assert!(
        report["listed"].as_str().unwrap().contains(" · running · "),
        "{report}"
    );
    assert!(
        eventually(Duration::from_secs(10), || server
            .hang_dropped
            .load(Ordering::SeqCst))
        .await,
        "the session's agent still waits on the model: {}",
        http.stderr.lock().unwrap()
    );
    // Still serving other clients.
    let again = client(&world, Some(&http), "tools").await;
    assert_eq!(again["allowed"]["error"], false);
}

/// A model whose `api_key_env` variable the client did not pass on (the SDK starts
/// servers with a minimal environment): `warren mcp` starts anyway and serves the
/// tools that need no model; a spawn on that model is a tool error naming the
/// variable and where to add it, and the session's first log message says the same.
/// Before, warren mcp exited 2 at start and the client saw only a closed connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_model_key_leaves_the_tools_served_and_refuses_spawns() {
    const VARIABLE: &str = "WARREN_TEST_ABSENT_KEY";
    let server = FakeLlm::start().await;
    let world = project(&server);
    let config = std::fs::read_to_string(world.path("warren.toml")).unwrap();
    let config = config.replace(
        "model = \"fake-model\"\n",
        &format!("model = \"fake-model\"\napi_key_env = \"{VARIABLE}\"\n"),
    );
    std::fs::write(world.path("warren.toml"), config).unwrap();
    assert!(std::env::var_os(VARIABLE).is_none());

    let report = scenario(&world, Transport::Stdio, "nokey").await;
    assert_eq!(report["allowed"]["error"], false, "{report}");
    assert_eq!(
        report["allowed"]["text"],
        "alpha\nthe quick brown fox\nomega\n"
    );
    assert_eq!(report["spawned"]["error"], true, "{report}");
    let refusal = report["spawned"]["text"].as_str().unwrap();
    assert!(
        refusal.contains(&format!("needs its API key in {VARIABLE}"))
            && refusal.contains("to the `env` of this server in the MCP client's configuration"),
        "{refusal}"
    );
    let logs = report["logs"].as_array().unwrap();
    assert!(
        logs.iter().any(|log| log["level"] == "warning"
            && log["data"]
                .as_str()
                .is_some_and(|data| data.contains(&format!("{VARIABLE} is not set")))),
        "{report}"
    );
    assert!(server.requests().is_empty());

    // `warren run` still needs the key.
    let run = Command::new(WARREN)
        .args(["run", "NOKEY-TASK"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains(VARIABLE));
}

/// Every tool carries MCP annotations derived from what it can do under the serving
/// profile, as a real client lists them: under `main` (the docs read-only, no network)
/// even `write_file` is read-only in effect; under `writer` (a writable grant and one
/// host) it is destructive and `fetch` is read-only but open world. A plugin tool's
/// hints are set in `[plugins.NAME] annotate` (here `fetch`'s title). Before, tools had no
/// annotations, so Codex asked approval for (and in `codex exec`, refused) every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_carry_annotations_from_what_they_can_do_under_the_profile() {
    let server = FakeLlm::start().await;
    let world = project(&server);
    std::fs::create_dir_all(world.path("out")).unwrap();
    let mut config = std::fs::read_to_string(world.path("warren.toml")).unwrap();
    config.push_str(
        r#"
[plugins.http]
annotate = { fetch = { title = "Fetch a page", idempotent = false } }

[profiles.writer]
description = "Writes the output"
tools = ["read_file", "write_file", "fetch"]
[profiles.writer.capabilities]
fs = [{ host = "out", guest = "/out", mode = "rw" }]
net = ["example.com"]
"#,
    );
    std::fs::write(world.path("warren.toml"), config).unwrap();
    let hints = |title: &str, read_only: bool, destructive: bool, idempotent: bool, open: bool| {
        json!({"title": title, "readOnlyHint": read_only, "destructiveHint": destructive,
            "idempotentHint": idempotent, "openWorldHint": open})
    };

    let main = client(&world, None, "annotations").await;
    let main = &main["annotations"];
    assert_eq!(
        main["read_file"],
        hints("Read a file", true, false, true, false)
    );
    assert_eq!(
        main["write_file"],
        hints("Write a file", true, false, true, false),
        "{main}"
    );
    assert_eq!(
        main["spawn_agent"],
        hints("Spawn a sub-agent", false, false, false, true)
    );
    assert_eq!(
        main["await_agents"],
        hints("Await sub-agents", true, false, true, false)
    );
    assert_eq!(
        main["cancel_agent"],
        hints("Cancel a sub-agent", false, true, true, false)
    );
    assert_eq!(
        main["list_agents"],
        hints("List sub-agents", true, false, true, false)
    );

    let http = HttpServer::start_with(&world, &["--profile", "writer"], None);
    let writer = client(&world, Some(&http), "annotations").await;
    let writer = &writer["annotations"];
    assert_eq!(
        writer["write_file"],
        hints("Write a file", false, true, true, false),
        "{writer}"
    );
    assert_eq!(
        writer["fetch"],
        hints("Fetch a page", true, false, true, true)
    );
    assert_eq!(
        writer["read_file"],
        hints("Read a file", true, false, true, false)
    );
    assert_eq!(http.stop(), "");
}

/// `warren mcp` over stdio, driven line by line.
struct RawStdio {
    child: Child,
    /// stdout, line by line.
    lines: mpsc::Receiver<String>,
    /// stderr so far (read all along, so a chatty log never fills the pipe).
    stderr: Arc<Mutex<String>>,
    next_id: u64,
}

impl RawStdio {
    /// Started and initialized (`initialize`, then `notifications/initialized`).
    fn start(world: &World, rust_log: &str) -> RawStdio {
        let mut raw = RawStdio::spawn(world, rust_log);
        let init = raw.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "warren", "{init}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    /// Started, nothing sent yet.
    fn spawn(world: &World, rust_log: &str) -> RawStdio {
        let mut child = Command::new(WARREN)
            .arg("mcp")
            .current_dir(world.dir.path())
            .env_remove("WARREN_CONFIG")
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (sender, lines) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (collected, log) = (stderr.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in BufReader::new(log).lines().map_while(Result::ok) {
                collected.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        RawStdio {
            child,
            lines,
            stderr,
            next_id: 1,
        }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and returns its response; every other line read on the way
    /// must be a JSON-RPC notification.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carried a line that is not JSON ({e}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            if message["id"] == id {
                return message;
            }
            assert!(message["method"].is_string(), "{line}");
        }
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With every log record on (`RUST_LOG=debug`, rmcp's own included), stdout still
/// carries JSON-RPC messages only, one per line; the records go to stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_carries_only_protocol_messages_even_with_debug_logs() {
    let server = FakeLlm::start().await;
    server.route("TRACE-ME", answer("traced"));
    let world = project(&server);
    let mut raw = RawStdio::start(&world, "debug");
    let _ = raw.request("logging/setLevel", json!({"level": "debug"}));
    let listed = raw.request("tools/list", json!({}));
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 8);
    let read = raw.request(
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": "/docs/notes.md"}}),
    );
    assert_eq!(read["result"]["isError"], false, "{read}");
    let spawned = raw.request(
        "tools/call",
        json!({"name": "spawn_agent", "arguments": {"task": "TRACE-ME", "background": false},
               "_meta": {"progressToken": "p1"}}),
    );
    assert!(
        spawned["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("traced"),
        "{spawned}"
    );
    // Closing stdin ends the session; the rest of stdout must be protocol too.
    drop(raw.child.stdin.take());
    let status = raw.child.wait().unwrap();
    for line in raw.lines.iter() {
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a line that is not JSON ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    let stderr = raw.stderr.lock().unwrap().clone();
    assert!(
        stderr.contains("DEBUG"),
        "debug records go to stderr: {stderr}"
    );
    assert!(status.success(), "{stderr}");
}

/// What fastmcp 4.1 sends first: a `server/discover` for the 2026-07-28 revision.
pub(crate) fn discover_probe() -> Value {
    json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }})
}

/// A client that probes protocol revisions first (fastmcp 4.1: `server/discover` for
/// 2026-07-28; others an `initialize` naming a revision warren does not know) is told
/// the revisions warren speaks, both eras, and gets 2025-11-25 from `initialize`; warren
/// logs no warning about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_probe_over_stdio_is_answered_without_a_warning() {
    let server = FakeLlm::start().await;
    let world = project(&server);
    let mut raw = RawStdio::spawn(&world, "info");
    let probe = raw.request("server/discover", discover_probe());
    let supported = probe["result"]["supportedVersions"].as_array();
    assert!(
        supported
            .is_some_and(|s| s.contains(&json!("2025-11-25")) && s.contains(&json!("2026-07-28"))),
        "{probe}"
    );
    let init = raw.request(
        "initialize",
        json!({"protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let listed = raw.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    // A request of the other era inside the session, and still no warning.
    let probe = raw.request("tools/list", discover_probe());
    assert!(probe["result"]["tools"].is_array(), "{probe}");
    drop(raw.child.stdin.take());
    let _ = raw.child.wait();
    let stderr = raw.stderr.lock().unwrap().clone();
    assert!(!stderr.contains("WARN"), "{stderr}");
}

/// The name of the compile cache entry the `warren` binary writes for built-in
/// `builtin`: `warren tools` in a project loading that built-in alone leaves it as
/// the one entry of an empty cache.
fn builtin_cache_entry(builtin: &str) -> std::ffi::OsString {
    let world = World::new();
    let cache = tempfile::tempdir().unwrap();
    let config = format!(
        "[plugins]\nbuiltins = [{builtin:?}]\ncache_dir = {:?}\n",
        cache.path()
    );
    std::fs::write(world.path("warren.toml"), config).unwrap();
    let output = crate::support::warren(&world, &["tools"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let entries: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 1, "{builtin}: {entries:?}");
    entries[0].clone()
}

/// `warren mcp` with an empty compile cache answers `initialize` and `tools/list`
/// while the built-ins' code is provably not compiled yet: each built-in's cache entry
/// is a FIFO nobody writes to, so reading it blocks until the test opens it. A call to
/// a `files` tool then waits for `files` only (released by the test, found invalid,
/// compiled) while `http` stays blocked. Before, the built-ins were compiled before
/// serving, and warren blocked on the first FIFO without answering anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_before_the_builtins_are_compiled() {
    let server = FakeLlm::start().await;
    let world = project(&server);
    let cache = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(world.path("warren.toml")).unwrap();
    let config = config.replace(
        &format!("cache_dir = {:?}", crate::support::cache_dir()),
        &format!("cache_dir = {:?}", cache.path()),
    );
    std::fs::write(world.path("warren.toml"), config).unwrap();
    let entry = |name: &str| cache.path().join(builtin_cache_entry(name));
    let (files, http) = (entry("files"), entry("http"));
    for fifo in [&files, &http] {
        let made = Command::new("mkfifo").arg(fifo).status().unwrap();
        assert!(made.success());
    }

    let mut raw = RawStdio::start(&world, "info");
    let listed = raw.request("tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "list_dir",
            "read_file",
            "write_file",
            "spawn_agent",
            "await_agents",
            "cancel_agent",
            "message_agent",
            "list_agents"
        ],
        "{listed}"
    );
    assert_eq!(
        listed["result"]["tools"][1]["annotations"]["readOnlyHint"], true,
        "{listed}"
    );
    assert!(!raw.stderr.lock().unwrap().contains("plugin loaded"));

    // An empty entry is invalid: `files` is compiled, and the call waits for it.
    let release = std::thread::spawn(move || drop(std::fs::File::create(&files).unwrap()));
    let read = raw.request(
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": "/docs/notes.md"}}),
    );
    release.join().unwrap();
    assert_eq!(read["result"]["isError"], false, "{read}");
    assert_eq!(
        read["result"]["content"][0]["text"],
        "alpha\nthe quick brown fox\nomega\n"
    );
    use std::os::unix::fs::FileTypeExt as _;
    assert!(
        std::fs::metadata(&http).unwrap().file_type().is_fifo(),
        "http was not waited for"
    );
    let stderr = raw.stderr.lock().unwrap().clone();
    assert!(stderr.contains("plugin loaded plugin=files"), "{stderr}");
    assert!(!stderr.contains("plugin loaded plugin=http"), "{stderr}");
}

/// The stdio client leaving (stdin closed) cancels its session's agents, and warren
/// exits by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdin_cancels_the_sessions_agents_and_exits() {
    let server = FakeLlm::start().await;
    server.route("HANG-STDIN", Reply::Hang);
    let world = project(&server);
    let mut raw = RawStdio::start(&world, "warn");
    let started = raw.request(
        "tools/call",
        json!({"name": "spawn_agent", "arguments": {"task": "HANG-STDIN"}}),
    );
    let started = started["result"]["content"][0]["text"].as_str().unwrap();
    assert!(started.starts_with("Started job "), "{started}");
    assert!(eventually(Duration::from_secs(30), || !server.requests().is_empty()).await);
    drop(raw.child.stdin.take());
    assert!(
        eventually(Duration::from_secs(10), || server
            .hang_dropped
            .load(Ordering::SeqCst))
        .await,
        "the sub-agent still waits on the model"
    );
    let closed = Instant::now();
    let status = loop {
        if let Some(status) = raw.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            closed.elapsed() < Duration::from_secs(10),
            "warren mcp did not exit when stdin closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{}", raw.stderr.lock().unwrap());
}

/// A broken warren.toml or an unknown profile stops `warren mcp` before it serves
/// anything: exit 2, the file and line on stderr, nothing on stdout (the protocol's).
#[test]
fn configuration_errors_fail_at_start_with_exit_2_and_nothing_on_stdout() {
    let world = World::new();
    std::fs::write(
        world.path("warren.toml"),
        "[profiles.main]\ntools = [\"read_file\"]\nbogus_key = 1\n",
    )
    .unwrap();
    for args in [vec!["mcp"], vec!["mcp", "--http", "127.0.0.1:0"]] {
        let output = crate::support::warren(&world, &args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(text(&output.stdout), "", "{args:?}");
        assert!(
            stderr.contains("warren.toml: TOML parse error at line 3"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("bogus_key"), "{args:?}: {stderr}");
    }
    std::fs::write(
        world.path("warren.toml"),
        "[profiles.main]\ntools = [\"read_file\"]\n",
    )
    .unwrap();
    let output = crate::support::warren(&world, &["mcp", "--profile", "ghost"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(text(&output.stdout), "");
    assert!(
        stderr.contains("no profile `ghost` (defined: main)"),
        "{stderr}"
    );
}

/// The MCP Inspector (npm, pinned in `tests/fixtures/mcp-inspector`), installed once.
fn inspector() -> PathBuf {
    static READY: Mutex<bool> = Mutex::new(false);
    let fixture = root().join("tests/fixtures/mcp-inspector");
    let binary = fixture.join("node_modules/.bin/mcp-inspector");
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    if !*ready && !binary.exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&fixture)
            .status()
            .expect("npm is needed for the MCP Inspector test: install Node.js and npm (scripts/install-deps does)");
        assert!(
            status.success(),
            "npm ci failed in {} (the npm registry must be reachable once)",
            fixture.display()
        );
    }
    *ready = true;
    binary
}

/// `NODE_OPTIONS` the Inspector needs on this machine's Node: Node 18 (Debian 12's)
/// has `CustomEvent` and `crypto` only behind flags, which later versions dropped.
fn node_options() -> String {
    let version = Command::new("node")
        .arg("--version")
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_default();
    let major: u32 = version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let mut options = std::env::var("NODE_OPTIONS").unwrap_or_default();
    if major < 19 {
        options.push_str(" --experimental-global-customevent --experimental-global-webcrypto");
    }
    options
}

/// Runs the Inspector's CLI mode on `target` with `args`; returns the first JSON value
/// it printed (a tool error is followed by a second one naming it).
fn inspect(world: &World, target: &[&str], args: &[&str]) -> Value {
    let output = Command::new(inspector())
        .env("NODE_OPTIONS", node_options())
        .arg("--cli")
        .args(target)
        .args(["--cwd", world.dir.path().to_str().unwrap()])
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .output()
        .unwrap();
    let stdout = text(&output.stdout);
    serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| {
            panic!(
                "no JSON from the Inspector (2.12 declares Node >= 22.19; it is known to run on 18 with flags and on 20):\n{stdout}\n{}",
                text(&output.stderr)
            )
        })
}

/// The Inspector's CLI mode, over stdio and over Streamable HTTP: it lists warren's
/// tools and calls one the profile allows and one its sandbox denies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_inspector_cli_lists_and_calls_tools() {
    let server = FakeLlm::start().await;
    let world = project(&server);
    let http = HttpServer::start(&world);
    let authorization = format!("Authorization: Bearer {TOKEN}");
    let targets: [Vec<&str>; 2] = [
        vec![WARREN, "mcp"],
        vec![http.url.as_str(), "--header", authorization.as_str()],
    ];
    for target in &targets {
        let listed = inspect(&world, target, &["--method", "tools/list"]);
        let names: Vec<&str> = listed["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "list_dir",
                "read_file",
                "write_file",
                "spawn_agent",
                "await_agents",
                "cancel_agent",
                "message_agent",
                "list_agents"
            ],
            "{target:?}"
        );
        let read = inspect(
            &world,
            target,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "read_file",
                "--tool-arg",
                "path=/docs/notes.md",
            ],
        );
        assert_eq!(read["isError"], false, "{target:?}: {read}");
        assert_eq!(
            read["content"][0]["text"],
            "alpha\nthe quick brown fox\nomega\n"
        );
        let denied = inspect(
            &world,
            target,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "write_file",
                "--tool-arg",
                "path=/docs/new.md",
                "content=x",
            ],
        );
        assert_eq!(denied["isError"], true, "{target:?}: {denied}");
        assert!(
            denied["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("denied"),
            "{denied}"
        );
    }
    assert!(!world.path("docs/new.md").exists());
    assert_eq!(http.stop(), "");
}
