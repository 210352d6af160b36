//! The listener and its routes. Connections are accepted through
//! [`crate::listener`] within [`MAX_CONNECTIONS`] and [`HEADER_TIMEOUT`]; every request passes the [`Gate`] first; every
//! response carries the protective headers ([`access::protect`]).
//!
//! Routes (`?run=RUN` picks a journaled run: an id, a unique prefix, or `last`;
//! without it, the run served):
//! - `GET /`, `/app.js`, `/app.css`: the page;
//! - `GET /api/run`: the run's snapshot;
//! - `GET /api/runs`: the journaled runs;
//! - `GET /api/agents/ID/transcript`: one agent's journal records;
//! - `GET /api/events`: server-sent events: a `snapshot` first, then per burst the
//!   `event`s, the changed `agent` rows and the `run` line (a journaled run sends a new
//!   `snapshot` whenever its journal grows);
//! - `POST /api/agents/ID/cancel`: cancels an agent of the live run and its subtree;
//! - `POST /api/agents/ID/message`: a person's message (`{"message", "mode"}`) to an
//!   agent of a run that is running (here or in another process, through the run's
//!   control socket, as `warren send`), answered with its receipt;
//! - `POST /api/requests/ID/answer`: a person's answer (`{"verdict", "text"}`) to a
//!   request an agent waits on, the same way (as `warren approve`).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::access::{self, Gate, Pass, Refusal};
use super::api;
use super::feed::{self, Feed, Feeds};
use super::live::{push_frame, LiveRun};
use super::source::Source;
use crate::host::control::{self, AnswerRequest, ControlRequest, SendRequest};
use crate::jobs::CancelJob;
use crate::journal::read;
use crate::listener::{ListenLimits, ServerName};

/// Connections a web server holds at once; one over it is closed as soon as it is
/// accepted. A page holds a few (its event stream, a fetch or two); the cap keeps a
/// flood of connections, with or without the token, from taking the descriptors the
/// run's own tool calls and model requests need (warren keeps 1,024 for itself).
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// Longest a connection may take to send a request's headers, or stay idle between
/// requests, before it is closed: a half-sent request gives its descriptor back.
pub(crate) const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How often an event stream of a journaled run looks for new records.
const JOURNAL_POLL: Duration = Duration::from_secs(1);

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

type Body = crate::listener::BoxBody;

/// What every connection shares.
struct Shared {
    gate: Gate,
    source: Source,
    /// The journals clients follow, each read once for all of them.
    feeds: Feeds,
}

/// The run a request is about.
enum Target {
    /// The run of this process.
    Live(Arc<LiveRun>),
    /// A journaled run: its journal file.
    Journal(PathBuf),
}

/// A refused or failed request: its status and message.
type Failure = (StatusCode, String);

pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    local: SocketAddr,
    token: String,
    source: Source,
    shutdown: impl Future<Output = ()>,
) {
    let shared = Arc::new(Shared {
        gate: Gate::new(token, local),
        source,
        feeds: Feeds::default(),
    });
    let limits = ListenLimits {
        max_connections: MAX_CONNECTIONS,
        header_timeout: HEADER_TIMEOUT,
    };
    let name = ServerName {
        server: "web view",
        limit: "web::MAX_CONNECTIONS",
    };
    crate::listener::serve(listener, limits, name, shutdown, move |request| {
        let shared = shared.clone();
        async move { handle(&shared, request).await }
    })
    .await;
}

async fn handle(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    let query = request.uri().query().map(str::to_string);
    let pass = match shared.gate.check(request.headers(), query.as_deref()) {
        Ok(pass) => pass,
        Err(refusal) => {
            let why = match refusal {
                Refusal::Token => "open the address warren printed, with its token",
                Refusal::Host => "the Host header does not name this server",
                Refusal::Origin => "requests from other origins are refused",
            };
            return text(
                StatusCode::FORBIDDEN,
                "text/plain; charset=utf-8",
                format!("{why}\n"),
            );
        }
    };
    let run = query_value(query.as_deref(), "run");
    let path = request.uri().path().to_string();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let method = request.method().clone();
    let result = match (&method, segments.as_slice()) {
        (&Method::GET, [""]) => {
            let mut page = text(
                StatusCode::OK,
                "text/html; charset=utf-8",
                INDEX_HTML.into(),
            );
            if pass == Pass::Query {
                page.headers_mut()
                    .insert(hyper::header::SET_COOKIE, shared.gate.set_cookie());
            }
            Ok(page)
        }
        (&Method::GET, ["app.js"]) => Ok(text(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            APP_JS.into(),
        )),
        (&Method::GET, ["app.css"]) => Ok(text(
            StatusCode::OK,
            "text/css; charset=utf-8",
            APP_CSS.into(),
        )),
        (&Method::GET, ["api", "run"]) => snapshot(shared, run.as_deref()).await.map(ok_json),
        (&Method::GET, ["api", "runs"]) => runs(shared).await.map(ok_json),
        (&Method::GET, ["api", "events"]) => events(shared, run.as_deref()),
        (&Method::GET, ["api", "agents", agent, "transcript"]) => {
            transcript(shared, run.as_deref(), agent).await.map(ok_json)
        }
        (&Method::POST, ["api", "agents", agent, "cancel"]) => {
            cancel(shared, run.as_deref(), agent).map(ok_json)
        }
        (&Method::POST, ["api", "agents", agent, "message"]) => {
            let agent = agent.to_string();
            relay(shared, run.as_deref(), request.into_body(), message(&agent))
                .await
                .map(ok_json)
        }
        (&Method::POST, ["api", "requests", id, "answer"]) => {
            let id = id.to_string();
            relay(shared, run.as_deref(), request.into_body(), answer(&id))
                .await
                .map(ok_json)
        }
        (_, ["api", ..]) => Err((
            StatusCode::NOT_FOUND,
            format!("no endpoint {method} {path}"),
        )),
        _ => Err((StatusCode::NOT_FOUND, format!("nothing at {path}"))),
    };
    match result {
        Ok(response) => response,
        Err((status, message)) => json_response(status, &json!({ "error": message })),
    }
}

/// The run `run` names (`None`: the one served).
fn target(shared: &Shared, run: Option<&str>) -> Result<Target, Failure> {
    let find = |dir: &std::path::Path, name: &str| {
        if name != "last" && !crate::config::is_valid_name(name) {
            return Err((StatusCode::BAD_REQUEST, format!("`{name}` is not a run id")));
        }
        read::find(dir, name)
            .map(Target::Journal)
            .map_err(|error| (StatusCode::NOT_FOUND, format!("{error:#}")))
    };
    match (&shared.source, run) {
        (Source::Live { run: live, .. }, None) => Ok(Target::Live(live.clone())),
        (Source::Live { run: live, .. }, Some(id)) if id == live.run_id() => {
            Ok(Target::Live(live.clone()))
        }
        (
            Source::Live {
                journal_dir: Some(dir),
                ..
            },
            Some(name),
        )
        | (Source::Journal { dir, .. }, Some(name)) => find(dir, name),
        (
            Source::Live {
                journal_dir: None, ..
            },
            Some(_),
        ) => Err((
            StatusCode::NOT_FOUND,
            "runs are not journaled ([journal] enabled = false)".into(),
        )),
        (
            Source::Journal {
                run: Some(path), ..
            },
            None,
        ) => Ok(Target::Journal(path.clone())),
        (Source::Journal { run: None, .. }, None) => Err((
            StatusCode::NOT_FOUND,
            "no run chosen: /api/runs lists them, ?run=ID picks one".into(),
        )),
    }
}

async fn snapshot(shared: &Shared, run: Option<&str>) -> Result<Value, Failure> {
    match target(shared, run)? {
        Target::Live(live) => Ok(live.snapshot()),
        Target::Journal(path) => {
            let (_, snapshot) = journal_snapshot(shared.feeds.of(&path)).await?;
            Ok(now(&snapshot))
        }
    }
}

/// The snapshot of a journaled run from its shared `feed`, with the journal bytes it
/// covers.
async fn journal_snapshot(feed: Arc<Feed>) -> Result<(u64, Arc<Value>), Failure> {
    tokio::task::spawn_blocking(move || feed.snapshot())
        .await
        .map_err(|error| (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?
        .map_err(|error| (StatusCode::INTERNAL_SERVER_ERROR, error))
}

/// A shared snapshot as sent now: its `now_ms` is this moment's.
fn now(snapshot: &Value) -> Value {
    let mut snapshot = snapshot.clone();
    snapshot["run"]["now_ms"] = crate::events::now_ms().into();
    snapshot
}

async fn runs(shared: &Shared) -> Result<Value, Failure> {
    let dir = match &shared.source {
        Source::Live {
            journal_dir: Some(dir),
            ..
        }
        | Source::Journal { dir, .. } => dir.clone(),
        Source::Live {
            journal_dir: None, ..
        } => {
            return Err((
                StatusCode::NOT_FOUND,
                "runs are not journaled ([journal] enabled = false)".into(),
            ))
        }
    };
    blocking(move || Ok(api::runs(&dir))).await
}

async fn transcript(shared: &Shared, run: Option<&str>, agent: &str) -> Result<Value, Failure> {
    let (path, row) = match target(shared, run)? {
        Target::Live(live) => match live.journal_path() {
            Some(path) => (path, live.agent(agent)),
            None => {
                return Err((
                    StatusCode::NOT_FOUND,
                    "transcripts come from the run's journal, and this run is not journaled".into(),
                ))
            }
        },
        Target::Journal(path) => (path, None),
    };
    let agent_id = agent.to_string();
    let found = blocking(move || {
        let (run_id, records) =
            feed::agent_records(&path, &agent_id).map_err(anyhow::Error::msg)?;
        Ok(api::transcript(&run_id, &agent_id, &records, row).unwrap_or(Value::Null))
    })
    .await?;
    Some(found).filter(|found| !found.is_null()).ok_or_else(|| {
        (
            StatusCode::NOT_FOUND,
            format!("the run has no agent `{agent}`"),
        )
    })
}

fn cancel(shared: &Shared, run: Option<&str>, agent: &str) -> Result<Value, Failure> {
    let Target::Live(live) = target(shared, run)? else {
        return Err((
            StatusCode::CONFLICT,
            "only a run of this process can be cancelled; this one is read from its journal".into(),
        ));
    };
    match live.cancel(agent) {
        CancelJob::Cancelled(job) => Ok(json!({"cancelled": job.id.0, "profile": job.profile})),
        CancelJob::Finished(job) => Err((
            StatusCode::CONFLICT,
            format!("agent {} already finished ({})", job.id, job.phase.name()),
        )),
        CancelJob::NotFound => Err((StatusCode::NOT_FOUND, format!("no agent `{agent}`"))),
    }
}

/// The largest message request body read, in bytes (the run's own limit,
/// `max_message_kb`, is checked by the run).
const MAX_MESSAGE_BODY: usize = 1 << 20;

/// A person's POST to the run `run` names, made into a request by `asked` and sent
/// through the run's control socket; answered with the run's reply (a message's
/// receipt, what became of an answer).
async fn relay(
    shared: &Shared,
    run: Option<&str>,
    body: Incoming,
    asked: impl FnOnce(&Value) -> ControlRequest,
) -> Result<Value, Failure> {
    let request = asked(&posted(body).await?);
    control_request(shared, run, request).await
}

/// A person's message to agent `agent`, from its POST's body.
fn message(agent: &str) -> impl FnOnce(&Value) -> ControlRequest + '_ {
    move |asked| {
        ControlRequest::Send(SendRequest {
            agent: agent.to_string(),
            message: text_of(asked, "message"),
            mode: asked["mode"].as_str().map(str::to_string),
            from: "the web view".into(),
        })
    }
}

/// A person's answer to request `id`, from its POST's body.
fn answer(id: &str) -> impl FnOnce(&Value) -> ControlRequest + '_ {
    move |asked| {
        ControlRequest::Answer(AnswerRequest {
            request: id.to_string(),
            verdict: text_of(asked, "verdict"),
            text: text_of(asked, "text"),
            by: "web".into(),
        })
    }
}

/// The string `key` of a POST's body (empty when it is missing).
fn text_of(asked: &Value, key: &str) -> String {
    asked[key].as_str().unwrap_or_default().to_string()
}

/// A POST's JSON body, at most [`MAX_MESSAGE_BODY`] bytes.
async fn posted(body: Incoming) -> Result<Value, Failure> {
    let bytes = http_body_util::Limited::new(body, MAX_MESSAGE_BODY)
        .collect()
        .await
        .map_err(|error| {
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("cannot read the request: {error}"),
            )
        })?
        .to_bytes();
    serde_json::from_slice(&bytes)
        .map_err(|error| (StatusCode::BAD_REQUEST, format!("not JSON: {error}")))
}

/// `request` sent to the control socket of the run `run` names (here or in another
/// process), its reply as JSON; a rejection is 422.
async fn control_request(
    shared: &Shared,
    run: Option<&str>,
    request: ControlRequest,
) -> Result<Value, Failure> {
    let journal = match target(shared, run)? {
        Target::Live(live) => live.journal().ok_or((
            StatusCode::CONFLICT,
            "this run is not journaled, so it takes no messages or answers from here ([journal] enabled = false)".to_string(),
        ))?,
        Target::Journal(path) => path,
    };
    let reply = control::request(&control::socket_path(&journal), &request)
        .await
        .map_err(|error| {
            (
                StatusCode::CONFLICT,
                format!("the run is not running here or in another process ({error}): a message or an answer reaches only a live run (`warren resume` continues one whose process died)"),
            )
        })?;
    match reply.receipt.as_str() {
        "rejected" => Err((StatusCode::UNPROCESSABLE_ENTITY, reply.text)),
        _ => Ok(json!({"receipt": reply.receipt, "seq": reply.seq, "text": reply.text})),
    }
}

/// The event stream of the run `run` names.
fn events(shared: &Shared, run: Option<&str>) -> Result<Response<Body>, Failure> {
    let body: Body = match target(shared, run)? {
        Target::Live(live) => {
            let (first, receiver) = live.subscribe();
            let frames = futures_util::stream::unfold(
                (Some(first), Some(receiver)),
                |(first, receiver)| async move {
                    if let Some(first) = first {
                        return Some((first, (None, receiver)));
                    }
                    let mut receiver = receiver?;
                    match receiver.recv().await {
                        Ok(frame) => Some((frame, (None, Some(receiver)))),
                        // Too far behind: told so, the stream ends; the page
                        // reconnects and starts over from a snapshot.
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                            let mut frame = String::new();
                            push_frame(
                                &mut frame,
                                "lagged",
                                &json!({"missed": missed}).to_string(),
                            );
                            Some((Bytes::from(frame), (None, None)))
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => None,
                    }
                },
            );
            stream_body(frames)
        }
        Target::Journal(path) => {
            let feed = shared.feeds.of(&path);
            let frames = futures_util::stream::unfold(
                (feed, None::<u64>, true),
                |(feed, seen, first)| async move {
                    let mut first = first;
                    loop {
                        if !first {
                            tokio::time::sleep(JOURNAL_POLL).await;
                        }
                        first = false;
                        let Ok((read, snapshot)) = journal_snapshot(feed.clone()).await else {
                            continue;
                        };
                        if Some(read) == seen {
                            continue;
                        }
                        let mut frame = String::new();
                        push_frame(&mut frame, "snapshot", &now(&snapshot).to_string());
                        return Some((Bytes::from(frame), (feed, Some(read), false)));
                    }
                },
            );
            stream_body(frames)
        }
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    access::protect(headers);
    Ok(response)
}

fn stream_body(frames: impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static) -> Body {
    use futures_util::StreamExt as _;
    // The client reconnects half a second after the stream ends.
    let retry = futures_util::stream::once(async { Bytes::from_static(b"retry: 500\n\n") });
    BodyExt::boxed(StreamBody::new(
        retry
            .chain(frames)
            .map(|bytes| Ok::<_, Infallible>(Frame::data(bytes))),
    ))
}

/// Runs `work` (journal reading) off the async threads.
async fn blocking(
    work: impl FnOnce() -> anyhow::Result<Value> + Send + 'static,
) -> Result<Value, Failure> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?
        .map_err(|error| (StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}")))
}

/// The value of `key` in `query`, percent-decoding left out: run ids need none.
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_string)
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut response = Response::new(BodyExt::boxed(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    access::protect(headers);
    response
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    text(status, "application/json", value.to_string())
}

fn ok_json(value: Value) -> Response<Body> {
    json_response(StatusCode::OK, &value)
}
