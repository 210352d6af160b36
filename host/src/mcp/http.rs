//! MCP over Streamable HTTP at `http://ADDR/mcp`: rmcp's service behind a small hyper
//! HTTP/1.1 listener. Each client session (`Mcp-Session-Id`) gets its own warren
//! session; deleting it, or leaving it idle for [`SESSION_IDLE`], ends it and cancels
//! its agents.
//!
//! Only `Host` headers naming a loopback name, or the address listened on, are
//! accepted (rmcp's DNS-rebinding guard). There is no authentication: listen on a
//! loopback address, or put an authenticating proxy in front.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use http_body_util::BodyExt as _;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::server::WarrenServer;
use crate::host::Host;

/// The path MCP is served at.
const MCP_PATH: &str = "/mcp";
/// How long a session may go without a message from its client or to it before it
/// ends (a client that vanished without deleting it). rmcp's default of 5 minutes
/// would end a session whose client quietly awaits a long sub-agent.
const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Listens on `address` until `shutdown` resolves, then ends every session.
pub(super) async fn serve(
    host: Host,
    profile: Option<String>,
    address: SocketAddr,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("listening on {address} (--http)"))?;
    let local = listener.local_addr()?;
    let stop = CancellationToken::new();
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
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let service = StreamableHttpService::new(
        move || WarrenServer::new(&host, profile.as_deref()).map_err(std::io::Error::other),
        Arc::new(sessions),
        config,
    );
    // stderr, as every message of warren mcp: stdout is never used.
    eprintln!("warren mcp: serving MCP (Streamable HTTP) at http://{local}{MCP_PATH}");
    tracing::info!(%local, "MCP over HTTP: listening");
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "MCP over HTTP: accepting a connection failed");
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = service.clone();
        tokio::spawn(async move {
            let handle = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let service = service.clone();
                async move {
                    if request.uri().path() != MCP_PATH {
                        let mut response = hyper::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from(format!(
                                "warren serves MCP at {MCP_PATH}\n"
                            )))
                            .boxed(),
                        );
                        *response.status_mut() = hyper::StatusCode::NOT_FOUND;
                        return Ok::<_, Infallible>(response);
                    }
                    let delete = request.method() == hyper::Method::DELETE;
                    let mut response = service.handle(request).await;
                    // rmcp ends a deleted session with 202; clients (the Python SDK)
                    // read anything but 200 and 204 as a failed termination.
                    if delete && response.status() == hyper::StatusCode::ACCEPTED {
                        *response.status_mut() = hyper::StatusCode::NO_CONTENT;
                    }
                    Ok(response)
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handle)
                .await;
            if let Err(error) = connection {
                tracing::debug!(%peer, %error, "MCP over HTTP: connection ended");
            }
        });
    }
    stop.cancel();
    Ok(())
}
