//! The command line's grammar: every subcommand, its arguments and their help text
//! (clap derives), and the checks an argument gets before any work starts.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::failure::Failure;
use crate::cli::ui::ProgressMode;
use crate::config::{Config, DEFAULT_PROFILE};

/// Run LLM agents and their sub-agents, with every tool sandboxed in WebAssembly.
#[derive(Debug, Parser)]
#[command(name = "warren", version, about, long_about = None)]
pub(super) struct Cli {
    /// The configuration file (plugins, defaults, profiles).
    #[arg(
        long,
        short,
        global = true,
        env = "WARREN_CONFIG",
        default_value = "warren.toml"
    )]
    pub(super) config: PathBuf,

    /// Export traces (OpenTelemetry GenAI spans) as OTLP/HTTP to this endpoint, e.g.
    /// http://localhost:4318; headers come from OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    pub(super) otlp_endpoint: Option<String>,

    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
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
    Mcp(super::server_args::McpArgs),
    /// Serve profiles as A2A agents (Agent2Agent protocol 1.0, JSON-RPC binding)
    /// over HTTP, for A2A clients (the A2A SDKs, ADK, the Microsoft Agent
    /// Framework, another agent).
    ///
    /// Each profile is an agent at http://ADDR/a2a/PROFILE with its card at
    /// /a2a/PROFILE/.well-known/agent-card.json (the first profile's card also at
    /// /.well-known/agent-card.json). A message starts a task, and a task is a
    /// journaled run: its id is the run's (`warren show ID`), its status streams
    /// the progress of every agent of its tree, its artifact is the root's answer.
    /// An approval or a question of any agent makes the task INPUT_REQUIRED; the
    /// client's next message to the task answers it (`approve`, `always`, `deny
    /// REASON`, or the answer). A message to a working task is left for the root,
    /// read at its next turn; CancelTask cancels the tree. Every request but the
    /// cards' must carry the bearer token printed at start (or given by
    /// --token-file or WARREN_MCP_TOKEN).
    A2a(super::server_args::A2aArgs),
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
    /// Send a message to an agent of a live run, from another terminal, and print its
    /// receipt: queued (read at the agent's next turn boundary), resumed (a follow-up
    /// woke an agent that had finished) or rejected, with the reason.
    ///
    /// The process running the run (`warren run`, `warren resume`) listens on the
    /// run's control socket beside its journal, owner-only. A run whose process is
    /// gone is refused, with how to resume it. AGENT is a job id as `warren show`
    /// lists it, or `root`. Exit code 0 when the message was accepted, 1 when it was
    /// rejected or the run cannot be reached, 2 for bad arguments.
    Send(super::control_args::SendArgs),
    /// List the approvals and questions a live run's agents wait on, or answer one.
    ///
    /// Without REQUEST, prints each waiting request: its id, the agent's path, the
    /// tool, its exact arguments, what the call could touch and its deadline. With
    /// REQUEST, approves that call once (--always: and every later call of its tool
    /// in the run), denies it (--deny REASON: the model is told the reason), or
    /// answers a question (--answer TEXT). The answer is journaled with who gave it.
    /// Exit code 0 when answered (or listed), 1 when refused or the run cannot be
    /// reached, 2 for bad arguments.
    Approve(super::control_args::ApproveArgs),
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
pub(super) struct DiffArgs {
    /// The first run (shown as `-`).
    pub(super) run_a: String,
    /// The second run (shown as `+`).
    pub(super) run_b: String,
}

#[derive(Debug, Args)]
pub(super) struct ReplayArgs {
    /// The runs: ids, unique prefixes of ids, `last`, or paths to journal files (or to
    /// the run directories holding them, e.g. runs kept as test fixtures).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub(super) runs: Vec<String>,
    /// Replay every journal in DIR (each RUN/journal.jsonl and *.jsonl): one line per
    /// run, then a summary; exits 1 if any differs.
    #[arg(long, value_name = "DIR")]
    pub(super) all: Option<PathBuf>,
    /// Where tool results come from: `rerun` runs each call again and compares its
    /// result with the recorded one; `recorded` serves them from the journal (spawn
    /// tools always run: they re-create the children).
    #[arg(long, value_enum, default_value = "rerun")]
    pub(super) tools: ReplayToolsArg,
    /// Fork the run from this agent (its id in the recording; `warren show RUN`
    /// lists them): a new, journaled run in which that agent, changed as the options
    /// below say, and everything it spawns call their models live, while the rest of
    /// the tree is served from the recording at no cost until the new result reaches
    /// it, and continues live from there. `warren diff RUN FORK` compares them.
    #[arg(long, value_name = "AGENT")]
    pub(super) from: Option<String>,
    /// With --from: run the agent under this profile's settings instead.
    #[arg(long, requires = "from", value_name = "PROFILE")]
    pub(super) profile: Option<String>,
    /// With --from: run the agent on this model (a [models] name) instead.
    #[arg(long, requires = "from", value_name = "MODEL")]
    pub(super) model: Option<String>,
    /// With --from: give the agent this file's text as its system prompt instead.
    #[arg(long, requires = "from", value_name = "FILE")]
    pub(super) prompt_file: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ReplayToolsArg {
    Rerun,
    Recorded,
}

#[derive(Debug, Args)]
pub(super) struct ResumeArgs {
    /// The run: its id, a unique prefix of it, or `last`.
    pub(super) run: String,
    /// Resume even though the configuration or a plugin changed since the run began.
    #[arg(long)]
    pub(super) force: bool,
    /// Send a follow-up to agent AGENT (an id `warren show RUN` lists) first, in a
    /// finished run too: the agent is brought back from the journal, reads TEXT at
    /// its recorded end and answers live, with its whole history, on its own model;
    /// its answer is printed. Its ancestors that had finished are replayed from the
    /// journal (no model is asked again) and keep their answers.
    #[arg(long, num_args = 2, value_names = ["AGENT", "TEXT"])]
    pub(super) follow_up: Option<Vec<String>>,
    /// Who the follow-up is from, as the agent reads it (default: $USER).
    #[arg(long, requires = "follow_up")]
    pub(super) from: Option<String>,
    #[command(flatten)]
    pub(super) output: OutputArgs,
    #[command(flatten)]
    pub(super) queue: QueueArgs,
}

/// How a run's progress and result are shown (`run` and `resume`).
#[derive(Debug, Args)]
pub(super) struct OutputArgs {
    /// Progress on stderr: a live agent tree on a terminal, plain lines otherwise.
    #[arg(long, value_enum, default_value = "auto")]
    pub(super) progress: ProgressMode,
    /// No progress and no summary table (the answer still goes to stdout).
    #[arg(long, short)]
    pub(super) quiet: bool,
    /// Write every event to FILE as JSON lines, each with a timestamp.
    #[arg(long, value_name = "FILE")]
    pub(super) events: Option<PathBuf>,
    /// Print the result and per-agent usage as JSON on stdout instead of the answer.
    #[arg(long)]
    pub(super) json: bool,
    /// Serve a live web view of the run (the agent tree, transcripts, a timeline,
    /// cancelling an agent) on ADDR, loopback with a free port by default
    /// (`--web ADDR` or `--web=ADDR` to choose); its address, with a random token, is printed on
    /// stderr. After the run it stays up until Ctrl-C.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true,
          default_missing_value = crate::web::DEFAULT_ADDR)]
    pub(super) web: Option<std::net::SocketAddr>,
    /// Who answers the calls a profile's `approval` rule names, and `ask_person`
    /// questions: `ask` waits for a person (this terminal, `warren approve` from
    /// another, the web view) until each request's deadline; `deny` denies at once,
    /// telling the model nobody was there to approve; `all` approves every one.
    /// Default: `ask` on an interactive terminal or with --web, `deny` otherwise.
    #[arg(long, value_name = "POLICY", value_parser = ["ask", "deny", "all"])]
    pub(super) approve: Option<String>,
}

/// The command line with `--web ADDR` (the space form people type) read as
/// `--web=ADDR` when ADDR is a socket address: `--web` takes its value only with `=`,
/// since `--web "task"` must leave the task alone.
pub(super) fn joined_web_address(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut joined: Vec<std::ffi::OsString> = Vec::new();
    for arg in args {
        let is_address = arg
            .to_str()
            .is_some_and(|a| a.parse::<std::net::SocketAddr>().is_ok());
        let after_web =
            joined.last().is_some_and(|last| last == "--web") && !joined.iter().any(|a| a == "--");
        match joined.last_mut() {
            Some(last) if after_web && is_address => {
                last.push(format!("={}", arg.to_string_lossy()))
            }
            _ => joined.push(arg),
        }
    }
    joined
}

#[derive(Debug, Args)]
pub(super) struct ViewArgs {
    /// The run: its id, a unique prefix of it, or `last` (default: the list of runs).
    pub(super) run: Option<String>,
    /// Listen on this address (loopback by default; port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = crate::web::DEFAULT_ADDR)]
    pub(super) addr: std::net::SocketAddr,
}

#[derive(Debug, Args)]
pub(super) struct RunsArgs {
    /// Print JSON: {dir, runs: [...]}.
    #[arg(long, global = true)]
    pub(super) json: bool,
    #[command(subcommand)]
    pub(super) action: Option<RunsAction>,
}

#[derive(Debug, Subcommand)]
pub(super) enum RunsAction {
    /// Delete old runs' journals: finished runs beyond the newest --keep, or older
    /// than --older-than (either or both). Unfinished runs, which `warren resume` could
    /// continue, are kept unless --unfinished; a run a process holds (running, or being
    /// resumed) is never deleted. Prints each run deleted and the space freed.
    Prune(PruneArgs),
}

#[derive(Debug, Args)]
pub(super) struct PruneArgs {
    /// Keep the newest N runs.
    #[arg(long, value_name = "N")]
    pub(super) keep: Option<usize>,
    /// Delete runs that started more than DAYS days ago (fractions allowed: 0.5).
    #[arg(long, value_name = "DAYS")]
    pub(super) older_than: Option<f64>,
    /// Delete unfinished runs too.
    #[arg(long)]
    pub(super) unfinished: bool,
    /// Only print what would be deleted.
    #[arg(long)]
    pub(super) dry_run: bool,
}

#[derive(Debug, Args)]
pub(super) struct ShowArgs {
    /// The run: its id, a unique prefix of it, or `last`.
    pub(super) run: String,
    /// One agent's transcript, by job id.
    #[arg(long, value_name = "ID")]
    pub(super) agent: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub(super) json: bool,
}

/// Where sub-agent jobs go.
#[derive(Debug, Args)]
pub(super) struct QueueArgs {
    /// The Redis that sub-agent jobs go through (BullMQ layout), e.g.
    /// redis://10.0.0.5:6379: `run` sends its sub-agents there instead of running them
    /// here, `worker` takes them from there. Overrides `[queue] redis`.
    #[arg(long, env = "WARREN_REDIS", value_name = "URL")]
    pub(super) redis: Option<String>,
    /// The queue name (keys `bull:NAME:…`); overrides `[queue] name`.
    #[arg(long, value_name = "NAME")]
    pub(super) queue: Option<String>,
}

impl QueueArgs {
    pub(super) fn apply(&self, config: &mut Config) -> Result<(), Failure> {
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
pub(super) struct WorkerArgs {
    #[command(flatten)]
    pub(super) queue: QueueArgs,
    /// Jobs (sub-agents) this worker runs at once. A job whose agent only waits for
    /// its own sub-agents does not count: the worker takes another in its place (up
    /// to --max-waiting of them), so a tree deeper than the workers are wide never
    /// stalls with every place held by a parent waiting for children that have none.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(super) concurrency: u32,
    /// Jobs held at most, beyond --concurrency, whose agents only wait for their own
    /// sub-agents (each holds its conversation in memory and nothing else).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub(super) max_waiting: u32,
    /// The worker's name in logs and on the jobs it runs (default HOST-PID).
    #[arg(long)]
    pub(super) name: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct InitArgs {
    /// The project directory (created if missing).
    #[arg(default_value = ".")]
    pub(super) dir: PathBuf,
    /// The model to configure (default: found from the environment).
    #[arg(long, value_enum)]
    pub(super) provider: Option<crate::cli::init::StarterProvider>,
}

#[derive(Debug, Args)]
pub(super) struct AgentsArgs {
    /// Exit 1 when any agent file was skipped (for CI).
    #[arg(long)]
    pub(super) check: bool,
    /// Print JSON: {profiles: [...], skipped: [...], not_agent_files: [...]}.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Debug, Args)]
pub(super) struct ToolsArgs {
    /// The profile whose tools to list.
    #[arg(long, short, default_value = DEFAULT_PROFILE)]
    pub(super) profile: String,
    /// Print JSON (an array of {name, plugin, builtin, typed, description,
    /// input_schema}, one per tool the profile gets). The text listing ends with the
    /// loaded tools it does not get.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum PluginCommand {
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
        lang: Option<crate::cli::scaffold::Language>,
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
pub(super) struct RunArgs {
    /// What the agent should do.
    pub(super) task: String,
    /// The root agent's profile.
    #[arg(long, short, default_value = DEFAULT_PROFILE)]
    pub(super) profile: String,
    /// Use this model (a [models] name) instead of the profile's.
    #[arg(long, short)]
    pub(super) model: Option<String>,
    #[command(flatten)]
    pub(super) output: OutputArgs,
    /// The run's id (default: random). Job ids derive from it, so a run given an id
    /// hands out the job ids every run of that id does: give each run its own (letters,
    /// digits, `_` and `-`, at most 64), e.g. to name it after an outside system's job.
    #[arg(long, value_name = "ID")]
    pub(super) run_id: Option<String>,
    /// Do not journal this run (by default every run is recorded in `[journal] dir`,
    /// for `warren runs` and `warren show`).
    #[arg(long)]
    pub(super) no_journal: bool,
    /// A JSON Schema file the root's answer must match: stdout is then that JSON (a
    /// run ending `invalid_output` prints nothing there and exits 1).
    #[arg(long, value_name = "FILE")]
    pub(super) output_schema: Option<PathBuf>,
    #[command(flatten)]
    pub(super) queue: QueueArgs,
}

#[derive(Debug, Args)]
pub(super) struct CallArgs {
    /// The tool to call, e.g. read_file.
    pub(super) tool: String,
    /// The arguments, a JSON object; `-` reads them from stdin.
    #[arg(default_value = "{}")]
    pub(super) arguments: String,
    /// The profile whose tools and capabilities apply.
    #[arg(long, short, default_value = DEFAULT_PROFILE)]
    pub(super) profile: String,
}
