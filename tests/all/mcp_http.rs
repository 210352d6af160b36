//! `warren mcp --http` attacked by anyone who can connect (issue 30): a flood of
//! `initialize` requests, half-sent requests holding connections, running the server
//! out of descriptors, and requests from a foreign web page. Each test checks the
//! server stayed within its limits (memory, connections, log) and that an honest
//! client (the official Python SDK) was served next.

use std::process::Command;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::fake_llm::FakeLlm;
use crate::mcp::{client, discover_probe, project, HttpServer, TOKEN};

/// An `initialize` request body.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}"#;

/// A request's first line and part of its headers, never finished.
const HALF_SENT: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: applic";

/// Resident memory of process `pid`, in KiB.
fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// What the server answered.
struct Answer {
    status: u16,
    /// `Mcp-Session-Id`, when a session was opened.
    session: Option<String>,
    /// `WWW-Authenticate`, when sent.
    challenge: Option<String>,
    body: String,
}

/// POSTs an `initialize` to `url` with `headers` and, when given, an
/// `Authorization: Bearer` header with `token`.
async fn initialize(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> Answer {
    post(http, url, token, headers, INITIALIZE.to_string()).await
}

/// POSTs JSON-RPC `body` to `url`, as [`initialize`] does.
async fn post(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: String,
) -> Answer {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap().to_string())
    };
    Answer {
        status: response.status().as_u16(),
        session: header("mcp-session-id"),
        challenge: header("www-authenticate"),
        body: response.text().await.unwrap(),
    }
}

/// Ends session `id` on `url`.
async fn delete(http: &reqwest::Client, url: &str, id: &str) {
    let response = http
        .delete(url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("mcp-session-id", id)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
}

/// A thousand `initialize` requests, 32 at a time, against the default limits: 64
/// sessions are opened, every other request is refused with 503 and a JSON-RPC error
/// naming `--max-sessions`, memory stays far below what a thousand sessions held
/// (each preallocated an 8,192-event buffer of about 1.4 MiB), and once the sessions
/// are deleted a new client is served. Before the limit, all thousand were opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialize_flood_is_refused_past_the_session_limit() {
    const FLOOD: usize = 1000;
    const MOST_KB: u64 = 120 * 1024;
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = HttpServer::start(&world);
    let http = reqwest::Client::new();
    let url = server.url.clone();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..32 {
        let (http, url) = (http.clone(), url.clone());
        tasks.spawn(async move {
            let mut answers = Vec::new();
            for _ in (worker..FLOOD).step_by(32) {
                answers.push(initialize(&http, &url, Some(TOKEN), &[]).await);
            }
            answers
        });
    }
    let answers = tasks.join_all().await;
    let rss = rss_kb(server.child.id());
    assert!(rss < MOST_KB, "warren mcp holds {rss} KiB after the flood");
    let mut sessions = Vec::new();
    let mut refusals = 0;
    for answer in answers.into_iter().flatten() {
        match answer.status {
            200 => sessions.push(answer.session.expect("a session id")),
            503 => {
                let body = answer.body;
                assert!(body.contains("at most 64 sessions"), "{body}");
                assert!(body.contains("--max-sessions"), "{body}");
                let error: serde_json::Value = serde_json::from_str(&body).unwrap();
                assert_eq!(error["error"]["code"], -32000, "{body}");
                refusals += 1;
            }
            other => panic!("initialize answered {other}: {}", answer.body),
        }
    }
    assert_eq!(sessions.len(), 64);
    assert_eq!(refusals, FLOOD - 64);

    for id in &sessions {
        delete(&http, &url, id).await;
    }
    // A deleted session gives its place back as it closes.
    let started = Instant::now();
    loop {
        let answer = initialize(&http, &url, Some(TOKEN), &[]).await;
        if answer.status == 200 {
            delete(&http, &url, &answer.session.unwrap()).await;
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no session place came back: {} {}",
            answer.status,
            answer.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = client(&world, Some(&server), "tools").await;
    assert_eq!(report["allowed"]["error"], false, "{report}");
    assert_eq!(server.stop(), "");
}

/// Opens `count` connections to `url`'s address, one after the other, each sending
/// [`HALF_SENT`] and then holding its side open; returns a receiver that gets each
/// connection's number (from 0, in connection order) when the server closes it.
async fn half_sent_requests(
    url: &str,
    count: usize,
) -> (
    tokio::sync::mpsc::UnboundedReceiver<usize>,
    tokio::task::JoinSet<()>,
) {
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let (closed, receiver) = tokio::sync::mpsc::unbounded_channel();
    let mut held = tokio::task::JoinSet::new();
    for number in 0..count {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream.write_all(HALF_SENT).await.unwrap();
        let closed = closed.clone();
        held.spawn(async move {
            // Returns when the server closes the connection (EOF, a reset, or an
            // answer to the broken request).
            let mut buffer = [0; 256];
            let _ = stream.read(&mut buffer).await;
            let _ = closed.send(number);
            // Held open from this side until the test ends.
            std::future::pending::<()>().await;
        });
    }
    (receiver, held)
}

/// The numbers of the next `count` connections the server closes, waiting up to
/// `limit` for them (fewer if it does not close that many).
async fn closed_within(
    closed: &mut tokio::sync::mpsc::UnboundedReceiver<usize>,
    count: usize,
    limit: Duration,
) -> Vec<usize> {
    let mut numbers = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    while numbers.len() < count {
        match tokio::time::timeout_at(deadline, closed.recv()).await {
            Ok(Some(number)) => numbers.push(number),
            _ => break,
        }
    }
    numbers
}

/// A hundred half-sent requests, one connection after the other, against
/// `--max-connections 16 --header-timeout 5`: the first 16 are served (and held), the
/// 84 over the limit are closed as soon as they are accepted, before any of the 16;
/// the 16 are closed when their headers are late; the limit is logged once, not per
/// connection; and an honest client is then served while the attacker still holds
/// its side of every connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_are_closed_past_the_connection_limit_and_on_header_timeout() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = HttpServer::start_with(
        &world,
        &["--max-connections", "16", "--header-timeout", "5"],
        None,
    );
    let (mut closed, _held) = half_sent_requests(&server.url, 100).await;
    let mut numbers = closed_within(&mut closed, 100, Duration::from_secs(60)).await;
    assert_eq!(
        numbers.len(),
        100,
        "half-sent requests still open: {}",
        server.stderr.lock().unwrap()
    );
    let (over, within) = numbers.split_at_mut(84);
    over.sort_unstable();
    within.sort_unstable();
    assert_eq!(over, (16..100).collect::<Vec<_>>());
    assert_eq!(within, (0..16).collect::<Vec<_>>());
    let report = client(&world, Some(&server), "tools").await;
    assert_eq!(report["allowed"]["error"], false, "{report}");
    let log = server.stderr.lock().unwrap().clone();
    assert_eq!(
        log.matches("closing new ones until one ends").count(),
        1,
        "{log}"
    );
    assert!(
        log.contains("84 connections were closed over the limit"),
        "{log}"
    );
    assert_eq!(server.stop(), "");
}

/// Half-sent requests until the server has no descriptor left (`ulimit -n 64`, 150
/// connections, the default limits): `accept` fails, and is retried with a growing
/// pause and logged once per burst, not once per try; the default header timeout
/// frees the descriptors, and an honest client is served. Before, the accept loop
/// spun on the error, logging each try (hundreds of MiB a minute), and the
/// connections were never timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_out_of_descriptors_is_retried_quietly_until_they_free() {
    const MOST_LOG_BYTES: usize = 64 * 1024;
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = HttpServer::start_with(&world, &[], Some(64));
    let (mut closed, held) = half_sent_requests(&server.url, 150).await;
    // The default header timeout is 10 s: the first round of accepted connections is
    // closed after it.
    let started = Instant::now();
    let mut seen = 0;
    while seen == 0 && started.elapsed() < Duration::from_secs(40) {
        seen += closed_within(&mut closed, 1, Duration::from_secs(1))
            .await
            .len();
        let log = server.stderr.lock().unwrap().len();
        assert!(log < MOST_LOG_BYTES, "{log} bytes of log during the attack");
    }
    assert!(
        seen > 0,
        "no half-sent request was ever timed out: {}",
        crate::support::text(server.stderr.lock().unwrap().as_bytes())
            .chars()
            .take(2000)
            .collect::<String>()
    );
    let log = server.stderr.lock().unwrap().clone();
    // One line per burst of failures, never one per try. A descriptor freed for a
    // moment (the built-ins compiling in the background give theirs back when they
    // fail) ends a burst: its recovery is logged, and the next burst once.
    let failed = log.matches("accepting a connection failed").count();
    let recovered = log.matches("accepting connections works again").count();
    assert!(
        (1..=3).contains(&failed) && failed <= recovered + 1,
        "{failed} failures logged, {recovered} recoveries: {log}"
    );
    // The attacker gives up; the server recovers and serves.
    drop(held);
    let report = client(&world, Some(&server), "tools").await;
    assert_eq!(report["allowed"]["error"], false, "{report}");
    let log = server.stderr.lock().unwrap().clone();
    assert!(log.len() < MOST_LOG_BYTES, "{} bytes of log", log.len());
    assert!(
        log.contains("accepting connections works again after"),
        "{log}"
    );
    assert_eq!(server.stop(), "");
}

/// A request from a foreign web page (its `Origin` another host's) is refused with
/// 403 before any session is made; no `Origin` (a native client) and a loopback
/// `Origin` (a local tool's page) are served. Before, every origin was served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = HttpServer::start(&world);
    let http = reqwest::Client::new();
    for origin in [
        "http://evil.example",
        "http://localhost.evil.example:80",
        "null",
    ] {
        let answer = initialize(&http, &server.url, Some(TOKEN), &[("origin", origin)]).await;
        assert_eq!(answer.status, 403, "{origin}: {}", answer.body);
        assert_eq!(answer.session, None);
        assert!(
            answer.body.contains("is not this server's"),
            "{}",
            answer.body
        );
    }
    for headers in [
        &[][..],
        &[("origin", "http://localhost:6274")],
        &[("origin", "http://127.0.0.1")],
    ] {
        let answer = initialize(&http, &server.url, Some(TOKEN), headers).await;
        assert_eq!(answer.status, 200, "{headers:?}: {}", answer.body);
        delete(&http, &server.url, &answer.session.unwrap()).await;
    }
    let report = client(&world, Some(&server), "tools").await;
    assert_eq!(report["allowed"]["error"], false, "{report}");
    assert_eq!(server.stop(), "");
}

/// Without the server's bearer token, or with another, a request is refused with 401
/// and `WWW-Authenticate: Bearer` before anything is made for it; with it, served,
/// the Python SDK sending it as a header. Before, anyone who could connect was
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_the_bearer_token_is_refused() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = HttpServer::start(&world);
    let http = reqwest::Client::new();
    let wrong = format!("{TOKEN}x");
    for token in [None, Some("wrong-token-0123456789"), Some(wrong.as_str())] {
        let answer = initialize(&http, &server.url, token, &[]).await;
        assert_eq!(answer.status, 401, "{token:?}: {}", answer.body);
        assert_eq!(answer.session, None);
        assert!(
            answer.challenge.unwrap_or_default().starts_with("Bearer"),
            "{token:?}"
        );
        assert!(
            answer.body.contains("Authorization: Bearer TOKEN"),
            "{}",
            answer.body
        );
    }
    let basic = initialize(
        &http,
        &server.url,
        None,
        &[("authorization", "Basic dGVzdA==")],
    )
    .await;
    assert_eq!(basic.status, 401, "{}", basic.body);
    let report = client(&world, Some(&server), "tools").await;
    assert_eq!(report["allowed"]["error"], false, "{report}");
    assert_eq!(server.stop(), "");
}

/// With neither `--token-file` nor `WARREN_MCP_TOKEN`, a token is generated and
/// printed on stderr at start; it is required, and a client given it is served.
/// Then `--token-file` names the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_or_file_token_is_required() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let http = reqwest::Client::new();
    let server = HttpServer::launch(&world, &[], None, None);
    let token = server
        .token
        .clone()
        .unwrap_or_else(|| panic!("no token printed: {}", server.stderr.lock().unwrap()));
    assert_eq!(token.len(), 64, "{token}");
    assert_eq!(initialize(&http, &server.url, None, &[]).await.status, 401);
    assert_eq!(
        initialize(&http, &server.url, Some(TOKEN), &[])
            .await
            .status,
        401
    );
    let report = client(&world, Some(&server), "tools").await;
    assert_eq!(report["allowed"]["error"], false, "{report}");
    server.stop();

    std::fs::write(world.path("token"), "from-a-file-0123456789\n").unwrap();
    let server = HttpServer::launch(&world, &["--token-file", "token"], None, None);
    assert!(!server
        .stderr
        .lock()
        .unwrap()
        .contains("this server's token"));
    let answer = initialize(&http, &server.url, Some("from-a-file-0123456789"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(initialize(&http, &server.url, None, &[]).await.status, 401);
    server.stop();
}

/// `--no-auth` serves without a token on a loopback address, and is refused with
/// exit 2, naming the flag, on any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_auth_is_allowed_only_on_loopback() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let output = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["mcp", "--http", "0.0.0.0:0", "--no-auth"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .output()
        .unwrap();
    let stderr = crate::support::text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--no-auth is allowed only on a loopback address"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());

    let server = HttpServer::launch(&world, &["--no-auth"], None, None);
    assert_eq!(server.token, None);
    let http = reqwest::Client::new();
    let answer = initialize(&http, &server.url, None, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(server.stop(), "");
}

/// fastmcp 4.1 opens every HTTP connection with a `server/discover` for the 2026-07-28
/// revision: it is told the revisions warren speaks, both eras; an `initialize`
/// naming an unknown revision gets 2025-11-25, and neither is logged as a warning
/// (rmcp logged every refused probe at warn, once per connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_probe_over_http_is_answered_without_a_warning() {
    let model = FakeLlm::start().await;
    let world = project(&model);
    let server = HttpServer::start(&world);
    let http = reqwest::Client::new();
    let probe = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": discover_probe()});
    let header = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "server/discover"),
    ];
    let answer = post(&http, &server.url, Some(TOKEN), &header, probe.to_string()).await;
    assert!(
        answer.status == 200
            && answer.body.contains("supportedVersions")
            && answer.body.contains("\"2025-11-25\"")
            && answer.body.contains("\"2026-07-28\""),
        "{}: {}",
        answer.status,
        answer.body
    );
    let future = INITIALIZE.replace("2025-06-18", "2099-01-01");
    let answer = post(&http, &server.url, Some(TOKEN), &[], future).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer.body.contains(r#""protocolVersion":"2025-11-25""#),
        "{}",
        answer.body
    );
    let stderr = server.stderr.lock().unwrap().clone();
    assert!(!stderr.contains("WARN"), "{stderr}");
    assert_eq!(server.stop(), "");
}
