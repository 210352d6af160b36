//! The arguments of the servers for other agents: `warren mcp` and `warren a2a`.

use std::path::PathBuf;

use clap::Args;

use crate::config::DEFAULT_PROFILE;

#[derive(Debug, Args)]
pub(super) struct McpArgs {
    /// The profile whose tools (and capabilities) the clients get.
    #[arg(long, short, default_value = DEFAULT_PROFILE)]
    pub(super) profile: String,
    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8931; port 0 picks a free
    /// one, printed on stderr) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub(super) http: Option<std::net::SocketAddr>,
    /// With --http: the bearer token clients must send (`Authorization: Bearer
    /// TOKEN`) is this file's text; several tokens, one per line, are separate
    /// credentials (each sees only its own MCP tasks). Without it, WARREN_MCP_TOKEN's value, else a
    /// token generated at start and printed on stderr.
    #[arg(
        long,
        value_name = "FILE",
        requires = "http",
        conflicts_with = "no_auth"
    )]
    pub(super) token_file: Option<PathBuf>,
    /// With --http: require no token, so any process that can connect may use the
    /// server; only on a loopback address.
    #[arg(long, requires = "http")]
    pub(super) no_auth: bool,
    /// With --http: sessions open at once; an `initialize` over it gets 503
    /// [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_sessions: Option<u32>,
    /// With --http: connections open at once; one over it is closed at once
    /// [default: 256].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_connections: Option<u32>,
    /// With --http: seconds a connection may take to send a request's headers (or
    /// stay idle between requests) [default: 10].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) header_timeout: Option<u64>,
    /// With --http: seconds a session may go without a message before it ends and its
    /// agents are cancelled [default: 900].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) session_idle: Option<u64>,
    /// With --http: sessions one credential (bearer token) may hold at once; past it
    /// an `initialize` ends that credential's least recently used idle session, or
    /// gets 503 [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_sessions_per_token: Option<u32>,
    /// With --http: seconds a session must have had no request under way before a
    /// new session may end it to take its place (least recently used first) when a
    /// session limit is reached [default: 60].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) session_evict_after: Option<u64>,
    /// Seconds an `await_agents` call without `timeout_s` waits at most before it
    /// returns the blocks of agents still running (the client calls it again);
    /// keep it under the client's own tool timeout [default: 4].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) await_limit: Option<u64>,
    /// With --http: seconds a finished MCP task (a spawn_agent called with `task`)
    /// stays fetchable after it ends [default: 3600].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) task_retention: Option<u64>,
    /// With --http: MCP tasks one credential may hold at once, running or kept
    /// [default: 32].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_tasks: Option<u32>,
    /// With --http: the largest task result kept, in bytes; a larger one is kept as
    /// an error naming its size [default: 1048576].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub(super) task_result_limit: Option<u64>,
}

#[derive(Debug, Args)]
pub(super) struct A2aArgs {
    /// A profile to serve as an agent; repeat for several [default: main].
    #[arg(long, short, value_name = "PROFILE", default_value = DEFAULT_PROFILE)]
    pub(super) profile: Vec<String>,
    /// The address to serve on (port 0 picks a free one, printed on stderr).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8932")]
    pub(super) http: std::net::SocketAddr,
    /// The bearer token clients must send (`Authorization: Bearer TOKEN`) is this
    /// file's text; several tokens, one per line, are separate credentials (each
    /// sees only its own tasks). Without it, WARREN_MCP_TOKEN's value, else a token
    /// generated at start and printed on stderr.
    #[arg(long, value_name = "FILE", conflicts_with = "no_auth")]
    pub(super) token_file: Option<PathBuf>,
    /// Require no token, so any process that can connect may use the server; only
    /// on a loopback address.
    #[arg(long)]
    pub(super) no_auth: bool,
    /// The URL clients reach this server at, written in the agent cards, when it is
    /// not http://ADDR (behind a proxy).
    #[arg(long, value_name = "URL")]
    pub(super) public_url: Option<String>,
    /// Connections open at once; one over it is closed at once [default: 256].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_connections: Option<u32>,
    /// Seconds a connection may take to send a request's headers (or stay idle
    /// between requests) [default: 10].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) header_timeout: Option<u64>,
    /// Tasks one credential may hold at once, running or ended and kept
    /// [default: 32].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_tasks: Option<u32>,
    /// Seconds an ended task stays readable with GetTask (its run stays in the
    /// journal) [default: 3600].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) task_retention: Option<u64>,
}
