//! The web view attacked by anyone who can connect, and by many honest clients
//! (issue 44): half-sent requests without the token until the process has no
//! descriptor left, and eight event-stream clients of `warren view` on a large,
//! growing journal. Each test checks the server stayed within its bounds (log,
//! memory) and still served the next request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::browser::Served;
use crate::fake_llm::{model_table, FakeLlm, Reply};
use crate::support::{text, World};

/// A request's first line and part of its headers, never finished, without the token.
const HALF_SENT: &[u8] = b"GET /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: sen";

/// A project on the fake model, and one finished run of it journaled.
async fn journaled_run() -> (World, FakeLlm) {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route("ROOT-TASK", Reply::answer("ROOT ANSWER", (100, 50)));
    world.config(&format!(
        "{}\n[profiles.main]\ntools = []\n",
        model_table(&server.base_url)
    ));
    let dir = world.dir.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(["run", "--json", "ROOT-TASK"])
            .current_dir(dir)
            .env_remove("WARREN_CONFIG")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    (world, server)
}

/// `http://127.0.0.1:PORT/` and the token, from a served page's address.
fn base_and_token(served: &Served) -> (String, String) {
    let (base, token) = served.url.split_once("?token=").unwrap();
    (base.to_string(), token.to_string())
}

/// `GET base + path` with the token, until it is answered (or `limit` passes).
async fn get_eventually(base: &str, token: &str, path: &str, limit: Duration) -> Value {
    let http = reqwest::Client::new();
    let started = Instant::now();
    loop {
        let sent = http
            .get(format!("{base}{path}"))
            .bearer_auth(token)
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        if let Ok(response) = sent {
            if response.status().is_success() {
                return serde_json::from_str(&response.text().await.unwrap()).unwrap();
            }
        }
        assert!(started.elapsed() < limit, "{path} was never answered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Half-sent requests without the token until `warren view` has no descriptor left
/// (`ulimit -n 64`, 150 connections): `accept` fails, is retried quietly and logged
/// once per burst; the header timeout frees the descriptors; the API is answered.
/// Before, the connections were never closed and each failed accept was logged (90
/// MB/s of stderr).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_without_the_token_are_timed_out_and_logged_once() {
    const MOST_LOG_BYTES: usize = 64 * 1024;
    let (world, _model) = journaled_run().await;
    let served = Served::start_with(world.dir.path(), &["view", "last"], Some(64));
    let (base, token) = base_and_token(&served);
    let address = base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let (closed, mut closes) = tokio::sync::mpsc::unbounded_channel();
    let mut held = tokio::task::JoinSet::new();
    for _ in 0..150 {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream.write_all(HALF_SENT).await.unwrap();
        let closed = closed.clone();
        held.spawn(async move {
            let mut buffer = [0; 256];
            let _ = stream.read(&mut buffer).await;
            let _ = closed.send(());
            std::future::pending::<()>().await;
        });
    }
    // The header timeout is 10 s: the first connections are closed after it.
    let started = Instant::now();
    let mut seen = false;
    while !seen && started.elapsed() < Duration::from_secs(40) {
        seen = tokio::time::timeout(Duration::from_secs(1), closes.recv())
            .await
            .is_ok();
        let log = served.stderr.lock().unwrap().len();
        assert!(log < MOST_LOG_BYTES, "{log} bytes of log during the attack");
    }
    let log = served.stderr.lock().unwrap().clone();
    assert!(
        seen,
        "no half-sent request was ever timed out: {}",
        log.chars().take(2000).collect::<String>()
    );
    assert_eq!(
        log.matches("accepting a connection failed").count(),
        1,
        "{}",
        log.chars().take(2000).collect::<String>()
    );
    drop(held);
    let snapshot = get_eventually(&base, &token, "api/run", Duration::from_secs(60)).await;
    assert_eq!(snapshot["run"]["state"], "ok", "{snapshot}");
    let log = served.stderr.lock().unwrap().clone();
    assert!(log.len() < MOST_LOG_BYTES, "{} bytes of log", log.len());
    assert!(
        log.contains("web view: accepting connections works again after"),
        "{log}"
    );
}

/// Peak resident memory of process `pid`, in KiB.
fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The journal of the one run in `world`, its end cut off (the root's and the run's
/// last records) as if the run were still going: a later model response then counts.
fn unfinished_journal_of(world: &World) -> std::path::PathBuf {
    let runs = world.path(".warren/runs");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap();
    let journal = run.path().join("journal.jsonl");
    let kept: String = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .filter(|line| !line.contains(r#""type":"agent_finished""#))
        .filter(|line| !line.contains(r#""type":"run_finished""#))
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&journal, kept).unwrap();
    journal
}

/// Appends to `journal` `count` model responses of `template`'s agent with a text of
/// `text_bytes` bytes, turns numbered from `first_turn`.
fn append_turns(
    journal: &std::path::Path,
    template: &Value,
    first_turn: u64,
    count: u64,
    text_bytes: usize,
) {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(journal)
        .unwrap();
    let text = "x".repeat(text_bytes);
    for turn in first_turn..first_turn + count {
        let mut line = template.clone();
        line["turn"] = turn.into();
        line["text"] = text.clone().into();
        file.write_all(format!("{line}\n").as_bytes()).unwrap();
    }
}

/// An event-stream client: the root's turns in each snapshot it is sent, until its
/// stream ends.
async fn watch_turns(address: String, token: String, turns: tokio::sync::watch::Sender<u64>) {
    let mut stream = TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "GET /api/events HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut pending = String::new();
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let Ok(read) = stream.read(&mut buffer).await else {
            return;
        };
        if read == 0 {
            return;
        }
        pending.push_str(&String::from_utf8_lossy(&buffer[..read]));
        while let Some(at) = pending.find("event: snapshot\ndata: ") {
            let rest = &pending[at + "event: snapshot\ndata: ".len()..];
            let Some(end) = rest.find('\n') else { break };
            let snapshot: Value = serde_json::from_str(&rest[..end]).unwrap();
            let _ = turns.send(snapshot["agents"][0]["turns"].as_u64().unwrap_or(0));
            pending = rest[end..].to_string();
        }
        if pending.len() > 1 << 20 {
            let keep = pending.len() - 1024;
            pending.drain(..keep);
        }
    }
}

/// Eight event-stream clients of `warren view` on a 48 MiB journal that grows by 20
/// MiB while they watch: every client sees every turn, and the server's peak memory
/// stays far below one copy of the journal per client (the journal is read once,
/// incrementally, for all of them). Before, each client read and parsed the whole
/// journal twice on every growth: eight clients of a 200 MiB journal took 3.5 GB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_a_growing_journal_share_one_incremental_read() {
    const MOST_KB: u64 = 160 * 1024;
    const MIB: usize = 1 << 20;
    let (world, _model) = journaled_run().await;
    let journal = unfinished_journal_of(&world);
    let template: Value = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["type"] == "model_response")
        .unwrap();
    append_turns(&journal, &template, 2, 48, MIB);
    let served = Served::start(world.dir.path(), &["view", "last"]);
    let (base, token) = base_and_token(&served);
    let address = base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut watchers = Vec::new();
    for _ in 0..8 {
        let (sender, receiver) = tokio::sync::watch::channel(0);
        tokio::spawn(watch_turns(address.clone(), token.clone(), sender));
        watchers.push(receiver);
    }
    for turn in 50..70 {
        append_turns(&journal, &template, turn, 1, MIB);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for watcher in &mut watchers {
        let seen = tokio::time::timeout(
            Duration::from_secs(60),
            watcher.wait_for(|turns| *turns == 69),
        )
        .await
        .is_ok_and(|seen| seen.is_ok());
        assert!(
            seen,
            "a client never saw the last turn (it saw {})",
            *watcher.borrow()
        );
    }
    let peak = peak_rss_kb(served.child.id());
    assert!(
        peak < MOST_KB,
        "warren view peaked at {peak} KiB serving eight clients of a 68 MiB journal"
    );
}

/// A run's own tool call and model requests go on while its web view is flooded with
/// 2,100 half-sent requests without the token (`ulimit -n 2048`): the view holds at
/// most `web::MAX_CONNECTIONS` of them and closes the rest at once, so the run keeps
/// the descriptors it needs and answers. Before, every descriptor went to the flood:
/// the run's `read_file` and model requests failed with "Too many open files".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_keeps_its_descriptors_while_its_web_view_is_flooded() {
    const MOST_LOG_BYTES: usize = 1 << 20;
    let world = World::new();
    let model = FakeLlm::start().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let read = Reply::tool_calls(
        &[("read_file", serde_json::json!({"path": "/docs/notes.md"}))],
        (100, 50),
    );
    model.route("ROOT-TASK", Reply::Gated(gate.clone(), Box::new(read)));
    model.route(
        "quick brown fox",
        Reply::answer("ROOT DONE: a fox", (100, 50)),
    );
    std::fs::write(
        world.path("warren.toml"),
        format!(
            r#"
[plugins]
cache_dir = {:?}

{}
[profiles.main]
tools = ["read_file"]
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]
"#,
            crate::support::cache_dir(),
            model_table(&model.base_url)
        ),
    )
    .unwrap();
    let mut served = Served::start_with(
        world.dir.path(),
        &["run", "--progress", "plain", "--web", "ROOT-TASK"],
        Some(2048),
    );
    let (answer, answered) = std::sync::mpsc::channel();
    let stdout = served.child.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = answer.send(line);
        }
    });
    let (base, _) = base_and_token(&served);
    let address = base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut flood = Vec::new();
    for _ in 0..2100 {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream.write_all(HALF_SENT).await.unwrap();
        flood.push(stream);
    }
    gate.add_permits(1);
    let started = Instant::now();
    let mut printed = String::new();
    while !printed.contains("ROOT DONE") {
        let log = served.stderr.lock().unwrap().len();
        assert!(log < MOST_LOG_BYTES, "{log} bytes of log during the flood");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never answered: {printed}\n{}",
            served
                .stderr
                .lock()
                .unwrap()
                .chars()
                .take(3000)
                .collect::<String>()
        );
        if let Ok(line) = answered.recv_timeout(Duration::from_millis(200)) {
            printed.push_str(&line);
        }
    }
    let log = served.stderr.lock().unwrap().clone();
    assert!(!log.contains("Too many open files"), "{log}");
    assert_eq!(
        log.matches("closing new ones until one ends").count(),
        1,
        "{log}"
    );
    drop(flood);
}
