//! The `warren` command line: argument parsing and the subcommands.
//!
//! Exit codes: 0 success (or the reader of stdout stopped early, `| head -1`); 1 the
//! tool (or agent) failed; 2 bad usage or configuration.
//!
//! [`args`] holds the grammar; each group of subcommands has its file: [`run`] (`run`,
//! `resume`, with the live terminal tree in [`ui`]), [`runs`] (`runs`, `show`, `replay`,
//! `diff`, whose reports are [`runs_report`], [`replay_report`] and [`diff_report`]),
//! [`serve`] (`mcp`, `view`, `worker`), [`project`] (`init`, `doctor`, `agents`: their
//! bodies in [`init`], [`doctor`] and [`agents_report`]) and [`tools`] (`tools`, `call`,
//! `plugin`, with `plugin new` in [`scaffold`]); [`failure`] says why a command failed,
//! which decides its exit code.

use std::process::ExitCode;

use clap::Parser as _;

use crate::telemetry::Telemetry;
use crate::term::StdoutClosed;
use args::{Cli, Command};
use failure::Failure;

mod agents_report;
mod approve;
mod args;
mod control_args;
mod diff_report;
mod doctor;
mod failure;
mod init;
mod project;
mod prompt;
mod replay_report;
mod run;
mod runs;
mod runs_report;
mod scaffold;
mod send;
mod serve;
mod server_args;
mod tools;
mod ui;
mod worker;
mod worker_job;

/// Parses the command line, runs the command and reports its error, if any.
pub(crate) fn main() -> ExitCode {
    lean_malloc();
    let cli = Cli::parse_from(args::joined_web_address(std::env::args_os()));
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

/// Runs one subcommand; the configuration file is read by the subcommands that need it.
async fn run(cli: Cli) -> Result<(), Failure> {
    let config = &cli.config;
    match cli.command {
        Command::Tools(args) => tools::tools(config, args).await,
        Command::Run(args) => run::run(config, args).await,
        Command::Plugin(command) => tools::plugin(command).await,
        Command::Call(args) => tools::call(config, args).await,
        Command::Init(args) => project::init(args).await,
        Command::Doctor => project::doctor(config).await,
        Command::Agents(args) => project::agents(config, args).await,
        Command::Worker(args) => serve::worker(config, args).await,
        Command::Mcp(args) => serve::mcp(config, args).await,
        Command::A2a(args) => serve::a2a(config, args).await,
        Command::Runs(args) => runs::runs(config, args),
        Command::Show(args) => runs::show(config, args),
        Command::Send(args) => send::send(config, args).await,
        Command::Approve(args) => approve::approve(config, args).await,
        Command::View(args) => serve::view(config, args).await,
        Command::Resume(args) => run::resume(config, args).await,
        Command::Replay(args) => runs::replay(config, args).await,
        Command::Diff(args) => runs::diff(config, args),
    }
}
