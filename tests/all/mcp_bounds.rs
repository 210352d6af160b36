//! `warren mcp --http` attacked through its tasks and sessions (issue 44), with raw
//! JSON-RPC over HTTP so each test sees every answer: one credential listening to
//! another's task logs, refused tasks leaving runs behind, a FIFO or `/dev/zero`
//! named like a kept task, and a client that never closes its sessions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};
use crate::mcp::{project, HttpServer, TOKEN};
use crate::support::World;

/// A second credential's token.
const OTHER: &str = "other-token-0123456789abcdef";

/// A raw MCP client holding one token.
struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
}

/// What the server answered.
struct Answer {
    status: u16,
    /// `Mcp-Session-Id`, when sent.
    session: Option<String>,
    /// The JSON-RPC response (from a JSON body or the event stream's last message
    /// with an id).
    message: Value,
    body: String,
}

impl Client {
    fn new(server: &HttpServer, token: &str) -> Client {
        Client {
            http: reqwest::Client::new(),
            url: server.url.clone(),
            token: token.to_string(),
        }
    }

    /// POSTs `message` in `session` (none: a new session's `initialize`).
    async fn post(&self, session: Option<&str>, message: Value) -> Answer {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .timeout(Duration::from_secs(60))
            .body(message.to_string());
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get("mcp-session-id")
            .map(|id| id.to_str().unwrap().to_string());
        let body = response.text().await.unwrap();
        let message = serde_json::from_str(&body).unwrap_or_else(|_| {
            body.lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .filter_map(|data| serde_json::from_str::<Value>(data).ok())
                .rfind(|message| message.get("id").is_some())
                .unwrap_or(Value::Null)
        });
        Answer {
            status,
            session,
            message,
            body,
        }
    }

    /// Opens a session (`initialize`, then `notifications/initialized`).
    async fn open(&self) -> Answer {
        let answer = self
            .post(
                None,
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "bounds", "version": "1"}}}),
            )
            .await;
        if let Some(session) = &answer.session {
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            self.post(Some(session), initialized).await;
        }
        answer
    }

    /// Calls `method` with `params` in `session`: the JSON-RPC response.
    async fn call(&self, session: &str, method: &str, params: Value) -> Answer {
        self.post(
            Some(session),
            json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
        )
        .await
    }

    /// Opens `session`'s event stream, collecting what it is sent into the result.
    fn listen(&self, session: &str) -> Arc<Mutex<String>> {
        let heard = Arc::new(Mutex::new(String::new()));
        let request = self
            .http
            .get(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
        let into = heard.clone();
        tokio::spawn(async move {
            let Ok(mut response) = request.send().await else {
                return;
            };
            while let Ok(Some(chunk)) = response.chunk().await {
                into.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk));
            }
        });
        heard
    }
}

/// A server on `world` with the tokens [`TOKEN`] and [`OTHER`] and `args`.
fn two_credentials(world: &World, args: &[&str]) -> HttpServer {
    std::fs::write(world.path("tokens"), format!("{TOKEN}\n{OTHER}\n")).unwrap();
    let mut all = vec!["--token-file", "tokens"];
    all.extend_from_slice(args);
    HttpServer::start_with(world, &all, None)
}

/// A `spawn_agent` task's `tools/call` parameters for `task`.
fn spawn_task(task: &str) -> Value {
    json!({"name": "spawn_agent", "arguments": {"profile": "worker", "task": task},
           "task": {"ttl": 60000}})
}

/// The log records of a task go to the sessions of its credential, not to another
/// credential's, even one listening at the debug level. Before, a record made in a
/// task's run reached every session: another token's client read the task's id, its
/// agents' denials, paths and hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_log_records_reach_only_its_credentials_sessions() {
    let model = FakeLlm::start().await;
    model.route("SECRET-TASK", Reply::answer("TASK DONE", (10, 5)));
    let world = project(&model);
    let server = two_credentials(&world, &[]);
    let (owner, other) = (Client::new(&server, TOKEN), Client::new(&server, OTHER));
    let session = owner.open().await.session.expect("a session");
    let elsewhere = other.open().await.session.expect("a session");
    for (client, id) in [(&owner, &session), (&other, &elsewhere)] {
        let level = client
            .call(id, "logging/setLevel", json!({"level": "debug"}))
            .await;
        assert_eq!(level.status, 200, "{}", level.body);
    }
    let (mine, theirs) = (owner.listen(&session), other.listen(&elsewhere));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let created = owner
        .call(&session, "tools/call", spawn_task("SECRET-TASK in /docs"))
        .await;
    let id = created.message["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.body))
        .to_string();
    let started = Instant::now();
    loop {
        let got = owner
            .call(&session, "tasks/get", json!({"taskId": id}))
            .await;
        if got.message["result"]["status"] == "completed" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{}", got.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (mine, theirs) = (mine.lock().unwrap().clone(), theirs.lock().unwrap().clone());
    assert!(
        mine.contains(&id),
        "the owner's session never heard of its task: {mine}"
    );
    assert!(
        !theirs.contains(&id) && !theirs.contains("SECRET-TASK"),
        "another credential's session heard the task's records: {theirs}"
    );
    assert_eq!(server.stop(), "");
}

/// The number of runs journaled in `world`.
fn runs(world: &World) -> usize {
    std::fs::read_dir(world.path(".warren/runs"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

/// Tasks refused over `--max-tasks` make nothing: no session, no journaled run.
/// Before, each refused task left a journaled run behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_task_leaves_no_run() {
    let model = FakeLlm::start().await;
    model.route("HELD-TASK", Reply::Hang);
    let world = project(&model);
    let server = HttpServer::start_with(&world, &["--max-tasks", "1"], None);
    let client = Client::new(&server, TOKEN);
    let session = client.open().await.session.expect("a session");
    let held = client
        .call(&session, "tools/call", spawn_task("HELD-TASK"))
        .await;
    assert!(
        held.message["result"]["task"]["taskId"].is_string(),
        "{}",
        held.body
    );
    let before = runs(&world);
    for _ in 0..5 {
        let refused = client
            .call(&session, "tools/call", spawn_task("REFUSED-TASK"))
            .await;
        let error = refused.message["error"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(error.contains("(--max-tasks)"), "{}", refused.body);
    }
    assert_eq!(runs(&world), before, "refused tasks left runs behind");
    assert_eq!(server.stop(), "");
}

/// A FIFO named like a kept task beside a run's journal is skipped with a warning
/// naming it, and the server serves; then a link to `/dev/zero` so named is skipped
/// too, unread. Before, the FIFO stopped `warren mcp --http` from ever serving (and
/// `/dev/zero` was read until memory ran out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_files_that_are_not_regular_files_are_skipped_unread() {
    const MOST_KB: u64 = 200 * 1024;
    let model = FakeLlm::start().await;
    let world = project(&model);
    let run = world.path(".warren/runs/planted");
    std::fs::create_dir_all(&run).unwrap();
    let fifo = run.join("mcp-task-fifo.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let server = HttpServer::start(&world);
    let log = server.stderr.lock().unwrap().clone();
    assert!(
        log.contains("an MCP task file was not read") && log.contains("mcp-task-fifo.json"),
        "{log}"
    );
    let client = Client::new(&server, TOKEN);
    assert_eq!(client.open().await.status, 200);
    server.stop();

    std::fs::remove_file(&fifo).unwrap();
    std::os::unix::fs::symlink("/dev/zero", run.join("mcp-task-zero.json")).unwrap();
    let server = HttpServer::start(&world);
    let client = Client::new(&server, TOKEN);
    assert_eq!(client.open().await.status, 200);
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let peak: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!(peak < MOST_KB, "warren mcp peaked at {peak} KiB");
    let log = server.stderr.lock().unwrap().clone();
    assert!(log.contains("mcp-task-zero.json"), "{log}");
    assert_eq!(server.stop(), "");
}

/// A client that never closes its sessions fills the server (`--max-sessions 3`):
/// a new client is refused while none has been idle long, and once they have been idle for
/// `--session-evict-after` the least recently used one is ended to make room, the
/// others left as they are. Before, every new client got 503 until a session
/// expired (15 minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_make_room_least_recently_used_first() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = two_credentials(
        &world,
        &["--max-sessions", "3", "--session-evict-after", "4"],
    );
    let (hog, newcomer) = (Client::new(&server, TOKEN), Client::new(&server, OTHER));
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(hog.open().await.session.expect("a session"));
    }
    let refused = newcomer.open().await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.body.contains("--max-sessions"), "{}", refused.body);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    // The first session is now the least recently used.
    for session in &held[1..] {
        let listed = hog.call(session, "tools/list", json!({})).await;
        assert_eq!(listed.status, 200, "{}", listed.body);
    }
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let admitted = newcomer.open().await;
    assert_eq!(admitted.status, 200, "{}", admitted.body);
    let gone = hog.call(&held[0], "tools/list", json!({})).await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    for session in &held[1..] {
        let listed = hog.call(session, "tools/list", json!({})).await;
        assert_eq!(listed.status, 200, "{}", listed.body);
    }
    assert_eq!(server.stop(), "");
}

/// One credential holds at most `--max-sessions-per-token` sessions: past it, its
/// `initialize` is refused naming the flag while none of its own is idle, and ends
/// its own least recently used idle one otherwise; another credential is served
/// all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_credential_holds_at_most_its_share_of_sessions() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = two_credentials(
        &world,
        &[
            "--max-sessions-per-token",
            "2",
            "--session-evict-after",
            "4",
        ],
    );
    let (hog, other) = (Client::new(&server, TOKEN), Client::new(&server, OTHER));
    let first = hog.open().await.session.expect("a session");
    let second = hog.open().await.session.expect("a session");
    let refused = hog.open().await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(
        refused.body.contains("--max-sessions-per-token"),
        "{}",
        refused.body
    );
    assert_eq!(other.open().await.status, 200);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let listed = hog.call(&second, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let third = hog.open().await;
    assert_eq!(third.status, 200, "{}", third.body);
    let gone = hog.call(&first, "tools/list", json!({})).await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert_eq!(server.stop(), "");
}
