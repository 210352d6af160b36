//! The ways a tool call can fail, each naming the limit, its value and the profile key
//! that raises it, so both the model and the person reading the log know what to change.

use std::fmt;

/// Which output passed `capabilities.max_output_kb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// The tool's returned result (or error message).
    Result,
    /// What the guest wrote to stdout.
    Stdout,
    /// What the guest wrote to stderr.
    Stderr,
}

impl fmt::Display for OutputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputKind::Result => "result",
            OutputKind::Stdout => "stdout",
            OutputKind::Stderr => "stderr",
        })
    }
}

/// Why a tool call produced no result.
#[derive(Debug, thiserror::Error)]
pub enum ToolCallError {
    /// No loaded plugin offers the tool, or the profile may not use it.
    #[error("no tool `{tool}` is available to profile `{profile}` (available: {})", available.join(", "))]
    UnknownTool {
        /// The requested name.
        tool: String,
        /// The calling profile.
        profile: String,
        /// What the profile may call instead.
        available: Vec<String>,
    },
    /// The call ran longer than `capabilities.tool_timeout_ms`.
    #[error("{tool} timed out after {limit_ms} ms (raise capabilities.tool_timeout_ms = {limit_ms} in profile `{profile}`)")]
    Timeout {
        /// The tool called.
        tool: String,
        /// The calling profile.
        profile: String,
        /// The limit that was reached.
        limit_ms: u64,
    },
    /// The call executed more instructions than `capabilities.fuel`.
    #[error("{tool} ran out of fuel after {fuel} instructions (raise capabilities.fuel = {fuel} in profile `{profile}`)")]
    OutOfFuel {
        /// The tool called.
        tool: String,
        /// The calling profile.
        profile: String,
        /// The fuel the call was given.
        fuel: u64,
    },
    /// The guest tried to grow its memory past `capabilities.memory_mb`.
    #[error("{tool} hit the memory limit of {limit_mb} MiB (raise capabilities.memory_mb = {limit_mb} in profile `{profile}`)")]
    MemoryLimit {
        /// The tool called.
        tool: String,
        /// The calling profile.
        profile: String,
        /// The limit that was reached.
        limit_mb: u64,
    },
    /// A result, stdout or stderr passed `capabilities.max_output_kb`.
    #[error("{tool} produced a {kind} larger than {limit_kb} KiB{} (raise capabilities.max_output_kb = {limit_kb} in profile `{profile}`)", size.map(|s| format!(" ({s} bytes)")).unwrap_or_default())]
    OutputTooLarge {
        /// The tool called.
        tool: String,
        /// The calling profile.
        profile: String,
        /// Which output was too large.
        kind: OutputKind,
        /// The limit that was passed.
        limit_kb: u64,
        /// The size the guest produced, when known.
        size: Option<usize>,
    },
    /// The guest passed a per-call bound on what it may make the host hold or do:
    /// handles, file writes, scratch space.
    #[error("{tool} hit the limit of {limit}{unit} {what}{} (raise capabilities.{key} = {limit} in profile `{profile}`)", note.as_deref().map(|n| format!("; {n}")).unwrap_or_default())]
    ResourceLimit {
        /// The tool called.
        tool: String,
        /// The calling profile.
        profile: String,
        /// What was bounded, e.g. "open handles (files, streams, sockets, HTTP fields)".
        what: &'static str,
        /// The capability key.
        key: &'static str,
        /// Its value.
        limit: u64,
        /// Its unit as written after the value ("" or " MiB").
        unit: &'static str,
        /// What became of partial work, when there is something to say.
        note: Option<String>,
    },
    /// The sandbox refused something the guest asked for.
    #[error(
        "{tool} was denied {request}: {reason} (capability {capability} of profile `{profile}`)"
    )]
    Denied {
        /// The tool called.
        tool: String,
        /// The calling profile.
        profile: String,
        /// What the guest asked for.
        request: String,
        /// The profile key that would allow it.
        capability: String,
        /// Why it was refused.
        reason: String,
    },
    /// The guest crashed (a panic, an abort, an invalid instruction).
    #[error("plugin {plugin} crashed in {tool}: {message}")]
    Trap {
        /// The tool called.
        tool: String,
        /// The plugin file that trapped.
        plugin: String,
        /// The trap, with what the guest wrote to stderr last.
        message: String,
    },
    /// The tool rejected its arguments; the model should fix the call.
    #[error("invalid input for {tool}: {message}")]
    InvalidInput {
        /// The tool called.
        tool: String,
        /// The tool's explanation.
        message: String,
    },
    /// The tool ran and could not do what was asked.
    #[error("{tool} failed: {message}")]
    Failed {
        /// The tool called.
        tool: String,
        /// The tool's explanation.
        message: String,
    },
    /// The host could not run the call (not the guest's fault).
    #[error("host error running {tool}: {source:#}")]
    Host {
        /// The tool called.
        tool: String,
        /// The underlying failure.
        source: anyhow::Error,
    },
}

/// How a tool call ended: `ok`, or the kind of its failure. Events carry it typed;
/// its serde name ([`ToolOutcome::as_str`]) is what JSON output and traces show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    /// It returned a result.
    Ok,
    /// No such tool.
    UnknownTool,
    /// It ran past its wall-time limit.
    Timeout,
    /// It used up its fuel.
    OutOfFuel,
    /// It hit its memory cap.
    MemoryLimit,
    /// Its output passed the cap.
    OutputTooLarge,
    /// It hit another resource bound (handles, log, disk).
    ResourceLimit,
    /// The sandbox refused it something.
    Denied,
    /// The guest trapped.
    Trap,
    /// Its arguments were wrong.
    InvalidInput,
    /// The tool ran and could not do it.
    Failed,
    /// The host failed around the call.
    HostError,
    /// It had started when the run's process died, its end was not recorded, and
    /// the resumed run did not run it again (it could have had an effect).
    InDoubt,
}

impl ToolOutcome {
    /// The stable name (as in JSON).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::UnknownTool => "unknown_tool",
            ToolOutcome::Timeout => "timeout",
            ToolOutcome::OutOfFuel => "out_of_fuel",
            ToolOutcome::MemoryLimit => "memory_limit",
            ToolOutcome::OutputTooLarge => "output_too_large",
            ToolOutcome::ResourceLimit => "resource_limit",
            ToolOutcome::Denied => "denied",
            ToolOutcome::Trap => "trap",
            ToolOutcome::InvalidInput => "invalid_input",
            ToolOutcome::Failed => "failed",
            ToolOutcome::HostError => "host_error",
            ToolOutcome::InDoubt => "in_doubt",
        }
    }
}

impl ToolOutcome {
    /// Whether a call that ended so, with `error` (its message as events and the
    /// journal carry it), was a denial: the sandbox refused the guest something
    /// (`denied`), or the tool says it was refused (`TOOL failed: denied…`, as the
    /// built-in plugins report a write to a read-only grant).
    pub(crate) fn is_denial(self, error: &str) -> bool {
        match self {
            ToolOutcome::Denied => true,
            ToolOutcome::Failed => error
                .split_once(" failed: ")
                .is_some_and(|(_, message)| reports_denial(message)),
            _ => false,
        }
    }
}

/// Whether a tool's own failure message says the sandbox refused it something.
pub(crate) fn reports_denial(message: &str) -> bool {
    message.starts_with("denied")
}

impl std::fmt::Display for ToolOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl ToolCallError {
    /// The kind of failure (for events, JSON output and traces).
    pub(crate) fn kind(&self) -> ToolOutcome {
        match self {
            ToolCallError::UnknownTool { .. } => ToolOutcome::UnknownTool,
            ToolCallError::Timeout { .. } => ToolOutcome::Timeout,
            ToolCallError::OutOfFuel { .. } => ToolOutcome::OutOfFuel,
            ToolCallError::MemoryLimit { .. } => ToolOutcome::MemoryLimit,
            ToolCallError::OutputTooLarge { .. } => ToolOutcome::OutputTooLarge,
            ToolCallError::ResourceLimit { .. } => ToolOutcome::ResourceLimit,
            ToolCallError::Denied { .. } => ToolOutcome::Denied,
            ToolCallError::Trap { .. } => ToolOutcome::Trap,
            ToolCallError::InvalidInput { .. } => ToolOutcome::InvalidInput,
            ToolCallError::Failed { .. } => ToolOutcome::Failed,
            ToolCallError::Host { .. } => ToolOutcome::HostError,
        }
    }
}
