//! `warren mcp`, `warren a2a`, `warren view` and `warren worker`: the long-running servers, each
//! serving until a signal stops it.

use std::path::Path;
use std::sync::Arc;

use super::args::{ViewArgs, WorkerArgs};
use super::failure::{load, Failure};
use super::runs::journal_dir;
use super::server_args::{A2aArgs, McpArgs};
use crate::config::Config;
use crate::host::Host;

/// `warren mcp`: the profile's tools and the sub-agent tools, over stdio or HTTP.
pub(super) async fn mcp(config_path: &Path, args: McpArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    config.profile(&args.profile)?;
    let http_auth = args.http_auth()?;
    // Clients often start servers with a minimal environment: without a
    // model's key, the tools that need no model are still served.
    let host = Host::load_for_serving(config).await?;
    let options = crate::mcp::McpOptions {
        http_auth,
        http_limits: args.http_limits(),
        task_limits: args.task_limits(),
        session: crate::mcp::SessionOptions {
            profile: Some(args.profile),
            await_limit: args.await_limit.map_or(
                crate::mcp::DEFAULT_AWAIT_LIMIT,
                std::time::Duration::from_secs,
            ),
        },
        http: args.http,
    };
    let (first, _) = shutdown_signals();
    crate::mcp::serve(host, options, first).await?;
    Ok(())
}

/// `warren view [RUN]`: the web view of a journaled run, or of the list, until Ctrl-C.
pub(super) async fn view(config_path: &Path, args: ViewArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    let dir = journal_dir(&config)?;
    let run = match &args.run {
        Some(name) => Some(crate::journal::read::find(&dir, name)?),
        None => None,
    };
    let server =
        crate::web::WebServer::bind(args.addr, crate::web::Source::Journal { dir, run }).await?;
    eprintln!("warren: web view at {}  (Ctrl-C to stop)", server.url());
    server
        .serve(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    Ok(())
}

/// `warren worker`: sub-agent jobs taken from the Redis queue until a signal.
pub(super) async fn worker(config_path: &Path, args: WorkerArgs) -> Result<(), Failure> {
    let mut config = Config::load(config_path)?;
    args.queue.apply(&mut config)?;
    if config.queue.redis.is_none() {
        return Err(Failure::Usage(format!(
            "warren worker needs a queue: pass --redis URL (or set WARREN_REDIS, or [queue] redis in {})",
            config.path.display()
        )));
    }
    let host = load(config).await?;
    let options = super::worker::WorkerOptions {
        concurrency: args.concurrency as usize,
        max_waiting: args.max_waiting as usize,
        name: args.name.unwrap_or_else(super::worker::default_name),
    };
    let (first, second) = shutdown_signals();
    super::worker::run(host, options, first, second).await?;
    Ok(())
}

/// The environment variable holding `warren mcp --http`'s bearer token.
const TOKEN_VARIABLE: &str = "WARREN_MCP_TOKEN";

impl McpArgs {
    /// The task limits: the defaults, with the flags given.
    fn task_limits(&self) -> crate::mcp::TaskLimits {
        let default = crate::mcp::TaskLimits::default();
        crate::mcp::TaskLimits {
            retention: seconds_or(self.task_retention, default.retention),
            max_tasks: count_or(self.max_tasks, default.max_tasks),
            max_result_bytes: count_or(self.task_result_limit, default.max_result_bytes),
        }
    }

    /// Who may use the HTTP server (see [`http_auth`]).
    fn http_auth(&self) -> Result<crate::listener::auth::HttpAuth, Failure> {
        match self.http {
            Some(address) => http_auth(
                address,
                self.no_auth,
                self.token_file.as_deref(),
                "warren mcp",
            ),
            None => Ok(crate::listener::auth::HttpAuth::Open),
        }
    }

    /// The HTTP limits: the defaults, with the flags given.
    fn http_limits(&self) -> crate::mcp::HttpLimits {
        let default = crate::mcp::HttpLimits::default();
        let seconds = std::time::Duration::from_secs;
        crate::mcp::HttpLimits {
            max_sessions: self
                .max_sessions
                .map_or(default.max_sessions, |n| n as usize),
            max_connections: self
                .max_connections
                .map_or(default.max_connections, |n| n as usize),
            header_timeout: self.header_timeout.map_or(default.header_timeout, seconds),
            session_idle: self.session_idle.map_or(default.session_idle, seconds),
            max_sessions_per_token: self
                .max_sessions_per_token
                .map_or(default.max_sessions_per_token, |n| n as usize),
            evict_after: self
                .session_evict_after
                .map_or(default.evict_after, seconds),
        }
    }
}

/// Who may use an HTTP server on `address`: `--no-auth` (loopback only), else the
/// token of `--token-file`, WARREN_MCP_TOKEN or, generated, printed on stderr.
fn http_auth(
    address: std::net::SocketAddr,
    no_auth: bool,
    token_file: Option<&Path>,
    server: &str,
) -> Result<crate::listener::auth::HttpAuth, Failure> {
    use crate::listener::auth::{BearerToken, HttpAuth};
    if no_auth {
        if !address.ip().is_loopback() {
            return Err(Failure::Usage(format!(
                "--no-auth is allowed only on a loopback address (127.0.0.1, ::1), and {} is not one: any machine that can reach it could use the server (drop --no-auth to require a bearer token)",
                address.ip()
            )));
        }
        return Ok(HttpAuth::Open);
    }
    if let Some(path) = token_file {
        return BearerToken::from_file(path)
            .map(HttpAuth::Bearer)
            .map_err(|error| Failure::Usage(format!("--token-file: {error}")));
    }
    if let Some(token) = std::env::var_os(TOKEN_VARIABLE) {
        let token = token.to_string_lossy();
        return BearerToken::new(token.trim())
            .map(|token| HttpAuth::Bearer(vec![token]))
            .map_err(|error| Failure::Usage(format!("{TOKEN_VARIABLE}: {error}")));
    }
    let (token, text) = BearerToken::generate()
        .map_err(|error| Failure::Run(anyhow::anyhow!("generating a bearer token: {error}")))?;
    // stderr, as every message of the servers: stdout is never used.
    eprintln!(
        "{server}: clients must send `Authorization: Bearer TOKEN`; this server's token (generated; choose one with --token-file or {TOKEN_VARIABLE}): {text}"
    );
    Ok(HttpAuth::Bearer(vec![token]))
}

/// `warren a2a`: profiles served as A2A agents over HTTP.
pub(super) async fn a2a(config_path: &Path, args: A2aArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    for profile in &args.profile {
        config.profile(profile)?;
    }
    if let Some(url) = &args.public_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Failure::Usage(format!(
                "--public-url must be an http:// or https:// URL, not `{url}`"
            )));
        }
    }
    let auth = http_auth(
        args.http,
        args.no_auth,
        args.token_file.as_deref(),
        "warren a2a",
    )?;
    let default = crate::a2a::A2aLimits::default();
    let limits = crate::a2a::A2aLimits {
        max_connections: count_or(args.max_connections, default.max_connections),
        header_timeout: seconds_or(args.header_timeout, default.header_timeout),
        max_tasks: count_or(args.max_tasks, default.max_tasks),
        retention: seconds_or(args.task_retention, default.retention),
    };
    let host = load(config).await?;
    let options = crate::a2a::A2aOptions {
        profiles: args.profile,
        http: args.http,
        auth,
        public_url: args.public_url,
        limits,
    };
    let (first, _) = shutdown_signals();
    crate::a2a::serve(host, options, first).await?;
    Ok(())
}

/// Two futures: the first SIGTERM or Ctrl-C, and the one after it.
fn shutdown_signals() -> (
    impl std::future::Future<Output = ()>,
    impl std::future::Future<Output = ()>,
) {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<()>();
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        loop {
            let term_signal = async {
                match term.as_mut() {
                    Some(term) => {
                        term.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term_signal => {}
            }
            if sender.send(()).is_err() {
                return;
            }
        }
    });
    let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
    let second = receiver.clone();
    (
        async move {
            receiver.lock().await.recv().await;
        },
        async move {
            // Waits for the first signal to be taken, then for the next one.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            second.lock().await.recv().await;
        },
    )
}

/// A count flag's value, else `default` (a count past the address space is as many
/// as there can be).
fn count_or<N: TryInto<usize>>(flag: Option<N>, default: usize) -> usize {
    flag.map_or(default, |n| n.try_into().unwrap_or(usize::MAX))
}

/// A flag given in seconds, else `default`.
fn seconds_or(flag: Option<u64>, default: std::time::Duration) -> std::time::Duration {
    flag.map_or(default, std::time::Duration::from_secs)
}
