//! The A2A server: its listener, the routes (cards, each agent's JSON-RPC endpoint),
//! and the token and Origin checks before anything is read.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use http_body_util::BodyExt as _;

use super::options::A2aOptions;
use super::respond::{json, plain};
use super::{card, rpc, task};
use crate::host::Host;
use crate::listener::auth::{HttpAuth, Owner};
use crate::listener::{BoxBody, ListenLimits, ServerName};

/// The largest request body read, in bytes.
pub(super) const MAX_BODY: usize = 1 << 20;

/// The server's state, shared by every connection.
struct Server {
    host: Host,
    /// The profiles served, with their cards.
    agents: Vec<(String, serde_json::Value)>,
    auth: HttpAuth,
    /// The address listened on (Origin checks).
    local: SocketAddr,
    tasks: task::Tasks,
}

/// Serves `options.profiles` until `shutdown` resolves, then cancels the tasks
/// still running.
pub(crate) async fn serve(
    host: Host,
    options: A2aOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.http)
        .await
        .with_context(|| format!("cannot listen on {}", options.http))?;
    let local = listener.local_addr()?;
    let base = options
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{local}"));
    let base = base.trim_end_matches('/').to_string();
    let mut agents = Vec::new();
    for name in &options.profiles {
        let profile = host.config().profile(name)?;
        let card = card::card(
            &host,
            &profile,
            &format!("{base}/a2a/{name}"),
            &options.auth,
        );
        agents.push((name.clone(), card));
    }
    let journal_dir = host.config().journal_dir.clone();
    let server = Arc::new(Server {
        host,
        agents,
        auth: options.auth,
        local,
        tasks: task::Tasks::new(options.limits, journal_dir),
    });
    for (name, _) in &server.agents {
        eprintln!(
            "warren a2a: agent `{name}` at {base}/a2a/{name} (card: {base}/a2a/{name}/.well-known/agent-card.json)"
        );
    }
    eprintln!("warren a2a: serving on http://{local}  (Ctrl-C to stop)");
    let limits = ListenLimits {
        max_connections: options.limits.max_connections,
        header_timeout: options.limits.header_timeout,
    };
    let name = ServerName {
        server: "A2A over HTTP",
        limit: "--max-connections",
    };
    let serving = server.clone();
    crate::listener::serve(listener, limits, name, shutdown, move |request| {
        let server = serving.clone();
        async move { server.handle(request).await }
    })
    .await;
    server.tasks.cancel_all();
    Ok(())
}

impl Server {
    /// Answers one HTTP request: a card, a JSON-RPC call, or a refusal.
    async fn handle(
        self: Arc<Self>,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<BoxBody> {
        let path = request.uri().path().to_string();
        let Some((profile, rest)) = self.route(&path) else {
            let names: Vec<String> = self
                .agents
                .iter()
                .map(|(name, _)| format!("/a2a/{name}"))
                .collect();
            return plain(
                hyper::StatusCode::NOT_FOUND,
                &format!("warren a2a serves agents at {}\n", names.join(", ")),
            );
        };
        match (request.method(), rest) {
            (&hyper::Method::GET, Some(())) => {
                let card = &self.agents[profile].1;
                json(hyper::StatusCode::OK, card)
            }
            (&hyper::Method::POST, None) => {
                let owner = match self.admit(&request) {
                    Ok(owner) => owner,
                    Err(refusal) => return *refusal,
                };
                let version = request
                    .headers()
                    .get("a2a-version")
                    .map(|value| String::from_utf8_lossy(value.as_bytes()).trim().to_string());
                let traceparent = request
                    .headers()
                    .get("traceparent")
                    .and_then(|value| value.to_str().ok())
                    .filter(|value| value.len() <= rpc::MAX_TRACEPARENT)
                    .map(str::to_string);
                let body = match http_body_util::Limited::new(request.into_body(), MAX_BODY)
                    .collect()
                    .await
                {
                    Ok(body) => body.to_bytes(),
                    Err(_) => {
                        return plain(
                            hyper::StatusCode::PAYLOAD_TOO_LARGE,
                            &format!("an A2A request body may hold {MAX_BODY} bytes at most\n"),
                        )
                    }
                };
                let call = rpc::Call {
                    host: &self.host,
                    tasks: &self.tasks,
                    profile: &self.agents[profile].0,
                    owner,
                    traceparent,
                };
                call.answer(version.as_deref(), &body).await
            }
            _ => plain(
                hyper::StatusCode::METHOD_NOT_ALLOWED,
                "warren a2a: GET an agent's card, POST JSON-RPC to the agent\n",
            ),
        }
    }

    /// Which agent `path` names, and whether it names its card (`Some(())`) or its
    /// JSON-RPC endpoint (`None`).
    fn route(&self, path: &str) -> Option<(usize, Option<()>)> {
        const CARD: &str = "/.well-known/agent-card.json";
        if path == CARD {
            return Some((0, Some(())));
        }
        let rest = path.strip_prefix("/a2a/")?;
        let (name, card) = match rest.strip_suffix(CARD) {
            Some(name) => (name, Some(())),
            None => (rest.trim_end_matches('/'), None),
        };
        let index = self.agents.iter().position(|(agent, _)| agent == name)?;
        Some((index, card))
    }

    /// The credential of a request that may be served: its `Origin` (if any) this
    /// server's, and it carries a token (when one is needed); else the refusal.
    fn admit(
        &self,
        request: &hyper::Request<hyper::body::Incoming>,
    ) -> Result<Owner, Box<hyper::Response<BoxBody>>> {
        crate::listener::auth::admit(request.headers(), self.local, &self.auth).map_err(|refused| {
            Box::new(
                refused.answer("warren a2a", "A2A", self.local, |status, text| {
                    plain(status, &format!("{text}\n"))
                }),
            )
        })
    }
}
