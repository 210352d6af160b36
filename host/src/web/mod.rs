//! The web view of a run: `warren run --web` serves the run as it goes, `warren view`
//! serves journaled runs. One page (HTML, CSS and plain JavaScript embedded in the
//! binary: no Node, no build step, nothing fetched from elsewhere, so it works
//! offline), a JSON API and a server-sent event stream beside it, on a small hyper
//! listener.
//!
//! Safe by default: it listens on loopback unless given another address, every request
//! must carry the random token printed with the URL (the page trades it for a cookie on
//! its first load, as Jupyter does), `Host` must name the address listened on (no DNS
//! rebinding) and `Origin`, when sent, this server; the page runs under a strict
//! content security policy (scripts from this server only, none inline). Nothing
//! secret is served: the tree comes from the run's events and transcripts from its
//! journal, neither of which holds API keys.
//!
//! Layout: [`live`] (the served run: the shared fold of its events, and the frames
//! sent to event-stream clients), `source` (what a server shows), `access` (token, `Host` and `Origin` checks, the
//! response headers), `api` (the JSON the endpoints answer), `server` (the listener
//! and routes), `feed` (journaled runs, each journal read once, incrementally, for
//! all its clients).

mod access;
mod api;
mod feed;
pub(crate) mod live;
mod server;
mod source;

use std::future::Future;
use std::net::SocketAddr;

pub(crate) use self::live::LiveRun;
pub(crate) use self::source::Source;

/// The address `--web` listens on when given none: loopback, a free port.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:0";

/// A web server listening, not yet serving.
pub(crate) struct WebServer {
    listener: tokio::net::TcpListener,
    /// The address it listens on (the port chosen when asked for 0).
    local: SocketAddr,
    /// The secret every request carries.
    token: String,
    source: Source,
}

impl WebServer {
    /// Listens on `address` for `source`, with a fresh random token.
    pub(crate) async fn bind(address: SocketAddr, source: Source) -> anyhow::Result<WebServer> {
        use anyhow::Context as _;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("listening on {address} for the web view"))?;
        let local = listener.local_addr()?;
        Ok(WebServer {
            listener,
            local,
            token: access::new_token()?,
            source,
        })
    }

    /// The page's address, token included: what to open.
    pub(crate) fn url(&self) -> String {
        let host = if self.local.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            match self.local.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                std::net::IpAddr::V4(ip) => ip.to_string(),
            }
        };
        format!("http://{host}:{}/?token={}", self.local.port(), self.token)
    }

    /// Serves until `shutdown` resolves.
    pub(crate) async fn serve(self, shutdown: impl Future<Output = ()>) {
        server::serve(self.listener, self.local, self.token, self.source, shutdown).await
    }
}
