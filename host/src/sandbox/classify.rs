//! How a tool call ended, as the [`ToolCallError`] that names the limit it hit: the
//! one classifier every call's outcome goes through. Causes are told apart by the
//! error's type (wasmtime's [`Trap`], the errors warren's own hooks raise, wasmtime's
//! resource-table and `wasi:http` field errors) and by what the store saw (memory
//! refused, output or disk caps passed); only wasmtime's hostcall-fuel error, whose
//! type is private, is recognized by its message.

use tracing::warn;
use wasmtime::Trap;
use wasmtime_wasi_http::FieldMapError;

use super::bindings::exports::warren::plugin::tool::ToolError;
use super::disk::DiskLimit;
use super::error::{self, OutputKind, ToolCallError};
use super::figures::Measured;
use super::limits::CappedPipe;
use super::net::DenialLog;
use crate::policy::CallLimits;

/// Bytes of stderr quoted in a trap report (the end, where a panic message is).
const STDERR_TAIL_BYTES: usize = 2048;

/// What wasmtime fails a call with when the guest hands the host more data in one go
/// than the store's hostcall fuel allows (for a typed component: a result too large
/// for the output cap; see `plugin::typed`). Its error type is private to wasmtime.
const HOSTCALL_FUEL_EXHAUSTED: &str =
    "too much data is being copied between the host and the guest";

/// The guest ran past its wall-time deadline; raised from the epoch callback.
#[derive(Debug, thiserror::Error)]
#[error("tool call deadline exceeded")]
pub(super) struct DeadlineExceeded;

/// A network function of an offline call was called: the trap its stub raises.
#[derive(Debug, thiserror::Error)]
#[error("not linked without a net grant: `{interface}#{function}`")]
pub(super) struct NotLinked {
    /// The interface, e.g. `wasi:http/outgoing-handler@0.2.6`.
    pub(super) interface: String,
    /// The function called.
    pub(super) function: String,
}

/// What a finished call is judged by: who called, under which limits, and what the
/// store saw while the guest ran.
pub(super) struct CallEnd<'a> {
    /// The tool, as the model knows it.
    pub(super) tool: &'a str,
    /// The calling profile.
    pub(super) profile: &'a str,
    /// The plugin (its file), for trap reports and logs.
    pub(super) plugin: &'a str,
    /// The limits the call ran under.
    pub(super) limits: &'a CallLimits,
    /// The handles the call could hold (`max_handles`, cut to the descriptor share).
    pub(super) handles: u64,
    /// The guest's stdout, capped.
    pub(super) stdout: &'a CappedPipe,
    /// The guest's stderr, capped; its end is quoted in a crash report.
    pub(super) stderr: &'a CappedPipe,
    /// Whether the memory cap refused a growth.
    pub(super) memory_refused: bool,
    /// The disk budget the call passed, if any.
    pub(super) disk: Option<DiskLimit>,
    /// Accesses the network policy refused.
    pub(super) denials: &'a DenialLog,
}

/// What the guest call came back with, or `Err` when its deadline passed first.
pub(super) type Outcome =
    Result<wasmtime::Result<Result<String, ToolError>>, tokio::time::error::Elapsed>;

impl CallEnd<'_> {
    /// The call's result, with what it used (`fuel_used`): its output, or why it
    /// produced none. A passed disk budget wins over everything, then the deadline,
    /// then how the guest ended.
    pub(super) fn classify(&self, outcome: Outcome, fuel_used: Option<u64>) -> Measured {
        let result = match self.disk_limit() {
            Some(disk) => Err(disk),
            None => match outcome {
                Err(_elapsed) => Err(self.timeout()),
                Ok(Err(error)) => Err(self.fault(error)),
                Ok(Ok(_)) if self.overflow().is_some() => Err(self.overflow().expect("checked")),
                Ok(Ok(Ok(output))) if output.len() > self.limits.max_output_bytes() => {
                    Err(self.too_large(OutputKind::Result, Some(output.len())))
                }
                Ok(Ok(Ok(output))) => Ok(output),
                Ok(Ok(Err(tool_error))) => Err(self.tool_error(tool_error)),
            },
        };
        Measured::new(result, fuel_used)
    }

    /// A trap or host fault: the limit that caused it, else a crash.
    fn fault(&self, error: wasmtime::Error) -> ToolCallError {
        let limits = self.limits;
        if error.downcast_ref::<DeadlineExceeded>().is_some() {
            self.timeout()
        } else if error.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
            ToolCallError::OutOfFuel {
                tool: self.tool.to_string(),
                profile: self.profile.to_string(),
                fuel: limits.fuel,
            }
        } else if self.memory_refused {
            ToolCallError::MemoryLimit {
                tool: self.tool.to_string(),
                profile: self.profile.to_string(),
                limit_mb: limits.memory_mb,
            }
        } else if let Some(overflow) = self.overflow() {
            overflow
        } else if format!("{error:#}").contains(HOSTCALL_FUEL_EXHAUSTED) {
            self.too_large(OutputKind::Result, None)
        } else if caused_by(&error, |e: &wasmtime::component::ResourceTableError| {
            matches!(e, wasmtime::component::ResourceTableError::Full)
        }) {
            self.limit(
                "open handles (files, directories, streams, sockets, HTTP fields)",
                "max_handles",
                self.handles,
                "",
                None,
            )
        } else if caused_by(&error, |e: &FieldMapError| {
            *e == FieldMapError::TotalSizeTooBig
        }) {
            self.limit(
                "for host-held HTTP header fields (each handle holds at most memory_mb / max_handles)",
                "memory_mb",
                limits.memory_mb,
                " MiB",
                None,
            )
        } else if let Some(not_linked) = error.chain().find_map(|e| e.downcast_ref::<NotLinked>()) {
            self.network_denied(&not_linked.interface)
        } else {
            self.crash(error)
        }
    }

    /// The tool's own error: a denial the network policy recorded comes first, as the
    /// reason; then an error message over the output cap.
    fn tool_error(&self, tool_error: ToolError) -> ToolCallError {
        let tool = self.tool.to_string();
        match (self.denials.entries().into_iter().next(), tool_error) {
            (Some(denial), _) => ToolCallError::Denied {
                tool,
                profile: self.profile.to_string(),
                request: denial.request,
                capability: denial.capability.to_string(),
                reason: denial.reason,
            },
            (None, ToolError::InvalidInput(message) | ToolError::Failed(message))
                if message.len() > self.limits.max_output_bytes() =>
            {
                self.too_large(OutputKind::Result, Some(message.len()))
            }
            (None, ToolError::InvalidInput(message)) => {
                ToolCallError::InvalidInput { tool, message }
            }
            (None, ToolError::Failed(message)) => {
                if error::reports_denial(&message) {
                    warn!(target: "warren::denial", profile = %self.profile, plugin = self.plugin, "plugin reported a denial: {message}");
                }
                ToolCallError::Failed { tool, message }
            }
        }
    }

    /// An offline call used the network `interface`, which is not linked.
    fn network_denied(&self, interface: &str) -> ToolCallError {
        warn!(target: "warren::denial", profile = %self.profile, plugin = self.plugin, "denied {interface}: the profile grants no network");
        ToolCallError::Denied {
            tool: self.tool.to_string(),
            profile: self.profile.to_string(),
            request: format!("network access ({interface})"),
            capability: "capabilities.net".into(),
            reason: "the profile grants no network, so the plugin's network imports are not linked; add the hosts it needs to `net`".into(),
        }
    }

    /// A crash: the trap's own message (the wasm backtrace of an unnamed guest only
    /// adds noise for the model), with the end of stderr.
    fn crash(&self, error: wasmtime::Error) -> ToolCallError {
        let error = match error.downcast_ref::<Trap>() {
            // Not a limit a profile sets: the engine's, the same for every call.
            Some(Trap::StackOverflow) => format!(
                "{} (the sandbox's stack limit: recursion too deep for the guest's stack)",
                Trap::StackOverflow
            ),
            Some(trap) => trap.to_string(),
            None => format!("{:#}", anyhow::Error::from(error)),
        };
        let stderr = self.stderr.contents();
        let tail =
            &stderr[stderr.floor_char_boundary(stderr.len().saturating_sub(STDERR_TAIL_BYTES))..];
        let message = if tail.trim().is_empty() {
            error
        } else {
            format!("{error}; stderr: {}", tail.trim())
        };
        ToolCallError::Trap {
            tool: self.tool.to_string(),
            plugin: self.plugin.to_string(),
            message,
        }
    }

    /// The disk budget the call passed, as an error.
    fn disk_limit(&self) -> Option<ToolCallError> {
        let limits = self.limits;
        self.disk.map(|hit| {
            let (what, key, mib, note) = match hit {
                DiskLimit::Write => (
                    "of file writes per call",
                    "max_write_mb",
                    limits.max_write_mb,
                    "the write that crossed it was refused; what the plugin wrote before is left as written",
                ),
                DiskLimit::Scratch => (
                    "in the scratch directory",
                    "scratch_mb",
                    limits.scratch_mb,
                    "the file whose write crossed it was removed",
                ),
            };
            self.limit(what, key, mib, " MiB", Some(note.into()))
        })
    }

    /// stdout or stderr passed the output cap.
    fn overflow(&self) -> Option<ToolCallError> {
        if self.stdout.overflowed() {
            Some(self.too_large(OutputKind::Stdout, None))
        } else if self.stderr.overflowed() {
            Some(self.too_large(OutputKind::Stderr, None))
        } else {
            None
        }
    }

    fn too_large(&self, kind: OutputKind, size: Option<usize>) -> ToolCallError {
        ToolCallError::OutputTooLarge {
            tool: self.tool.to_string(),
            profile: self.profile.to_string(),
            kind,
            limit_kb: self.limits.max_output_kb,
            size,
        }
    }

    fn timeout(&self) -> ToolCallError {
        ToolCallError::Timeout {
            tool: self.tool.to_string(),
            profile: self.profile.to_string(),
            limit_ms: self.limits.tool_timeout_ms,
        }
    }

    fn limit(
        &self,
        what: &'static str,
        key: &'static str,
        limit: u64,
        unit: &'static str,
        note: Option<String>,
    ) -> ToolCallError {
        ToolCallError::ResourceLimit {
            tool: self.tool.to_string(),
            profile: self.profile.to_string(),
            what,
            key,
            limit,
            unit,
            note,
        }
    }
}

/// Whether some cause in `error`'s chain is an `E` for which `is` holds.
fn caused_by<E>(error: &wasmtime::Error, is: impl Fn(&E) -> bool) -> bool
where
    E: std::error::Error + Send + Sync + 'static,
{
    error
        .chain()
        .any(|cause| cause.downcast_ref::<E>().is_some_and(&is))
}
