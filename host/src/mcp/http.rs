//! MCP over Streamable HTTP at `http://ADDR/mcp`: rmcp's service behind a small hyper
//! HTTP/1.1 listener. Each client session (`Mcp-Session-Id`) gets its own warren
//! session; deleting it, or leaving it idle for [`HttpLimits::session_idle`], ends it
//! and cancels its agents.
//!
//! Anyone who can connect must not be able to exhaust the server, so everything a
//! client can make it hold is bounded ([`HttpLimits`]): sessions (a new one over the
//! limit is refused with 503 before anything is made for it), connections (one over
//! the limit is closed at once), the time to send a request's headers, and a session's
//! idle time. Connections are accepted through [`crate::listener`], as the web view's
//! are: a failing `accept` (no descriptors left) is retried with a growing pause, and
//! each burst of failures is logged twice, not once per try.
//!
//! Only `Host` headers naming a loopback name, or the address listened on, are
//! accepted (rmcp's DNS-rebinding guard), a request whose `Origin` names another host
//! is refused with 403 (as MCP requires of servers), and one without the server's
//! bearer token with 401 ([`crate::listener::auth`]), all before rmcp sees it. MCP tasks
//! (`tools/call` with `task`, `tasks/*`) are answered here too ([`super::tasks`]),
//! and the tasks capability is added to rmcp's `initialize` and `tools/list` answers.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::Context as _;
use http_body_util::{BodyExt as _, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use super::server::WarrenServer;
use super::session_book::{SessionBook, SessionLimits};
use super::standing::Standing;
use super::tasks::{TaskLimits, Tasks};
use crate::host::{Host, Session};
use crate::listener::auth::{HttpAuth, Owner};
use crate::listener::{ListenLimits, ServerName};

/// The largest request body read (a JSON-RPC message).
const MAX_BODY: usize = 4 << 20;
/// The path MCP is served at.
const MCP_PATH: &str = "/mcp";

/// What one Streamable HTTP server lets its clients hold (`warren mcp` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HttpLimits {
    /// Sessions open at once (`--max-sessions`, default 64). Each holds a job tree
    /// and its agents; an `initialize` over the limit gets 503 and a JSON-RPC error
    /// naming it.
    pub max_sessions: usize,
    /// Connections open at once (`--max-connections`, default 256); one over the
    /// limit is closed as soon as it is accepted. Each client holds one or two (a
    /// long call's stream, the session's own stream).
    pub max_connections: usize,
    /// Longest a connection may take to send a request's headers, or stay idle
    /// between requests (`--header-timeout`, default 10 s); it is closed then.
    pub header_timeout: Duration,
    /// How long a session may go without a message from its client or to it before
    /// it ends, cancelling its agents (`--session-idle`, default 15 min): a client
    /// that vanished without deleting its session gives its place back then. A call
    /// that reports progress keeps its session alive.
    pub session_idle: Duration,
    /// Sessions one credential may hold at once (`--max-sessions-per-token`, default
    /// 64): past it, an `initialize` ends that credential's least recently used idle
    /// session, or is refused with 503 naming the flag.
    pub max_sessions_per_token: usize,
    /// How long a session must have had no request under way (its event stream
    /// included) before a new session may end it to take its place, least recently
    /// used first, when a limit is reached (`--session-evict-after`, default 60 s):
    /// a client that never closes its sessions cannot lock the others out.
    pub evict_after: Duration,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        HttpLimits {
            max_sessions: 64,
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            session_idle: Duration::from_secs(15 * 60),
            max_sessions_per_token: 64,
            evict_after: Duration::from_secs(60),
        }
    }
}

tokio::task_local! {
    /// The session slot of the request being handled when it may open a session (a
    /// POST without `Mcp-Session-Id`), for the service factory to take. rmcp also
    /// asks the factory for a service to look up a tool's schema on every
    /// `tools/call`; with no slot to take, that look-up finds nothing (as warren's
    /// handler would) instead of opening and closing a whole session.
    /// The slot comes with the credential of the client opening the session; a
    /// 2026-07-28 request (no session) brings its credential's standing tree instead.
    static OPENING: RefCell<Option<Opening>>;
    /// The warren session the factory made for the request being handled, for the
    /// gate to know it by its `Mcp-Session-Id` (an `await_agents` task awaits its
    /// agents).
    static MADE: RefCell<Option<Weak<Session>>>;
}

/// What the service factory serves the request being handled with.
enum Opening {
    /// A new session (a legacy client's POST without `Mcp-Session-Id`), in this
    /// place among the sessions, for this credential.
    Session(OwnedSemaphorePermit, Owner),
    /// A 2026-07-28 request: its credential's standing tree.
    Standing(Arc<Session>, Owner),
}

/// A response body.
type Body = crate::listener::BoxBody;

/// A request the gate passes on to rmcp: its body read, its method, and whether it
/// is a 2026-07-28 request.
type Passed = (hyper::Request<Full<bytes::Bytes>>, Option<String>, bool);

/// Whether `message` is a request of the 2026-07-28 revision or later, which has no
/// session: not `initialize`, and its `_meta` (or the `MCP-Protocol-Version` header)
/// names such a revision.
fn is_modern(message: &serde_json::Value, headers: &hyper::HeaderMap) -> bool {
    const MODERN: &str = "2026-07-28";
    if message.get("id").is_none() || message["method"] == "initialize" {
        return false;
    }
    let in_meta = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
    let in_header = headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok());
    in_meta
        .or(in_header)
        .is_some_and(|version| version >= MODERN)
}

/// rmcp's Streamable HTTP service of warren sessions.
type McpService = StreamableHttpService<WarrenServer, LocalSessionManager>;

/// Listens on `address` until `shutdown` resolves, then ends every session.
pub(super) async fn serve(
    host: Host,
    session: super::served::SessionOptions,
    address: SocketAddr,
    limits: HttpLimits,
    task_limits: TaskLimits,
    auth: HttpAuth,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("listening on {address} (--http)"))?;
    let local = listener.local_addr()?;
    let stop = CancellationToken::new();
    let (service, gate) = service_and_gate(host, session, local, &limits, task_limits, auth, &stop);
    // stderr, as every message of warren mcp: stdout is never used.
    eprintln!("warren mcp: serving MCP (Streamable HTTP) at http://{local}{MCP_PATH}");
    tracing::info!(%local, ?limits, "MCP over HTTP: listening");
    let limits = ListenLimits {
        max_connections: limits.max_connections,
        header_timeout: limits.header_timeout,
    };
    let name = ServerName {
        server: "MCP over HTTP",
        limit: "--max-connections",
    };
    crate::listener::serve(listener, limits, name, shutdown, move |request| {
        let (service, gate) = (service.clone(), gate.clone());
        async move { gate.handle(&service, request).await }
    })
    .await;
    stop.cancel();
    Ok(())
}

/// The MCP service (a warren session per MCP session, rmcp's session manager) and
/// the gate in front of it, for a server listening on `local`.
fn service_and_gate(
    host: Host,
    session: super::served::SessionOptions,
    local: SocketAddr,
    limits: &HttpLimits,
    task_limits: TaskLimits,
    auth: HttpAuth,
    stop: &CancellationToken,
) -> (McpService, Arc<Gate>) {
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !local.ip().is_unspecified() {
        hosts.push(local.ip().to_string());
    }
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_cancellation_token(stop.child_token());
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(limits.session_idle);
    let sessions = Arc::new(sessions);
    let tasks = Arc::new(Tasks::new(host.clone(), session.clone(), task_limits));
    let standing = Standing::new(host.clone(), session.clone(), limits.session_idle);
    let served_tasks = tasks.clone();
    let service = StreamableHttpService::new(
        move || {
            let opening = OPENING
                .try_with(|slot| slot.borrow_mut().take())
                .ok()
                .flatten()
                .ok_or_else(|| std::io::Error::other("only a new session's request opens one"))?;
            let server = match opening {
                Opening::Session(slot, owner) => {
                    let server =
                        WarrenServer::new(&host, &session, owner).map_err(std::io::Error::other)?;
                    let _ = MADE.try_with(|made| {
                        *made.borrow_mut() = Some(Arc::downgrade(&server.session))
                    });
                    server.holding(slot)
                }
                Opening::Standing(tree, owner) => WarrenServer::standing(tree, owner),
            };
            Ok(server.with_tasks(served_tasks.clone()))
        },
        sessions.clone(),
        config,
    );
    let gate = Arc::new(Gate {
        local,
        auth,
        tasks,
        standing,
        open_sessions: sessions,
        book: SessionBook::new(SessionLimits {
            max_sessions: limits.max_sessions,
            max_sessions_per_token: limits.max_sessions_per_token,
            evict_after: limits.evict_after,
        }),
    });
    (service, gate)
}

/// What every request passes before rmcp sees it: the path, the `Origin`, the bearer
/// token, and for a request that may open a session, a free session slot.
struct Gate {
    /// The address listened on: an `Origin` naming it is the server's own.
    local: SocketAddr,
    /// Who may use the server.
    auth: HttpAuth,
    /// The tasks of every session.
    tasks: Arc<Tasks>,
    /// The standing trees of 2026-07-28 clients.
    standing: Standing,
    /// The sessions open, to check a task request's `Mcp-Session-Id`.
    open_sessions: Arc<LocalSessionManager>,
    /// The sessions' places, owners and use.
    book: Arc<SessionBook>,
}

impl Gate {
    /// The credential of a request that may be served: its path is MCP's, its
    /// `Origin` (if any) this server's, and it carries a token (when one is needed);
    /// else the refusal.
    fn admit(
        &self,
        request: &hyper::Request<hyper::body::Incoming>,
    ) -> Result<Owner, Box<hyper::Response<Body>>> {
        if request.uri().path() != MCP_PATH {
            let mut response = hyper::Response::new(
                http_body_util::Full::new(bytes::Bytes::from(format!(
                    "warren serves MCP at {MCP_PATH}\n"
                )))
                .boxed(),
            );
            *response.status_mut() = hyper::StatusCode::NOT_FOUND;
            return Err(Box::new(response));
        }
        crate::listener::auth::admit(request.headers(), self.local, &self.auth)
            .map_err(|refused| Box::new(refused.answer("warren mcp", "MCP", self.local, refusal)))
    }

    async fn handle(
        &self,
        service: &StreamableHttpService<WarrenServer, LocalSessionManager>,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Body> {
        let owner = match self.admit(&request) {
            Ok(owner) => owner,
            Err(refused) => return *refused,
        };
        let session_id = request
            .headers()
            .get("mcp-session-id")
            .and_then(|id| id.to_str().ok())
            .map(str::to_string);
        // The session is in use until the response (an event stream, maybe) ends.
        let in_use = session_id.as_deref().and_then(|id| self.book.in_use(id));
        let (request, method, modern) = match self.tasks_first(owner, request).await {
            Ok(response) => return response,
            Err(passed) => passed,
        };
        let opens_session = request.method() == hyper::Method::POST && session_id.is_none();
        let opening = if opens_session && modern {
            match self.standing.tree(owner) {
                Ok(tree) => Some(Opening::Standing(tree, owner)),
                Err(error) => {
                    return refusal(
                        hyper::StatusCode::INTERNAL_SERVER_ERROR,
                        &format!("{error:#}"),
                    )
                }
            }
        } else if opens_session {
            match self.book.admit(owner, &self.open_sessions).await {
                Ok(slot) => Some(Opening::Session(slot, owner)),
                Err(full) => return refusal(hyper::StatusCode::SERVICE_UNAVAILABLE, &full),
            }
        } else {
            None
        };
        let delete = request.method() == hyper::Method::DELETE;
        let made = RefCell::new(None);
        let response = MADE
            .scope(
                made,
                OPENING.scope(RefCell::new(opening), async {
                    let response = service.handle(request).await;
                    (response, MADE.with(|made| made.borrow_mut().take()))
                }),
            )
            .await;
        let (mut response, made) = (response.0, response.1);
        if let (Some(made), Some(id)) = (made, response.headers().get("mcp-session-id")) {
            if let Ok(id) = id.to_str() {
                self.book.opened(id, owner, made.clone());
                self.tasks.opened(id, made);
            }
        }
        // rmcp ends a deleted session with 202; clients (the Python SDK) read anything
        // but 200 and 204 as a failed termination.
        if delete && response.status() == hyper::StatusCode::ACCEPTED {
            *response.status_mut() = hyper::StatusCode::NO_CONTENT;
            if let Some(id) = &session_id {
                self.book.closed(id);
            }
        }
        let response = match method.as_deref() {
            Some(method @ ("initialize" | "tools/list")) => {
                super::task_capability::advertise(method, response).await
            }
            _ => response,
        };
        match in_use {
            Some(in_use) => in_use.hold(response),
            None => response,
        }
    }
}

impl Gate {
    /// Answers a task request (a `tools/call` with `task`, `tasks/*`) of an open
    /// session itself; any other request comes back, its body read, for rmcp, with
    /// its method and whether it is a 2026-07-28 request ([`is_modern`]).
    async fn tasks_first(
        &self,
        owner: Owner,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<Body>, Passed> {
        let (parts, body) = request.into_parts();
        let bytes = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => {
                return Ok(refusal(
                    hyper::StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("a request body may hold {MAX_BODY} bytes at most"),
                ))
            }
        };
        let session = parts
            .headers
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let message = (parts.method == hyper::Method::POST)
            .then(|| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .flatten();
        let method = message
            .as_ref()
            .and_then(|message| message["method"].as_str())
            .map(str::to_string);
        let modern = message
            .as_ref()
            .is_some_and(|message| is_modern(message, &parts.headers));
        let passed = || {
            (
                hyper::Request::from_parts(parts, Full::new(bytes.clone())),
                method.clone(),
                modern,
            )
        };
        let (Some(message), Some(session)) = (&message, session) else {
            return Err(passed());
        };
        let method = message["method"].as_str().unwrap_or_default();
        let params = &message["params"];
        let is_task = method.starts_with("tasks/")
            || (method == "tools/call" && params.get("task").is_some());
        if !is_task || message.get("id").is_none() {
            return Err(passed());
        }
        use rmcp::transport::streamable_http_server::SessionManager as _;
        if !self
            .open_sessions
            .has_session(&session.as_str().into())
            .await
            .unwrap_or(false)
        {
            // rmcp's own answer to an unknown session.
            return Err(passed());
        }
        let Some(answer) = self.tasks.answer(owner, &session, method, params).await else {
            return Err(passed());
        };
        let body = match answer {
            Ok(result) => {
                serde_json::json!({"jsonrpc": "2.0", "id": message["id"], "result": result})
            }
            Err((code, text)) => {
                serde_json::json!({"jsonrpc": "2.0", "id": message["id"], "error": {"code": code, "message": text}})
            }
        };
        let mut response =
            hyper::Response::new(Full::new(bytes::Bytes::from(body.to_string())).boxed());
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        Ok(response)
    }
}

/// A refused request: `status` with a JSON-RPC error saying why (`id` null: the
/// request was not read).
fn refusal(status: hyper::StatusCode, message: &str) -> hyper::Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": message},
    });
    let mut response = hyper::Response::new(
        http_body_util::Full::new(bytes::Bytes::from(body.to_string())).boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
