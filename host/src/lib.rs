//! warren: a host for LLM agents that spawn sub-agents, where every tool any agent
//! calls is a WebAssembly component run in a sandbox whose capabilities come from the
//! agent's profile.
//!
//! Layout, in layers (every `crate::` path points to a lower one; the table is
//! checked by `tests/all/layers.rs`):
//! - L0: [`policy`] (what a profile's tools may touch and use, as plain data: the
//!   per-call limits declared once, grants, [`CapabilitySet`], the queue's ceiling),
//!   [`builtin`] (the embedded plugins), [`llm`] (providers with streaming, usage,
//!   cost and retries), `term`, `listener` (the bounded TCP listener of the HTTP
//!   servers);
//! - L1: [`sandbox`] (the wasmtime engine, a fresh store per call, capabilities
//!   enforced);
//! - L2: [`outcome`] (how an agent ended) and [`telemetry`] (logs and OTLP traces);
//! - L3: [`config`] (`warren.toml`, profiles and agent files as plain validated
//!   data) and [`events`] (the event bus, with typed states);
//! - L4: [`journal`] (every run recorded, and read back);
//! - L5: [`plugin`] (compile cache, tool registry) and [`jobs`] (the job tree, the
//!   [`jobs::JobHandle`] that owns each job's life, budget, the one narrowing rule for
//!   children, and the [`jobs::Backend`] seam);
//! - L6: `scheduler` (the one owner of the spawn protocol: spawn, await, cancel,
//!   list and the delivery of results, with typed answers) and [`run_state`] (where
//!   each agent stands, folded from events: the one fold the terminal and web views
//!   share);
//! - L7: [`agent`] (the loop, and the spawn tools that put the scheduler's answers in
//!   words) and [`queue`] (BullMQ wire format, the Redis backend);
//! - L8: [`host`]: the composition root and library API (load once, start runs);
//! - L9: [`mcp`] (`warren mcp`: the tools and the sub-agent tools served to MCP
//!   clients through [`Session`]s), [`web`] (the live web view and its API),
//!   `fuzzing`;
//! - L10: `cli`, each subcommand's body beside its arguments (`warren worker`'s too).
//!
//! The library's API is what a program embedding warren needs: a [`Config`] from a
//! file or made in code ([`ConfigBuilder`]), a [`Host`] loaded from it, with model
//! providers or a sub-agent backend supplied in code ([`HostBuilder`]), runs and
//! sessions, their events and reports, and one error type ([`Error`]). The command
//! line's modules (`cli`, `doctor`, `init`, `scaffold`, `ui`) are the binary's, not
//! public; see `examples/library.rs` and docs/library.md.
//!
//! `fuzzing` is compiled only under `--cfg fuzzing`: entry points for the fuzz targets
//! in `fuzz/`.

// Results go to stdout through `term::outln!`, which ends quietly on a closed pipe.
#![warn(clippy::print_stdout)]

pub mod agent;
pub mod builtin;
mod cli;
pub mod config;
pub mod events;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod jobs;
pub mod journal;
mod listener;
pub mod llm;
pub mod mcp;
pub mod outcome;
pub mod plugin;
pub mod policy;
pub mod queue;
pub mod run_state;
pub mod sandbox;
mod scheduler;
pub mod telemetry;
mod term;
pub mod web;

pub use config::{Config, ConfigBuilder, ConfigError, Profile};
pub use host::{Canceller, Error, Host, HostBuilder, Run, RunReport, Session};
pub use outcome::{AgentOutcome, AgentState};
pub use plugin::{ToolAccess, ToolRegistry};
pub use policy::CapabilitySet;
pub use sandbox::{Sandbox, ToolCallError};

/// The `warren` binary's entry point (parse the arguments, run, report, exit code).
/// Not part of the library's API: the command line is the binary's.
#[doc(hidden)]
pub fn cli_main() -> std::process::ExitCode {
    cli::main()
}
