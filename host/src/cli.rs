//! The `warren` command line: argument parsing and the subcommands.
//!
//! Exit codes: 0 success (or the reader of stdout stopped early, `| head -1`); 1 the
//! tool (or agent) failed; 2 bad usage or configuration.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use crate::config::{Config, ConfigError, ProfileSource, DEFAULT_PROFILE};
use crate::events::{Event, EventStream};
use crate::host::{Host, Run, RunReport};
use crate::jobs::Phase;
use crate::outcome::AgentState;
use crate::plugin::{ToolAccess, ToolRegistry};
use crate::sandbox::Sandbox;
use crate::telemetry::Telemetry;
use crate::term::{outln, StdoutClosed};
use crate::ui::{plain_line, AgentTree, ProgressMode};

/// Run LLM agents and their sub-agents, with every tool sandboxed in WebAssembly.
#[derive(Debug, Parser)]
#[command(name = "warren", version, about, long_about = None)]
struct Cli {
    /// The configuration file (plugins, defaults, profiles).
    #[arg(
        long,
        short,
        global = true,
        env = "WARREN_CONFIG",
        default_value = "warren.toml"
    )]
    config: PathBuf,

    /// Export traces (OpenTelemetry GenAI spans) as OTLP/HTTP to this endpoint, e.g.
    /// http://localhost:4318; headers come from OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    otlp_endpoint: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the tools a profile can call, with their argument schemas.
    Tools(ToolsArgs),
    /// Run an agent on a task: it may spawn sub-agents; prints its answer and a usage
    /// summary per agent.
    ///
    /// The answer goes to stdout, the summary to stderr. Ctrl-C cancels the whole tree
    /// cleanly; a second Ctrl-C exits at once. Exit code 1 when the root agent did not
    /// finish with an answer.
    Run(RunArgs),
    /// Work with plugin components.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Run one tool under a profile's capabilities and print its result.
    ///
    /// The result goes to stdout. A failure (denied, timeout, out of fuel, memory or
    /// output limit, crash, bad input) goes to stderr with the limit and the profile
    /// key that raises it, and the exit code is 1.
    Call(CallArgs),
    /// Start a project: warren.toml with a model found on this machine (OPENAI_API_KEY,
    /// ANTHROPIC_API_KEY, an Ollama server on localhost, else an offline scripted
    /// model), a `main` and a `researcher` profile that may only read the project, an
    /// example agent file and AGENTS.md. Never overwrites a file.
    Init(InitArgs),
    /// Check the project: config, plugins, profiles and agent files, each model (one
    /// tiny request) and the Redis queue when configured; one line per check, with what
    /// to do about failures. Exit code 1 when any check failed.
    Doctor,
    /// List every profile (from warren.toml and from agent files) with its source,
    /// model and the tools it gets, and every agent file that was skipped, with why.
    ///
    /// Agent files (Claude Code format) are read from `agents/` and `.claude/agents/`
    /// beside the config, subfolders included. `--check` exits 1 when any was skipped.
    Agents(AgentsArgs),
    /// Take sub-agent jobs from a Redis queue and run them with this machine's
    /// plugins, models and profiles (matched by name).
    ///
    /// Start one on each machine with the same configuration names; `warren run
    /// --redis URL` then sends every spawned sub-agent to the queue. A worker killed
    /// mid-job loses nothing: its lock expires and another worker takes the job.
    /// SIGTERM or Ctrl-C stops taking jobs and lets running ones finish for
    /// `[queue] shutdown_grace_s`, then hands the rest back; a second signal hands them
    /// back at once.
    Worker(WorkerArgs),
    /// Serve this project to MCP clients (Claude Code, Claude Desktop, Cursor, Codex,
    /// VS Code, goose…): the profile's tools and the sub-agent tools.
    ///
    /// Every tool call runs in a fresh sandbox under the profile's capabilities; a
    /// refused access comes back as a tool error with the reason. When the profile may
    /// spawn, the client also gets spawn_agent, await_agents, cancel_agent and
    /// list_agents, with one job tree, budget (`budget_usd`) and concurrency limit
    /// (`max_concurrent`) per MCP session. A foreground spawn_agent or an await_agents
    /// call reports turns, tools, tokens and cost as progress notifications;
    /// cancelling a call cancels the agents it started; a client that disconnects
    /// cancels all of its session's agents. Log records go to stderr and, as MCP
    /// logging notifications, to the client (warnings until it sets a level).
    ///
    /// Over stdio (the default) the client starts `warren mcp` itself, e.g.
    /// `claude mcp add warren -- warren mcp --config /path/to/warren.toml`; stdout
    /// carries only the protocol. With `--http 127.0.0.1:8931` it serves Streamable
    /// HTTP at http://127.0.0.1:8931/mcp for any number of clients, each sending the
    /// bearer token (`Authorization: Bearer TOKEN`) printed at start, or given by
    /// --token-file or WARREN_MCP_TOKEN. Configuration errors exit 2 before any
    /// client is served.
    Mcp(McpArgs),
    /// List the journaled runs, newest first: id, start, state, agents, tokens, cost,
    /// time and task.
    ///
    /// Every run is journaled as it goes (`[journal] dir`, default `.warren/runs`
    /// beside warren.toml), so runs of earlier processes are listed too, finished or
    /// not (a run whose process died shows `(no end)`).
    Runs(RunsArgs),
    /// Print a journaled run: its agent tree with states, usage and each agent's answer
    /// or error; with --agent, one agent's whole transcript (what it was given, each
    /// model response, each tool call and its result).
    ///
    /// RUN is a run id, a unique prefix of one, or `last`.
    Show(ShowArgs),
    /// Serve the web view of a journaled run (its tree, transcripts and timeline), or
    /// of the list of runs when no RUN is given, until Ctrl-C.
    ///
    /// RUN is a run id, a unique prefix of one, or `last`. A run still being written
    /// (by `warren mcp`, a worker or another `warren run`) is followed as its journal
    /// grows. The address, with its random token, is printed on stderr.
    View(ViewArgs),
    /// Continue a journaled run whose process died (a crash, a kill, a reboot), as if
    /// it had not: its answer and summary are printed as `warren run` prints them.
    ///
    /// Agents that finished are not run again and deliver their results; an agent
    /// that was mid-conversation continues from its last recorded boundary, reusing
    /// every recorded model response and tool result (nothing recorded is asked or
    /// run again). A tool call that had started with no recorded result is in doubt:
    /// it runs again only when its profile can write no granted directory and reach
    /// no network host; otherwise the agent is told it may or may not have happened.
    /// Turns, tokens, cost and time already spent count against every limit.
    ///
    /// Refused for a finished run, for a run another process holds (still running, or
    /// being resumed), and for a run whose warren.toml or plugins changed since
    /// (naming what changed) unless --force. RUN is a run id, a unique prefix of one,
    /// or `last`.
    Resume(ResumeArgs),
    /// Replay recorded runs offline and check they behave the same.
    ///
    /// Every agent of the recorded tree runs again under today's warren.toml and
    /// plugins, with no network: each model answer comes from the journal, once the
    /// request warren would send is found to be the recorded one (its digest). Tools
    /// run again in their sandboxes (--tools rerun, the default) and their results are
    /// compared with the recorded ones, or are served from the journal (--tools
    /// recorded). Requests are matched per agent and turn, not by the run's global
    /// order, and each agent gets its children's results at the turns the recording
    /// gave them, so sibling sub-agents may finish in any order.
    ///
    /// On the first difference the replay stops and prints the agent's path, the turn
    /// and a diff (of the system prompt, the tool definitions, or a tool's result), and
    /// exits 1. A matching replay prints the tree and exits 0; a recording of a run that
    /// never finished is replayed up to where it stops, and says so. Nothing is
    /// journaled and no API key is needed.
    Replay(ReplayArgs),
    /// Compare two journaled runs (a run and its fork, or two runs of one task): their
    /// agent trees side by side, matched by place in the tree (profile and task from
    /// the root), with agents only in one run (`-`, `+`), and for the others state,
    /// turns, tokens, cost and tool calls (denials), changed ones marked `~`; then a
    /// diff of each changed answer.
    ///
    /// Each RUN is a run id, a unique prefix of one, `last`, or a journal's path.
    Diff(DiffArgs),
}

#[derive(Debug, Args)]
struct DiffArgs {
    /// The first run (shown as `-`).
    run_a: String,
    /// The second run (shown as `+`).
    run_b: String,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// The runs: ids, unique prefixes of ids, `last`, or paths to journal files (or to
    /// the run directories holding them, e.g. runs kept as test fixtures).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    runs: Vec<String>,
    /// Replay every journal in DIR (each RUN/journal.jsonl and *.jsonl): one line per
    /// run, then a summary; exits 1 if any differs.
    #[arg(long, value_name = "DIR")]
    all: Option<PathBuf>,
    /// Where tool results come from: `rerun` runs each call again and compares its
    /// result with the recorded one; `recorded` serves them from the journal (spawn
    /// tools always run: they re-create the children).
    #[arg(long, value_enum, default_value = "rerun")]
    tools: ReplayToolsArg,
    /// Fork the run from this agent (its id in the recording; `warren show RUN`
    /// lists them): a new, journaled run in which that agent, changed as the options
    /// below say, and everything it spawns call their models live, while the rest of
    /// the tree is served from the recording at no cost until the new result reaches
    /// it, and continues live from there. `warren diff RUN FORK` compares them.
    #[arg(long, value_name = "AGENT")]
    from: Option<String>,
    /// With --from: run the agent under this profile's settings instead.
    #[arg(long, requires = "from", value_name = "PROFILE")]
    profile: Option<String>,
    /// With --from: run the agent on this model (a [models] name) instead.
    #[arg(long, requires = "from", value_name = "MODEL")]
    model: Option<String>,
    /// With --from: give the agent this file's text as its system prompt instead.
    #[arg(long, requires = "from", value_name = "FILE")]
    prompt_file: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ReplayToolsArg {
    Rerun,
    Recorded,
}

#[derive(Debug, Args)]
struct ResumeArgs {
    /// The run: its id, a unique prefix of it, or `last`.
    run: String,
    /// Resume even though the configuration or a plugin changed since the run began.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    queue: QueueArgs,
}

/// How a run's progress and result are shown (`run` and `resume`).
#[derive(Debug, Args)]
struct OutputArgs {
    /// Progress on stderr: a live agent tree on a terminal, plain lines otherwise.
    #[arg(long, value_enum, default_value = "auto")]
    progress: ProgressMode,
    /// No progress and no summary table (the answer still goes to stdout).
    #[arg(long, short)]
    quiet: bool,
    /// Write every event to FILE as JSON lines, each with a timestamp.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Print the result and per-agent usage as JSON on stdout instead of the answer.
    #[arg(long)]
    json: bool,
    /// Serve a live web view of the run (the agent tree, transcripts, a timeline,
    /// cancelling an agent) on ADDR, loopback with a free port by default
    /// (`--web=ADDR` to choose); its address, with a random token, is printed on
    /// stderr. After the run it stays up until Ctrl-C.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true,
          default_missing_value = crate::web::DEFAULT_ADDR)]
    web: Option<std::net::SocketAddr>,
}

#[derive(Debug, Args)]
struct ViewArgs {
    /// The run: its id, a unique prefix of it, or `last` (default: the list of runs).
    run: Option<String>,
    /// Listen on this address (loopback by default; port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = crate::web::DEFAULT_ADDR)]
    addr: std::net::SocketAddr,
}

#[derive(Debug, Args)]
struct RunsArgs {
    /// Print JSON: {dir, runs: [...]}.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    action: Option<RunsAction>,
}

#[derive(Debug, Subcommand)]
enum RunsAction {
    /// Delete old runs' journals: finished runs beyond the newest --keep, or older
    /// than --older-than (either or both). Unfinished runs, which `warren resume` could
    /// continue, are kept unless --unfinished; a run a process holds (running, or being
    /// resumed) is never deleted. Prints each run deleted and the space freed.
    Prune(PruneArgs),
}

#[derive(Debug, Args)]
struct PruneArgs {
    /// Keep the newest N runs.
    #[arg(long, value_name = "N")]
    keep: Option<usize>,
    /// Delete runs that started more than DAYS days ago (fractions allowed: 0.5).
    #[arg(long, value_name = "DAYS")]
    older_than: Option<f64>,
    /// Delete unfinished runs too.
    #[arg(long)]
    unfinished: bool,
    /// Only print what would be deleted.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// The run: its id, a unique prefix of it, or `last`.
    run: String,
    /// One agent's transcript, by job id.
    #[arg(long, value_name = "ID")]
    agent: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The environment variable holding `warren mcp --http`'s bearer token.
const TOKEN_VARIABLE: &str = "WARREN_MCP_TOKEN";

#[derive(Debug, Args)]
struct McpArgs {
    /// The profile whose tools (and capabilities) the clients get.
    #[arg(long, short, default_value = DEFAULT_PROFILE)]
    profile: String,
    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8931; port 0 picks a free
    /// one, printed on stderr) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
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
    token_file: Option<PathBuf>,
    /// With --http: require no token, so any process that can connect may use the
    /// server; only on a loopback address.
    #[arg(long, requires = "http")]
    no_auth: bool,
    /// With --http: sessions open at once; an `initialize` over it gets 503
    /// [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: Option<u32>,
    /// With --http: connections open at once; one over it is closed at once
    /// [default: 256].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// With --http: seconds a connection may take to send a request's headers (or
    /// stay idle between requests) [default: 10].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: Option<u64>,
    /// With --http: seconds a session may go without a message before it ends and its
    /// agents are cancelled [default: 900].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    session_idle: Option<u64>,
    /// Seconds an `await_agents` call without `timeout_s` waits at most before it
    /// returns the blocks of agents still running (the client calls it again);
    /// keep it under the client's own tool timeout [default: 4].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    await_limit: Option<u64>,
    /// With --http: seconds a finished MCP task (a spawn_agent called with `task`)
    /// stays fetchable after it ends [default: 3600].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    task_retention: Option<u64>,
    /// With --http: MCP tasks one credential may hold at once, running or kept
    /// [default: 32].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_tasks: Option<u32>,
    /// With --http: the largest task result kept, in bytes; a larger one is kept as
    /// an error naming its size [default: 1048576].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    task_result_limit: Option<u64>,
}

impl McpArgs {
    /// The task limits: the defaults, with the flags given.
    fn task_limits(&self) -> crate::mcp::TaskLimits {
        let default = crate::mcp::TaskLimits::default();
        crate::mcp::TaskLimits {
            retention: self
                .task_retention
                .map_or(default.retention, std::time::Duration::from_secs),
            max_tasks: self.max_tasks.map_or(default.max_tasks, |n| n as usize),
            max_result_bytes: self
                .task_result_limit
                .map_or(default.max_result_bytes, |n| {
                    usize::try_from(n).unwrap_or(usize::MAX)
                }),
        }
    }

    /// Who may use the HTTP server: `--no-auth` (loopback only), else the token of
    /// `--token-file`, WARREN_MCP_TOKEN or, generated, printed on stderr.
    fn http_auth(&self) -> Result<crate::mcp::HttpAuth, Failure> {
        use crate::mcp::{BearerToken, HttpAuth};
        let Some(address) = self.http else {
            return Ok(HttpAuth::Open);
        };
        if self.no_auth {
            if !address.ip().is_loopback() {
                return Err(Failure::Usage(format!(
                    "--no-auth is allowed only on a loopback address (127.0.0.1, ::1), and {} is not one: any machine that can reach it could use the server (drop --no-auth to require a bearer token)",
                    address.ip()
                )));
            }
            return Ok(HttpAuth::Open);
        }
        if let Some(path) = &self.token_file {
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
        // stderr, as every message of warren mcp: stdout is never used.
        eprintln!(
            "warren mcp: clients must send `Authorization: Bearer TOKEN`; this server's token (generated; choose one with --token-file or {TOKEN_VARIABLE}): {text}"
        );
        Ok(HttpAuth::Bearer(vec![token]))
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
        }
    }
}

/// Where sub-agent jobs go.
#[derive(Debug, Args)]
struct QueueArgs {
    /// The Redis that sub-agent jobs go through (BullMQ layout), e.g.
    /// redis://10.0.0.5:6379: `run` sends its sub-agents there instead of running them
    /// here, `worker` takes them from there. Overrides `[queue] redis`.
    #[arg(long, env = "WARREN_REDIS", value_name = "URL")]
    redis: Option<String>,
    /// The queue name (keys `bull:NAME:…`); overrides `[queue] name`.
    #[arg(long, value_name = "NAME")]
    queue: Option<String>,
}

impl QueueArgs {
    fn apply(&self, config: &mut Config) -> Result<(), Failure> {
        if let Some(url) = &self.redis {
            if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                return Err(Failure::Usage(format!(
                    "--redis: expected redis://[:PASSWORD@]HOST:PORT[/DB] or rediss://…, got `{url}`"
                )));
            }
            config.queue.redis = Some(url.clone());
        }
        if let Some(name) = &self.queue {
            if !crate::config::is_valid_name(name) {
                return Err(Failure::Usage(format!(
                    "--queue: use letters, digits, `_` and `-` (at most 64), got `{name}`"
                )));
            }
            config.queue.name = name.clone();
        }
        Ok(())
    }
}

#[derive(Debug, Args)]
struct WorkerArgs {
    #[command(flatten)]
    queue: QueueArgs,
    /// Jobs (sub-agents) this worker runs at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    concurrency: u32,
    /// The worker's name in logs and on the jobs it runs (default HOST-PID).
    #[arg(long)]
    name: Option<String>,
}

#[derive(Debug, Args)]
struct InitArgs {
    /// The project directory (created if missing).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The model to configure (default: found from the environment).
    #[arg(long, value_enum)]
    provider: Option<crate::init::StarterProvider>,
}

#[derive(Debug, Args)]
struct AgentsArgs {
    /// Exit 1 when any agent file was skipped (for CI).
    #[arg(long)]
    check: bool,
    /// Print JSON: {profiles: [...], skipped: [...], not_agent_files: [...]}.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ToolsArgs {
    /// The profile whose tools to list.
    #[arg(long, short, default_value = DEFAULT_PROFILE)]
    profile: String,
    /// Print JSON (an array of {name, plugin, builtin, typed, description,
    /// input_schema}, one per tool the profile gets). The text listing ends with the
    /// loaded tools it does not get.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum PluginCommand {
    /// Scaffold a working plugin: the WIT contract, one example tool (`NAME_greet`,
    /// named after the plugin so two plugins' tools never clash), a build script, a test
    /// script (./test.sh) and a warren.toml to try it with. With `--typed`, a typed
    /// component instead: its own WIT, no warren interface, each exported function a
    /// tool.
    New {
        /// The plugin's name (a-z, 0-9, `_`, `-`); also the directory created.
        name: String,
        /// The language (with `--typed`, rust, the default).
        #[arg(long, value_enum, required_unless_present = "typed")]
        lang: Option<crate::scaffold::Language>,
        /// A typed component (Rust, wit-bindgen) rather than a warren:plugin one.
        #[arg(long)]
        typed: bool,
        /// Where to create it.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Wrap a core module (wasm32-wasip1, e.g. C built with wasi-libc and wit-bindgen's
    /// bindings) into a plugin component, with the WASI preview1 reactor adapter.
    Componentize {
        /// The core module.
        module: PathBuf,
        /// Where to write the component.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Show the tools, schemas, WASI imports and exports a component declares, and
    /// which kind of plugin it is: a warren:plugin/plugin component (it lists its
    /// tools) or a typed component (its exported functions are the tools).
    Inspect {
        /// The component (.wasm) to inspect.
        file: PathBuf,
        /// WIT source (file or directory) whose doc comments describe a typed
        /// component's tools, as `[plugins.NAME] wit` would.
        #[arg(long, value_name = "PATH")]
        wit: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// What the agent should do.
    task: String,
    /// The root agent's profile.
    #[arg(long, short, default_value = DEFAULT_PROFILE)]
    profile: String,
    /// Use this model (a [models] name) instead of the profile's.
    #[arg(long, short)]
    model: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
    /// The run's id (default: random). Job ids derive from it, so a run given an id
    /// hands out the job ids every run of that id does: give each run its own (letters,
    /// digits, `_` and `-`, at most 64), e.g. to name it after an outside system's job.
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,
    /// Do not journal this run (by default every run is recorded in `[journal] dir`,
    /// for `warren runs` and `warren show`).
    #[arg(long)]
    no_journal: bool,
    /// A JSON Schema file the root's answer must match: stdout is then that JSON (a
    /// run ending `invalid_output` prints nothing there and exits 1).
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    #[command(flatten)]
    queue: QueueArgs,
}

#[derive(Debug, Args)]
struct CallArgs {
    /// The tool to call, e.g. read_file.
    tool: String,
    /// The arguments, a JSON object; `-` reads them from stdin.
    #[arg(default_value = "{}")]
    arguments: String,
    /// The profile whose tools and capabilities apply.
    #[arg(long, short, default_value = DEFAULT_PROFILE)]
    profile: String,
}

/// Why a command ended badly; decides the exit code.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// Bad configuration or usage: exit code 2.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Bad arguments: exit code 2.
    #[error("{0}")]
    Usage(String),
    /// A configured model that cannot be used as written (its base URL, headers,
    /// timeouts or key variable): exit code 2, like any other bad configuration.
    #[error(transparent)]
    Model(crate::llm::LlmError),
    /// The work itself failed: exit code 1.
    #[error(transparent)]
    Run(#[from] anyhow::Error),
}

/// Parses the command line, runs the command and reports its error, if any.
pub(crate) fn main() -> ExitCode {
    lean_malloc();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        // `warren mcp` sends log records to its clients as well as to stderr.
        let forward = matches!(cli.command, Command::Mcp(_)).then(|| {
            Box::new(crate::mcp::log_layer())
                as Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>
        });
        let telemetry = Telemetry::init_with(cli.otlp_endpoint.clone(), forward);
        let outcome = run(cli).await;
        telemetry.shutdown().await;
        outcome
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error @ (Failure::Config(_) | Failure::Usage(_) | Failure::Model(_))) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
        // The reader of stdout has all it wanted (`warren tools | head -1`).
        Err(Failure::Run(error)) if error.chain().any(|cause| cause.is::<StdoutClosed>()) => {
            ExitCode::SUCCESS
        }
        Err(Failure::Run(error)) => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// One malloc arena for the whole process, unless the user tuned glibc's malloc
/// (`GLIBC_TUNABLES=glibc.malloc.arena_max=N`), which is then left as written. glibc
/// otherwise gives threads up to eight arenas per core, each holding its own free
/// memory: on the 1000-sub-agent peer workload that is 2 MiB more peak RSS with two
/// arenas and about 6 MiB with the default, for no CPU gained (the host mostly waits
/// on the network, and each thread's malloc cache serves the small allocations).
fn lean_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !std::env::var("GLIBC_TUNABLES").is_ok_and(|tunables| tunables.contains("arena_max")) {
        // SAFETY: mallopt only sets an allocator parameter; called before any other
        // thread exists.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// Where `config` journals runs; an error when journaling is off.
fn journal_dir(config: &Config) -> Result<std::path::PathBuf, Failure> {
    config.journal_dir.clone().ok_or_else(|| {
        Failure::Usage(format!(
            "runs are not journaled: [journal] enabled = false in {}",
            config.path.display()
        ))
    })
}

/// [`Host::load`], its error sorted by kind.
async fn load(config: Config) -> Result<Host, Failure> {
    Ok(Host::load(config).await?)
}

/// A configuration error (exit 2) or a failure (exit 1), by the library's kind.
impl From<crate::host::Error> for Failure {
    fn from(error: crate::host::Error) -> Failure {
        match error {
            crate::host::Error::Config(error) => Failure::Config(error),
            crate::host::Error::Model(error) => Failure::Model(error),
            other => Failure::Run(other.into()),
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    match &cli.command {
        Command::Plugin(PluginCommand::Inspect { file, wit }) => {
            return Ok(inspect(file, wit.as_deref()).await?)
        }
        Command::Init(args) => {
            let done = crate::init::init(&args.dir, args.provider).await?;
            let (provider, why) = &done.provider;
            outln!("model: {provider:?} ({why})")?;
            for path in &done.written {
                outln!("wrote {}", path.display())?;
            }
            for path in &done.kept {
                outln!("kept  {} (already there)", path.display())?;
            }
            let cd = if args.dir == std::path::Path::new(".") {
                String::new()
            } else {
                format!("cd {} && ", args.dir.display())
            };
            outln!("\nnext:")?;
            outln!(
                "  {cd}warren doctor                       # checks the config, tools and model"
            )?;
            outln!(
                "  {cd}warren agents                       # the profiles and the tools each gets"
            )?;
            outln!("  {cd}warren run \"What is in this project?\"")?;
            return Ok(());
        }
        Command::Doctor => {
            let failed = crate::doctor::run(&cli.config).await?;
            if failed > 0 {
                return Err(Failure::Run(anyhow::anyhow!("{failed} check(s) failed")));
            }
            return Ok(());
        }
        Command::Plugin(PluginCommand::Componentize { module, output }) => {
            let size = crate::plugin::componentize::componentize(module, output)?;
            outln!("wrote {} ({size} bytes)", output.display())?;
            return Ok(());
        }
        Command::Plugin(PluginCommand::New {
            name,
            lang,
            typed,
            dir,
        }) => {
            let lang = lang.unwrap_or(crate::scaffold::Language::Rust);
            let files = crate::scaffold::new_plugin(dir, name, lang, *typed)?;
            let root = dir.join(name);
            let tool = crate::scaffold::example_tool(name);
            outln!("created {} ({} files)", root.display(), files.len())?;
            outln!(
                "next: cd {} && ./test.sh   (builds it and calls its `{tool}` tool through warren)",
                root.display()
            )?;
            return Ok(());
        }
        _ => {}
    }
    let mut config = Config::load(&cli.config)?;
    match cli.command {
        Command::Runs(RunsArgs {
            json,
            action: Some(RunsAction::Prune(prune)),
        }) => {
            let older_than = match prune.older_than {
                Some(days) if !(days.is_finite() && days >= 0.0) => {
                    return Err(Failure::Usage(format!(
                        "--older-than: a number of days, 0 or more, got {days}"
                    )))
                }
                days => days.map(|days| std::time::Duration::from_secs_f64(days * 86_400.0)),
            };
            let options = crate::journal::prune::Prune {
                keep: prune.keep,
                older_than,
                unfinished: prune.unfinished,
                dry_run: prune.dry_run,
            };
            crate::runs_report::prune(&journal_dir(&config)?, options, json)?;
        }
        Command::Runs(args) => crate::runs_report::list(&journal_dir(&config)?, args.json)?,
        Command::View(args) => {
            let dir = journal_dir(&config)?;
            let run = match &args.run {
                Some(name) => Some(crate::journal::read::find(&dir, name)?),
                None => None,
            };
            let server =
                crate::web::WebServer::bind(args.addr, crate::web::Source::Journal { dir, run })
                    .await?;
            eprintln!("warren: web view at {}  (Ctrl-C to stop)", server.url());
            server
                .serve(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await;
        }
        Command::Show(args) => crate::runs_report::show(
            &journal_dir(&config)?,
            &args.run,
            args.agent.as_deref(),
            args.json,
        )?,
        Command::Worker(args) => {
            args.queue.apply(&mut config)?;
            if config.queue.redis.is_none() {
                return Err(Failure::Usage(format!(
                    "warren worker needs a queue: pass --redis URL (or set WARREN_REDIS, or [queue] redis in {})",
                    config.path.display()
                )));
            }
            let host = load(config).await?;
            let options = crate::worker::WorkerOptions {
                concurrency: args.concurrency as usize,
                name: args.name.unwrap_or_else(crate::worker::default_name),
            };
            let (first, second) = shutdown_signals();
            crate::worker::run(host, options, first, second).await?;
        }
        Command::Mcp(args) => {
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
        }
        Command::Agents(args) => {
            let registry = load_registry(&config).await?;
            crate::agents_report::print(&config, &registry, args.json)?;
            if args.check && !config.agent_files.skipped.is_empty() {
                return Err(Failure::Run(anyhow::anyhow!(
                    "{} agent file(s) skipped",
                    config.agent_files.skipped.len()
                )));
            }
        }
        Command::Tools(args) => {
            let profile = config.profile(&args.profile)?;
            let registry = load_registry(&config).await?;
            registry.check_profile(&profile, &config.plugin_limits)?;
            print_tools(&registry, &profile, args.json)?;
        }
        Command::Run(args) => {
            args.queue.apply(&mut config)?;
            if args.no_journal {
                config.journal_dir = None;
            }
            config.profile(&args.profile)?;
            if let Some(id) = args
                .run_id
                .as_deref()
                .filter(|id| !crate::config::is_valid_name(id))
            {
                return Err(Failure::Usage(format!(
                    "--run-id: use letters, digits, `_` and `-` (at most 64), got `{id}`"
                )));
            }
            let output_schema = args
                .output_schema
                .as_deref()
                .map(read_output_schema)
                .transpose()?;
            let log = args.output.event_log()?;
            let host = load(config).await?;
            // The one unknown-model check (in `Host::start`) is a configuration error:
            // exit 2, as for a bad file.
            let run = host.start_with_run_id(
                &args.profile,
                &args.task,
                args.model.as_deref(),
                args.run_id.as_deref(),
                output_schema,
            )?;
            let journal_dir = host.config().journal_dir.clone();
            let typed = args.output_schema.is_some();
            drive(run, &args.output, log, journal_dir, typed).await?;
        }
        Command::Resume(args) => {
            args.queue.apply(&mut config)?;
            let log = args.output.event_log()?;
            let host = load(config).await?;
            let run = host.resume(&args.run, args.force)?;
            let journal_dir = host.config().journal_dir.clone();
            drive(run, &args.output, log, journal_dir, false).await?;
        }
        Command::Diff(args) => {
            let a = crate::journal::read::run(&crate::journal::locate(&config, &args.run_a)?)?;
            let b = crate::journal::read::run(&crate::journal::locate(&config, &args.run_b)?)?;
            crate::diff_report::print(&a, &b)?;
        }
        Command::Replay(args) => {
            // A fork calls models: their keys are needed as for a run.
            let host = if args.from.is_some() {
                load(config).await?
            } else {
                Host::load_offline(config).await?
            };
            let tools = match args.tools {
                ReplayToolsArg::Rerun => crate::jobs::ReplayTools::Rerun,
                ReplayToolsArg::Recorded => crate::jobs::ReplayTools::Recorded,
            };
            replay_runs(&host, &args, tools).await?;
        }
        Command::Plugin(_) | Command::Init(_) | Command::Doctor => {
            unreachable!("handled before the config is loaded")
        }
        Command::Call(args) => {
            let profile = config.profile(&args.profile)?;
            let arguments = if args.arguments == "-" {
                let mut buffer = String::new();
                std::io::stdin()
                    .read_to_string(&mut buffer)
                    .context("reading arguments from stdin")?;
                buffer
            } else {
                args.arguments
            };
            let registry = load_registry(&config).await?;
            registry.check_profile(&profile, &config.plugin_limits)?;
            let access = ToolAccess::new(profile)?;
            let output = registry
                .call(&access, &args.tool, &arguments)
                .await
                .map_err(anyhow::Error::from)?;
            outln!("{output}")?;
        }
    }
    Ok(())
}

impl OutputArgs {
    /// The `--events` file, created.
    fn event_log(&self) -> Result<Option<std::io::BufWriter<std::fs::File>>, Failure> {
        let Some(path) = &self.events else {
            return Ok(None);
        };
        let file = std::fs::File::create(path)
            .with_context(|| format!("creating the event log {}", path.display()))?;
        Ok(Some(std::io::BufWriter::new(file)))
    }
}

/// Shows `run`'s progress, waits for it and prints its answer or report; Ctrl-C
/// cancels it, a second Ctrl-C exits at once, leaving it to `warren resume`. A
/// `typed` root's answer is printed only when it is the checked JSON, so whatever
/// reads stdout never gets prose.
/// `warren replay`: each run in full, or with `--all` one line per run and a summary.
async fn replay_runs(
    host: &Host,
    args: &ReplayArgs,
    tools: crate::jobs::ReplayTools,
) -> Result<(), Failure> {
    use crate::replay_report as report;
    if let Some(from) = &args.from {
        let [run] = args.runs.as_slice() else {
            return Err(Failure::Usage(
                "--from forks one run: give exactly one RUN".into(),
            ));
        };
        let prompt =
            match &args.prompt_file {
                Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                    Failure::Usage(format!("--prompt-file {}: {e}", path.display()))
                })?),
                None => None,
            };
        let fork = crate::jobs::Fork {
            from: from.clone(),
            profile: args.profile.clone(),
            model: args.model.clone(),
            prompt,
        };
        let journal = crate::journal::locate(host.config(), run)?;
        return report::fork(host, &journal, tools, fork)
            .await
            .map_err(Failure::Run);
    }
    let (journals, one_line) = match &args.all {
        Some(dir) => (report::journals_in(dir)?, true),
        None => {
            let mut found = Vec::new();
            for name in &args.runs {
                found.push(crate::journal::locate(host.config(), name)?);
            }
            (found, false)
        }
    };
    let mut differ = 0;
    for journal in &journals {
        let name = journal_name(journal);
        let verdict = report::replay(host, journal, tools).await;
        if one_line {
            outln!("{}", report::line(&name, &verdict))?;
            if !verdict.as_ref().is_ok_and(report::Verdict::matched) {
                differ += 1;
            }
        } else {
            let verdict = verdict.map_err(Failure::Run)?;
            report::print(&name, &verdict)?;
            if !verdict.matched() {
                differ += 1;
            }
        }
    }
    if one_line {
        outln!(
            "{} replayed: {} the same, {differ} differ or failed",
            journals.len(),
            journals.len() - differ
        )?;
    }
    if differ > 0 {
        return Err(Failure::Run(anyhow::anyhow!(
            "{differ} of {} replay(s) differ from the recording",
            journals.len()
        )));
    }
    Ok(())
}

/// How a journal is named in replay reports: its run directory's name, or its file.
fn journal_name(journal: &std::path::Path) -> String {
    let file = journal.file_name().map(|f| f.to_string_lossy().to_string());
    match (
        file.as_deref(),
        journal.parent().and_then(|p| p.file_name()),
    ) {
        (Some(crate::journal::writer::JOURNAL_FILE), Some(dir)) => {
            dir.to_string_lossy().to_string()
        }
        _ => journal.display().to_string(),
    }
}

async fn drive(
    run: Run,
    output: &OutputArgs,
    log: Option<std::io::BufWriter<std::fs::File>>,
    journal_dir: Option<PathBuf>,
    typed: bool,
) -> Result<(), Failure> {
    let mode = if output.quiet {
        ProgressMode::None
    } else {
        output.progress
    };
    if mode != ProgressMode::None {
        // The run's id first, so a run whose process dies can be found and resumed.
        match &run.tree.journal {
            Some(_) => eprintln!(
                "run {id} (journaled: `warren resume {id}` continues it if this process dies)",
                id = run.tree.run_id
            ),
            None => eprintln!("run {} (not journaled)", run.tree.run_id),
        }
    }
    let web = match output.web {
        Some(address) => {
            let live = crate::web::LiveRun::new(run.tree.clone(), &run.root);
            let source = crate::web::Source::Live {
                run: live.clone(),
                journal_dir,
            };
            let server = crate::web::WebServer::bind(address, source).await?;
            let url = server.url();
            eprintln!("warren: web view at {url}");
            tokio::spawn(server.serve(std::future::pending()));
            Some((live, url))
        }
        None => None,
    };
    let progress = tokio::spawn(show_progress(
        run.events(),
        run.root.0.clone(),
        mode,
        log,
        web.as_ref().map(|(live, _)| live.clone()),
    ));
    let cancel = run.cancel_token();
    let journaled = run.tree.journal.is_some().then(|| run.tree.run_id.clone());
    let interrupt = tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminated = async {
            match term.as_mut() {
                Some(term) => term.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            interrupted = tokio::signal::ctrl_c() => if interrupted.is_ok() {
                eprintln!("\ncancelling every agent (Ctrl-C again to exit at once)…");
                cancel.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            },
            // Stopped from outside: the run is left as it stands, to be resumed.
            _ = terminated => {
                match journaled {
                    Some(id) => eprintln!("\nwarren: terminated; run {id} is journaled: `warren resume {id}` continues it"),
                    None => eprintln!("\nwarren: terminated (the run was not journaled, so it cannot be resumed)"),
                }
                std::process::exit(143);
            }
        }
    });
    let report = run.wait().await;
    progress.await.context("the progress task failed")??;
    // A reader gone from stdout does not hide how the run ended: the answer is
    // written first and its failure reported after the agent's.
    let shown = if output.json {
        outln!("{:#}", report_json(&report))
    } else if typed && report.root.output.is_none() {
        Ok(())
    } else {
        outln!("{}", report.root.text)
    };
    if !output.quiet && !output.json {
        eprint!("{}", summary(&report));
    }
    if let Some((_, url)) = &web {
        interrupt.abort();
        eprintln!("warren: the run is over; the web view stays up at {url} until Ctrl-C");
        let _ = tokio::signal::ctrl_c().await;
    }
    if report.root.state != AgentState::Ok {
        return Err(Failure::Run(anyhow::anyhow!(
            "the root agent ended {}: {}",
            report.root.state.as_str(),
            report.root.reason()
        )));
    }
    shown?;
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

async fn load_registry(config: &Config) -> anyhow::Result<ToolRegistry> {
    let sandbox = Arc::new(Sandbox::new().context("creating the sandbox")?);
    ToolRegistry::for_config(sandbox, config).await
}

fn print_tools(
    registry: &ToolRegistry,
    profile: &crate::config::Profile,
    json: bool,
) -> anyhow::Result<()> {
    let tools: Vec<_> = registry.tools_for(profile).collect();
    if json {
        let list: Vec<serde_json::Value> = tools
            .iter()
            .map(|(spec, plugin)| {
                serde_json::json!({
                    "name": spec.name,
                    "plugin": plugin.name,
                    "builtin": plugin.builtin,
                    "typed": plugin.is_typed(),
                    "description": spec.description,
                    "input_schema": serde_json::from_str::<serde_json::Value>(&spec.input_schema).unwrap_or_default(),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&list)?)?;
        return Ok(());
    }
    if tools.is_empty() {
        outln!(
            "profile `{}` has no tools (plugins loaded: {})",
            profile.name,
            registry.plugins().len()
        )?;
    }
    for (spec, plugin) in tools {
        let origin = if plugin.builtin {
            format!("{}, built-in", plugin.name)
        } else if plugin.is_typed() {
            format!("{}, typed component", plugin.name)
        } else {
            plugin.name.clone()
        };
        outln!(
            "{}  [{origin}]\n  {}\n  arguments: {}\n",
            spec.name,
            spec.description,
            spec.input_schema
        )?;
    }
    // A tool that is loaded but missing above is most often a selection the user
    // forgot, so the listing names it and where the selection is written.
    let left_out: Vec<&str> = registry
        .tool_names()
        .filter(|name| !profile.tools.allows(name))
        .collect();
    if !left_out.is_empty() {
        let selection = match &profile.source {
            ProfileSource::Config => "`tools` and `disallowed_tools`".to_string(),
            ProfileSource::AgentFile { path, .. } => format!(
                "`tools`, `disallowedTools` and `permissionMode` in {}",
                path.display()
            ),
        };
        outln!(
            "not for profile `{}`: {} (left out by its {selection})",
            profile.name,
            left_out.join(", ")
        )?;
    }
    Ok(())
}

/// One line per agent: id, parent, profile, state, turns, tokens, cost, time.
fn summary(report: &RunReport) -> String {
    let mut out = format!(
        "\n{:<8} {:<8} {:<14} {:<16} {:>5} {:>9} {:>9} {:>8}  {}\n",
        "agent", "parent", "profile", "state", "turns", "tokens", "cost", "time", "description"
    );
    for job in &report.agents {
        let (state, turns, tokens, cost, time) = match &job.phase {
            Phase::Done(o) => (
                o.state.as_str().to_string(),
                o.turns.to_string(),
                o.usage.total().to_string(),
                format!("${:.4}", o.cost_usd),
                format!("{:.1} s", o.duration.as_secs_f64()),
            ),
            phase @ (Phase::Running(_) | Phase::Queued) => (
                phase.name().into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        let parent = job
            .parent
            .as_ref()
            .map_or("-".to_string(), ToString::to_string);
        let description = job.label.as_deref().unwrap_or("-");
        out.push_str(&format!(
            "{:<8} {:<8} {:<14} {:<16} {:>5} {:>9} {:>9} {:>8}  {description}\n",
            job.id, parent, job.profile, state, turns, tokens, cost, time
        ));
    }
    out.push_str(&format!("total cost ${:.4}\n", report.cost_usd));
    out
}

/// Feeds the event stream to the progress view, the JSONL log and the web view until
/// the root ends.
async fn show_progress(
    mut events: EventStream,
    root: String,
    mode: ProgressMode,
    mut log: Option<std::io::BufWriter<std::fs::File>>,
    web: Option<Arc<crate::web::LiveRun>>,
) -> anyhow::Result<()> {
    use std::io::{IsTerminal, Write};
    let live = match mode {
        ProgressMode::Tty => true,
        ProgressMode::Auto => std::io::stderr().is_terminal(),
        ProgressMode::Plain | ProgressMode::None => false,
    };
    let plain = mode == ProgressMode::Plain || (mode == ProgressMode::Auto && !live);
    let mut view = AgentTree::default();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    // Plain lines go out in bursts: every event already waiting is written, then one
    // flush, instead of one write per event (a thousand sub-agents make ~6000 events).
    let mut out = std::io::BufWriter::new(std::io::stderr());
    loop {
        tokio::select! {
            record = events.next() => {
                let Some(mut record) = record else { break };
                let root_finished = loop {
                    if let Some(log) = log.as_mut() {
                        serde_json::to_writer(&mut *log, &record)?;
                        log.write_all(b"\n")?;
                    }
                    view.apply(&record);
                    if let Some(web) = &web {
                        web.apply(&record);
                    }
                    if let Some(line) = plain.then(|| plain_line(&record.event)).flatten() {
                        writeln!(out, "{line}")?;
                    }
                    if matches!(&record.event, Event::AgentFinished { agent, .. } if *agent == root) {
                        break true;
                    }
                    match events.try_next() {
                        Some(next) => record = next,
                        None => break false,
                    }
                };
                out.flush()?;
                if let Some(web) = &web {
                    web.flush();
                }
                if root_finished {
                    break;
                }
            }
            _ = tick.tick(), if live => view.redraw()?,
        }
    }
    if live {
        view.finish()?;
    }
    if let Some(mut log) = log {
        log.flush()?;
    }
    Ok(())
}

/// `warren run --json`: the result and every agent's usage.
/// `--output-schema FILE`: read within [`crate::config::MAX_OUTPUT_SCHEMA_BYTES`]
/// (pretty-printed, up to four times that) and checked; a usage error naming the file.
fn read_output_schema(path: &std::path::Path) -> Result<crate::config::OutputSchema, Failure> {
    let limit = crate::config::MAX_OUTPUT_SCHEMA_BYTES as u64 * 4;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(limit + 1).read_to_string(&mut text))
        .map_err(|e| Failure::Usage(format!("--output-schema {}: {e}", path.display())))?;
    crate::config::OutputSchema::from_json(&text)
        .map_err(|e| Failure::Usage(format!("--output-schema {}: {e}", path.display())))
}

fn report_json(report: &RunReport) -> serde_json::Value {
    let outcome = |o: &crate::outcome::AgentOutcome| {
        serde_json::json!({
            "state": o.state.as_str(),
            "text": o.text,
            "output": o.output,
            "error": o.error,
            "turns": o.turns,
            "input_tokens": o.usage.input_tokens,
            "output_tokens": o.usage.output_tokens,
            "cost_usd": o.cost_usd,
            "duration_ms": o.duration.as_millis() as u64,
        })
    };
    let agents: Vec<serde_json::Value> = report
        .agents
        .iter()
        .map(|job| {
            let mut value = match &job.phase {
                Phase::Done(o) => outcome(o),
                phase => serde_json::json!({"state": phase.name()}),
            };
            value["id"] = job.id.0.clone().into();
            value["parent"] = job.parent.as_ref().map(|p| p.0.clone()).into();
            value["profile"] = job.profile.clone().into();
            value["description"] = job.label.clone().into();
            value
        })
        .collect();
    let mut root = outcome(&report.root);
    root["run_id"] = report.run_id.clone().into();
    root["total_cost_usd"] = report.cost_usd.into();
    root["agents"] = agents.into();
    root
}

/// `warren plugin inspect FILE [--wit PATH]`.
async fn inspect(file: &std::path::Path, wit: Option<&std::path::Path>) -> anyhow::Result<()> {
    let sandbox = Sandbox::new().context("creating the sandbox")?;
    let cache = crate::plugin::CompileCache::at(crate::config::default_cache_dir());
    let (component, _) = cache.load(sandbox.engine(), file)?;
    let ty = component.component_type();
    outln!("{}", file.display())?;
    outln!("imports:")?;
    for (name, _) in ty.imports(sandbox.engine()) {
        outln!("  {name}")?;
    }
    outln!("exports:")?;
    for (name, _) in ty.exports(sandbox.engine()) {
        outln!("  {name}")?;
    }
    let name = file
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    if !crate::plugin::typed::is_plugin(&component, &sandbox) {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let options = crate::plugin::typed::TypedOptions {
            wit,
            hidden: &[],
            limits: &crate::config::PluginLimits::default(),
        };
        let (typed, tools) =
            crate::plugin::typed::TypedComponent::load(&sandbox, &component, &bytes, &options)
                .with_context(|| {
                    format!(
                        "{} is a typed component (it does not export warren:plugin/tool) that warren cannot offer",
                        file.display()
                    )
                })?;
        outln!("kind: typed component (each exported function is a tool)")?;
        outln!("tools:")?;
        for (tool, function) in tools.iter().zip(typed.functions()) {
            outln!(
                "  {} ({}): {}\n    arguments: {}",
                tool.name,
                function.wit_name,
                tool.description,
                tool.input_schema
            )?;
        }
        return Ok(());
    }
    outln!("kind: warren:plugin/plugin component (it lists its tools)")?;
    let pre = sandbox.prepare(&component).map_err(|error| {
        anyhow::anyhow!(
            "{} does not implement the warren:plugin/plugin world (see wit/plugin.wit): {error:#}",
            file.display()
        )
    })?;
    let tools = sandbox.list_tools(&pre, &name).await?;
    outln!("tools:")?;
    for tool in tools {
        outln!(
            "  {}: {}\n    arguments: {}",
            tool.name,
            tool.description,
            tool.input_schema
        )?;
    }
    Ok(())
}
