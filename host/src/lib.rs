//! warren: a host for LLM agents that spawn sub-agents, where every tool any agent
//! calls is a WebAssembly component run in a sandbox whose capabilities come from the
//! agent's profile.
//!
//! Layout, in layers (every `crate::` path points to a lower one; the table is
//! checked by `tests/all/layers.rs`):
//! - L0: `policy` (what a profile's tools may touch and use, as plain data: the
//!   per-call limits declared once, grants, capability sets, the queue's ceiling),
//!   `builtin` (the embedded plugins), `llm` (providers with streaming, usage,
//!   cost and retries), `term`;
//! - L1: `sandbox` (the wasmtime engine, a fresh store per call, capabilities
//!   enforced), `listener` (the bounded HTTP server of the web view, MCP and A2A);
//! - L2: `outcome` (how an agent ended) and `telemetry` (logs and OTLP traces);
//! - L3: `config` (`warren.toml`, profiles and agent files as plain validated
//!   data) and `events` (the event bus, with typed states);
//! - L4: `journal` (every run recorded, and read back);
//! - L5: `plugin` (compile cache, tool registry) and `jobs` (the job tree, the
//!   [`JobHandle`] that owns each job's life, budget, the one narrowing rule for
//!   children, the [`Backend`] seam, and `jobs::run_state`: where each agent
//!   stands, folded from events, the one fold the terminal and web views share);
//! - L6: `scheduler` (the one owner of the spawn protocol: spawn, await, cancel,
//!   list and the delivery of results, with typed answers);
//! - L7: `agent` (the loop, and the spawn tools that put the scheduler's answers in
//!   words) and `queue` (BullMQ wire format, the Redis backend);
//! - L8: `host`: the composition root and library API (load once, start runs), and
//!   the benches' entry points;
//! - L9: `mcp` (`warren mcp`: the tools and the sub-agent tools served to MCP
//!   clients through [`Session`]s), `a2a` (`warren a2a`: profiles served as A2A
//!   agents, a task a run), `web` (the live web view and its API),
//!   `fuzzing`;
//! - L10: `cli`, each subcommand's body beside its arguments (`warren worker`'s too).
//!
//! The library's API is what a program embedding warren needs, all of it at the
//! crate's root (`warren::X`), every module private: a [`Config`] from a file or made
//! in code ([`ConfigBuilder`], with typed grants: [`FsGrant`]), a [`Host`] loaded from
//! it, with model providers ([`Provider`]) or a sub-agent backend ([`Backend`])
//! supplied in code ([`HostBuilder`]), runs ([`Run`], [`RunReport`] with an
//! [`AgentReport`] per agent) and sessions ([`Session`]: tools called in their
//! sandbox, sub-agents spawned, by the caller), their events ([`Event`]), and one error
//! type ([`Error`]). The command line's modules (`cli`, `doctor`, `init`, `scaffold`,
//! `ui`) are the binary's. See `examples/library.rs` and docs/library.md; how many
//! public items there are is held by `tests/all/surface.rs`.
//!
//! `fuzzing` is compiled only under `--cfg fuzzing`: entry points for the fuzz targets
//! in `fuzz/`.

// Results go to stdout through `term::outln!`, which ends quietly on a closed pipe.
#![warn(clippy::print_stdout)]
// Without the `internals` feature (below) the sandbox's own API is reachable from no
// public path, by design; the lint holds with it on, as the suite and
// `cargo clippy --all-targets` build the crate.
#![cfg_attr(not(feature = "internals"), allow(unreachable_pub))]

mod a2a;
mod agent;
mod builtin;
mod cli;
mod config;
mod events;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod host;
mod jobs;
mod journal;
mod listener;
mod llm;
mod mcp;
mod outcome;
mod plugin;
mod policy;
mod queue;
mod sandbox;
mod scheduler;
mod telemetry;
mod term;
mod web;

// The library's API, by what an embedder does with it (docs/library.md), each item
// named where it is defined (a `pub use` in a private module between would be
// unreachable, and made `pub(crate)` by `cargo fix`).
// A configuration, from a file or made in code:
pub use config::builder::ConfigBuilder;
pub use config::error::ConfigError;
pub use config::Config;
pub use policy::capabilities::{FsGrant, FsMode};
// A host, its runs and sessions, how they end, and what fails:
pub use host::builder::HostBuilder;
pub use host::error::Error;
pub use host::run::{AgentReport, Canceller, Run, RunReport};
pub use host::session::Session;
pub use host::Host;
pub use outcome::{AgentOutcome, AgentState};
// The events a run publishes:
pub use events::{AgentIntro, Event, EventRecord, EventStream, SpawnMode};
// A model provider supplied in code:
pub use llm::chat::{
    AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason, Message, Provider,
    Requester, ToolCall, ToolDefinition, Usage,
};
pub use llm::error::LlmError;
// A sub-agent backend supplied in code:
pub use jobs::child::{Backend, ChildSpec};
pub use jobs::handle::JobHandle;
pub use jobs::job::JobId;
// How a tool call ended, as events carry it:
pub use sandbox::error::ToolOutcome;

// Not the library's API, compiled only with the `internals` feature (host/Cargo.toml),
// which the suite and the benches turn on: the sandbox called without an agent (an
// embedder calls tools through a `Session`), and what the benches (`host/benches/`)
// time that no public call isolates (each says which bench it serves;
// `Sandbox::memory_slots` too).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use config::{agent_dir::AgentFilesReport, limits::AgentLimits, profile::Profile};
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use host::bench::journal_peer_workload;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use llm::chat::StreamEvent;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use llm::request_encoder;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use plugin::{ToolAccess, ToolRegistry};
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use policy::capabilities::CapabilitySet;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use sandbox::error::{OutputKind, ToolCallError};
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use sandbox::phases::{totals as sandbox_phase_totals, PhaseTotals};
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use sandbox::Sandbox;

/// The `warren` binary's entry point (parse the arguments, run, report, exit code).
/// Not part of the library's API: the command line is the binary's.
#[doc(hidden)]
pub fn cli_main() -> std::process::ExitCode {
    cli::main()
}
