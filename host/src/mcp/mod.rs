//! `warren mcp`: warren as an MCP server, with the official Rust SDK (`rmcp`), over
//! stdio (one client: the process that started warren) or Streamable HTTP (a session
//! per client, by `Mcp-Session-Id`).
//!
//! Each MCP session is a [`Session`]: one job tree with its own budget and concurrency
//! limit, whose root is the client. The client sees the profile's tools, each call run
//! in a fresh sandbox under the profile's capabilities (a denial is a tool error with
//! its reason), and, when the profile may spawn, the spawn tools with the same
//! contracts as inside warren. A foreground `spawn_agent` or an `await_agents` call
//! with a progress token reports its agents' turns, tools, tokens and cost as
//! `notifications/progress`; `notifications/cancelled` cancels the call and the agents
//! it started; a session that ends (stdin closed, HTTP session deleted or expired)
//! cancels all of its agents (not its tasks', which run in sessions of their own).
//! Log records go to stderr and to the client
//! (`logging`). Nothing but the protocol is ever written to stdout.
//!
//! This module uses only the [`Session`] API and the public `Host`, `Config` and event
//! types: the agents, jobs and queue behind them are not its business.
//!
//! Layout: `server` (one MCP session: rmcp's `ServerHandler` over a [`Session`]),
//! `logging` (records to clients), `http` (the Streamable HTTP listener, checking
//! the bearer token and the Origin with `listener::auth` and `listener::origin`),
//! `session_book` (its sessions' places, owners and use: idle ones make room),
//! `tasks` (MCP tasks over
//! HTTP: spawns that outlive their session), `task_capability` (the tasks support
//! added to rmcp's answers); this file serves stdio or HTTP.

// `logging/setLevel` is deprecated from MCP 2026-07-28 on (SEP-2577); warren speaks
// the session-based revisions up to 2025-11-25, where it is current.
#![allow(deprecated)]

mod elicit;
mod http;
mod logging;
mod served;
mod server;
mod session_book;
mod standing;
mod task_capability;
mod task_extension;
mod tasks;

pub(crate) use self::http::HttpLimits;
pub(crate) use self::logging::layer as log_layer;
pub(crate) use self::served::{SessionOptions, DEFAULT_AWAIT_LIMIT};
pub(crate) use self::tasks::TaskLimits;

use std::future::Future;
use std::net::SocketAddr;

use anyhow::Context as _;
use rmcp::ServiceExt as _;

use self::server::WarrenServer;
use crate::host::Host;
use crate::listener::auth::HttpAuth;

/// How to serve.
#[derive(Clone, Debug)]
pub(crate) struct McpOptions {
    /// What every session gets.
    pub session: SessionOptions,
    /// Serve Streamable HTTP on this address instead of stdio.
    pub http: Option<SocketAddr>,
    /// What HTTP clients may make the server hold.
    pub http_limits: HttpLimits,
    /// What the HTTP server's tasks may hold.
    pub task_limits: TaskLimits,
    /// Who may use the HTTP server.
    pub http_auth: HttpAuth,
}

/// Serves MCP until the client leaves (stdio) or `shutdown` resolves; every session's
/// agents are cancelled when it ends.
pub(crate) async fn serve(
    host: Host,
    options: McpOptions,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    // A bad profile is a configuration error, reported before any client connects.
    host.config().profile(
        options
            .session
            .profile
            .as_deref()
            .unwrap_or(crate::config::DEFAULT_PROFILE),
    )?;
    match options.http {
        Some(address) => {
            http::serve(
                host,
                options.session,
                address,
                options.http_limits,
                options.task_limits,
                options.http_auth,
                shutdown,
            )
            .await
        }
        None => serve_stdio(host, &options.session, options.task_limits, shutdown).await,
    }
}

/// One session on stdin/stdout, until stdin closes or `shutdown` resolves.
async fn serve_stdio(
    host: Host,
    options: &SessionOptions,
    task_limits: TaskLimits,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    // One client, the process that started warren: the one credential. Its
    // 2026-07-28 requests may run spawns as tasks (the tasks extension).
    let tasks = tasks::Tasks::new(host.clone(), options.clone(), task_limits);
    let server = WarrenServer::new(&host, options, [0; 32])?.with_tasks(std::sync::Arc::new(tasks));
    let session = server.session.clone();
    let served = async {
        let running = server
            .serve(rmcp::transport::stdio_pipes())
            .await
            .context("starting the MCP session on stdio")?;
        running
            .waiting()
            .await
            .context("the MCP session on stdio failed")?;
        anyhow::Ok(())
    };
    let outcome = tokio::select! {
        outcome = served => outcome,
        () = shutdown => Ok(()),
    };
    session.cancel();
    outcome
}
