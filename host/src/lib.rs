//! warren: a host for LLM agents that spawn sub-agents, where every tool any agent
//! calls is a WebAssembly component run in a sandbox whose capabilities come from the
//! agent's profile.
//!
//! Layout:
//! - [`config`]: `warren.toml`, profiles and their capability sets, strictly validated;
//! - [`sandbox`]: the wasmtime engine, a fresh store per call, capabilities → WASI,
//!   network policy, limits and the errors a call can end with;
//! - [`plugin`]: loading plugin components (with an on-disk compile cache) and the
//!   tool registry;
//! - [`llm`]: model providers (OpenAI-compatible, Anthropic, scripted) with streaming,
//!   usage, cost and retries;
//! - [`agent`]: the agent loop; [`jobs`]: the job tree, budget, concurrency and the
//!   spawn tools; [`host`]: the library API (load once, start runs);
//! - [`events`]: the event bus (progress, JSONL log); [`ui`]: the terminal view;
//!   [`telemetry`]: logs and OTLP traces;
//! - [`mcp`]: `warren mcp`, the tools and the sub-agent tools served to MCP clients
//!   through [`Session`]s;
//! - [`cli`]: the `warren` command line, with [`init`] (starter projects), [`doctor`]
//!   (project checks) and `agents_report` (`warren agents`); `term`: stderr shared by
//!   the live view and the logs;
//! - `fuzzing` (only under `--cfg fuzzing`): entry points for the fuzz targets in `fuzz/`.

pub mod agent;
mod agents_report;
pub mod cli;
pub mod config;
pub mod doctor;
pub mod events;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod init;
pub mod jobs;
pub mod llm;
pub mod mcp;
pub mod plugin;
pub mod queue;
pub mod sandbox;
pub mod scaffold;
pub mod telemetry;
mod term;
pub mod ui;

pub use agent::{AgentOutcome, AgentState};
pub use config::{Config, ConfigError, Profile};
pub use host::{Host, Run, RunReport, Session};
pub use plugin::{ToolAccess, ToolRegistry};
pub use sandbox::{CapabilitySet, Sandbox, ToolCallError};
