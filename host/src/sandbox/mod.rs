//! The sandbox: one wasmtime [`Engine`] and [`Linker`] shared by every plugin, and a
//! fresh [`Store`] per tool call whose WASI context, fuel, deadline, memory cap and
//! output caps come from the caller's [`CapabilitySet`].
//!
//! Layout: `wasi` (a call's WASI context from its capabilities), [`net`] (the network
//! policy applied, and `wasi:http` hooks), [`limits`] (memory cap, capped pipes),
//! `disk` (file-write and scratch budgets), [`error`] (what a call can fail with),
//! [`figures`] (what a call used: fuel, output bytes).
//! What the capabilities are, as data, is [`crate::policy`].
//!
//! Two linkers: one with `wasi:http` and `wasi:sockets` for profiles granted `net`,
//! and one without them for every other profile, where a plugin's network imports
//! are traps: no network resource (a socket, an HTTP `fields` buffer) can be created
//! at all without a grant.
//!
//! Every call, whatever the component's kind, goes through [`Sandbox::run_call`]: the
//! descriptor share, the fresh store, the deadline and the classification of how the
//! call ended are one code path; a [`GuestCall`] only says how to instantiate and what
//! to call (`warren:plugin/tool.call-tool`, or a typed component's function).

mod bindings;
mod disk;
pub mod error;
pub mod figures;
pub mod limits;
pub mod net;
pub mod phases;
mod wasi;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info_span, warn, Instrument};
use wasmtime::component::{Component, HasSelf, Instance, InstancePre, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

pub use self::bindings::exports::warren::plugin::tool::{ToolError, ToolSpec};
use self::bindings::warren::plugin::host_log;
use self::bindings::PluginIndices;
pub use self::error::{OutputKind, ToolCallError, ToolOutcome};
pub use self::figures::{CallFigures, Measured};
use self::limits::{CappedPipe, MemoryCap};
use self::net::{DenialLog, NetHooks};
use crate::policy::{CapabilitySet, MAX_MEMORY_MB};

/// How often the epoch advances; the granularity of `tool_timeout_ms` and of yielding
/// to other tasks while a guest computes.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Every `host-log` record costs at least this many bytes of `capabilities.max_log_kb`,
/// so a flood of empty records is bounded like a flood of long ones.
pub const LOG_RECORD_MIN_BYTES: usize = 128;

/// Descriptors kept for the host (its sockets, files, the compile cache) whatever the
/// guests hold.
const RESERVED_DESCRIPTORS: u64 = 1024;

/// Calls that may hold their full `max_handles` at once before a further call waits:
/// the per-call cap is cut to the descriptor budget divided by this.
const MIN_PARALLEL_CALLS: u64 = 8;

/// Largest memory one `wasi:http` fields handle may hold (wasmtime's default).
const MAX_FIELD_BYTES: usize = 128 * 1024;

/// Bytes of stderr quoted in a trap report (the end, where a panic message is).
const STDERR_TAIL_BYTES: usize = 2048;

/// How much of a linear memory's dirtied pages stay resident between instances.
const KEEP_RESIDENT_MEMORY: usize = 32 << 20;
/// How much of a table stays resident between instances.
const KEEP_RESIDENT_TABLE: usize = 1 << 20;
/// Idle slots that keep their resident pages (and their module affinity); beyond
/// them, a freed slot's pages go back to the kernel. This bounds what keeping pages
/// resident costs in memory: a burst of 100 parallel calls leaves 16 warm slots, not
/// 100 (the subagents bench's peak RSS: 38 MiB with 16, 49 MiB with wasmtime's 100).
const WARM_SLOTS: u32 = 16;

/// Concurrent instance slots of the pooling allocator (also its memory slots).
const POOL_SLOTS: u32 = 256;

/// The guest ran past its wall-time deadline; raised from the epoch callback.
#[derive(Debug, thiserror::Error)]
#[error("tool call deadline exceeded")]
struct DeadlineExceeded;

/// The state of one tool call's [`Store`].
pub struct CallState {
    /// The WASI context built from the capability set.
    wasi: WasiCtx,
    /// wasi:http's per-store context.
    http: WasiHttpCtx,
    /// Resources handed to the guest.
    table: ResourceTable,
    /// Routes outgoing HTTP through the network policy.
    hooks: NetHooks,
    /// Enforces `memory_mb`.
    memory: MemoryCap,
    /// Who is calling, for `host-log` records: profile, plugin.
    who: (String, String),
    /// What is left of `capabilities.max_log_kb`, in bytes.
    log_budget: usize,
    /// Records dropped once the log budget was used up (reported once, after the call).
    log_dropped: u64,
    /// File-write and scratch budgets.
    disk: disk::DiskBudget,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl disk::DiskView for CallState {
    fn disk(&self) -> &disk::DiskBudget {
        &self.disk
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl host_log::Host for CallState {
    fn log(&mut self, level: host_log::Level, message: String) {
        let (profile, plugin) = &self.who;
        let cost = message.len().max(LOG_RECORD_MIN_BYTES);
        if cost > self.log_budget {
            self.log_budget = 0;
            self.log_dropped += 1;
            return;
        }
        self.log_budget -= cost;
        match level {
            host_log::Level::Trace => {
                tracing::trace!(target: "warren::plugin", profile = %profile, plugin = %plugin, "{message}")
            }
            host_log::Level::Debug => {
                tracing::debug!(target: "warren::plugin", profile = %profile, plugin = %plugin, "{message}")
            }
            host_log::Level::Info => {
                tracing::info!(target: "warren::plugin", profile = %profile, plugin = %plugin, "{message}")
            }
            host_log::Level::Warn => {
                tracing::warn!(target: "warren::plugin", profile = %profile, plugin = %plugin, "{message}")
            }
            host_log::Level::Error => {
                tracing::error!(target: "warren::plugin", profile = %profile, plugin = %plugin, "{message}")
            }
        }
    }
}

/// One tool call: what to run and under which capabilities.
#[derive(Clone, Copy, Debug)]
pub struct ToolRequest<'a> {
    /// Tool name, as the plugin lists it.
    pub tool: &'a str,
    /// JSON arguments object.
    pub arguments: &'a str,
    /// The plugin's name (its file), for reports.
    pub plugin: &'a str,
    /// The calling profile, for reports and logs.
    pub profile: &'a str,
    /// What the call may touch.
    pub capabilities: &'a CapabilitySet,
    /// The agent's scratch directory, when the profile grants one.
    pub scratch: Option<&'a Path>,
}

/// A component with its imports resolved twice: with the network interfaces (for
/// profiles granted `net`) and without them (their imports trap).
pub struct Linked {
    /// Linked with `wasi:http` and `wasi:sockets`.
    networked: InstancePre<CallState>,
    /// Linked without them.
    offline: InstancePre<CallState>,
}

impl Linked {
    /// The pre-instance for a call under `caps`.
    pub fn for_caps(&self, caps: &CapabilitySet) -> &InstancePre<CallState> {
        if caps.net.patterns().is_empty() {
            &self.offline
        } else {
            &self.networked
        }
    }
}

/// A `warren:plugin/plugin` component: linked, with its `tool` exports found once.
pub struct Prepared {
    /// The component with its imports resolved.
    linked: Linked,
    /// Where `list-tools` and `call-tool` are, checked against the WIT once.
    indices: PluginIndices,
}

/// What a [`GuestCall`] returns: boxed, because an `impl Future` here trips the
/// compiler's higher-ranked `Send` check in the agent tasks that await it.
pub type GuestFuture<'s> =
    Pin<Box<dyn Future<Output = wasmtime::Result<Result<String, ToolError>>> + Send + 's>>;

/// What one call runs in its fresh instance: the export to call and how to read what
/// it returns. `Ok(Err(_))` is the tool's own error; `Err(_)` a trap or host fault,
/// which [`Sandbox::run_call`] turns into the limit or crash that caused it.
pub trait GuestCall: Send {
    /// Calls the export on `instance`, which lives in `store`.
    fn run<'s>(self, store: &'s mut Store<CallState>, instance: Instance) -> GuestFuture<'s>
    where
        Self: 's;
}

/// `warren:plugin/tool.call-tool(name, arguments)`.
struct CallTool<'a> {
    /// Where `call-tool` is.
    indices: &'a PluginIndices,
    /// The tool name, as the plugin listed it.
    tool: &'a str,
    /// The JSON arguments object.
    arguments: &'a str,
}

impl GuestCall for CallTool<'_> {
    fn run<'s>(self, store: &'s mut Store<CallState>, instance: Instance) -> GuestFuture<'s>
    where
        Self: 's,
    {
        Box::pin(async move {
            let plugin = self.indices.load(&mut *store, &instance)?;
            plugin
                .warren_plugin_tool()
                .call_call_tool(store, self.tool, self.arguments)
                .await
        })
    }
}

/// Shared wasmtime state: the engine (with its epoch ticker) and the linkers.
pub struct Sandbox {
    /// Compiles and runs every plugin; fuel and epoch interruption are on.
    engine: Engine,
    /// WASI p2, wasi:http and host-log, for profiles granted `net`.
    linker: Linker<CallState>,
    /// WASI p2 without sockets, and host-log: for every other profile.
    offline_linker: Linker<CallState>,
    /// Host descriptors guests may hold at once (the process limit less
    /// [`RESERVED_DESCRIPTORS`]); a call reserves its `max_handles` before it starts.
    descriptors: Arc<tokio::sync::Semaphore>,
    /// The most handles one call may hold, from the descriptor budget.
    max_call_handles: u64,
    /// Whether the pooling allocator is in use (it falls back when the machine
    /// refuses the address-space reservation).
    pooling: bool,
    /// Whether pooled slots are reset in place (no swap; see [`reset_in_place`]).
    resets_in_place: bool,
    /// Tells the epoch ticker thread to stop.
    ticker_stop: Arc<AtomicBool>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl Sandbox {
    /// Creates the engine (pooling allocator when possible), the linker and the
    /// 10 ms epoch ticker.
    pub fn new() -> anyhow::Result<Self> {
        let in_place = reset_in_place();
        let (engine, pooling) = match Engine::new(&engine_config(Some(in_place))) {
            Ok(engine) => (engine, true),
            Err(error) => {
                warn!(
                    "pooling allocator unavailable ({error}); falling back to on-demand allocation"
                );
                (Engine::new(&engine_config(None))?, false)
            }
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        host_log::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        disk::add_to_linker(&mut linker)?;
        let mut offline_linker = Linker::new(&engine);
        add_offline_wasi(&mut offline_linker)?;
        host_log::add_to_linker::<CallState, HasSelf<CallState>>(&mut offline_linker, |state| {
            state
        })?;
        disk::add_to_linker(&mut offline_linker)?;
        let descriptor_budget = raise_descriptor_limit()
            .saturating_sub(RESERVED_DESCRIPTORS)
            .max(256);
        let max_call_handles = (descriptor_budget / MIN_PARALLEL_CALLS).max(32);

        let ticker_stop = Arc::new(AtomicBool::new(false));
        let (ticking, stop) = (engine.clone(), ticker_stop.clone());
        std::thread::Builder::new()
            .name("warren-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticking.increment_epoch();
                }
            })?;
        Ok(Sandbox {
            engine,
            linker,
            offline_linker,
            descriptors: Arc::new(tokio::sync::Semaphore::new(
                usize::try_from(descriptor_budget)
                    .unwrap_or(usize::MAX)
                    .min(tokio::sync::Semaphore::MAX_PERMITS),
            )),
            max_call_handles,
            pooling,
            resets_in_place: pooling && in_place,
            ticker_stop,
        })
    }

    /// The engine, for compiling components.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether the pooling allocator is in use.
    pub fn uses_pooling(&self) -> bool {
        self.pooling
    }

    /// Whether pooled slots are reset in place between instances (only where no swap
    /// is active) rather than given back to the kernel.
    pub fn resets_in_place(&self) -> bool {
        self.resets_in_place
    }

    /// Resolves a component's imports once per linker, so each call only
    /// instantiates. Any component whose imports warren provides links.
    pub fn link(&self, component: &Component) -> anyhow::Result<Linked> {
        let networked = self.linker.instantiate_pre(component)?;
        let mut offline = self.offline_linker.clone();
        stub_network_imports(&mut offline, component, &self.engine)?;
        let offline = offline.instantiate_pre(component)?;
        Ok(Linked { networked, offline })
    }

    /// Links a `warren:plugin/plugin` component and finds its `tool` exports.
    pub fn prepare(&self, component: &Component) -> anyhow::Result<Prepared> {
        let linked = self.link(component)?;
        let indices = PluginIndices::new(&linked.networked)?;
        Ok(Prepared { linked, indices })
    }

    /// The most handles one call may hold: `max_handles`, cut to the share of the
    /// process's descriptors that keeps [`MIN_PARALLEL_CALLS`] calls running.
    pub fn call_handles(&self, caps: &CapabilitySet) -> u64 {
        caps.limits.max_handles.min(self.max_call_handles)
    }

    /// Asks a plugin for its tools, in a sandbox with no capabilities.
    pub async fn list_tools(&self, pre: &Prepared, plugin: &str) -> anyhow::Result<Vec<ToolSpec>> {
        let caps = CapabilitySet::default();
        let indices = &pre.indices;
        let pre = pre.linked.for_caps(&caps);
        let (mut store, _, _) = self.store(&caps, None, "(loading)", plugin)?;
        let deadline = Instant::now() + caps.limits.tool_timeout();
        let run = async {
            let instance = pre.instantiate_async(&mut store).await?;
            indices
                .load(&mut store, &instance)?
                .warren_plugin_tool()
                .call_list_tools(&mut store)
                .await
        };
        match tokio::time::timeout_at(deadline.into(), run).await {
            Ok(Ok(specs)) => Ok(specs),
            Ok(Err(error)) => {
                Err(anyhow::Error::from(error).context(format!("{plugin}: list-tools failed")))
            }
            Err(_) => anyhow::bail!(
                "{plugin}: list-tools did not return within {} ms",
                caps.limits.tool_timeout_ms
            ),
        }
    }

    /// Runs one `warren:plugin` tool call in a fresh store under
    /// `request.capabilities`; its result comes with what it used.
    pub async fn call(&self, pre: &Prepared, request: ToolRequest<'_>) -> Measured {
        self.call_as(pre, request.tool, request).await
    }

    /// [`Sandbox::call`] of a tool the plugin lists as `listed` and the model knows
    /// as `request.tool` (renamed by `[plugins.NAME]`): reports use the model's name.
    pub async fn call_as(
        &self,
        pre: &Prepared,
        listed: &str,
        request: ToolRequest<'_>,
    ) -> Measured {
        let call = CallTool {
            indices: &pre.indices,
            tool: listed,
            arguments: request.arguments,
        };
        self.run_call(&pre.linked, request, call).await
    }

    /// Runs `call` on `linked` in a fresh store under `request.capabilities`: the one
    /// path every tool call takes, whatever the component's kind. The result comes
    /// with the fuel the guest burned (measured whether or not the call succeeded:
    /// a call that ran out burned all of it) and the size of what it returned.
    pub async fn run_call(
        &self,
        linked: &Linked,
        request: ToolRequest<'_>,
        call: impl GuestCall,
    ) -> Measured {
        let span = info_span!(
            "sandbox.call",
            tool = request.tool,
            plugin = request.plugin,
            profile = request.profile
        );
        self.call_inner(linked, request, call)
            .instrument(span)
            .await
    }

    async fn call_inner(
        &self,
        linked: &Linked,
        request: ToolRequest<'_>,
        call: impl GuestCall,
    ) -> Measured {
        let caps = request.capabilities;
        let limits = &caps.limits;
        let pre = linked.for_caps(caps);
        let tool = request.tool.to_string();
        // The call's share of the process's descriptors, held until it ends: however
        // many it opens, the others keep theirs.
        let handles = self.call_handles(caps);
        let share = u32::try_from(handles + caps.fs.len() as u64 + 8).unwrap_or(u32::MAX);
        let _descriptors = match self.descriptors.clone().acquire_many_owned(share).await {
            Ok(permit) => permit,
            Err(e) => {
                return Measured::refused(ToolCallError::Host {
                    tool,
                    source: e.into(),
                })
            }
        };
        let started = Instant::now();
        let (mut store, stdout, stderr) =
            match self.store(caps, request.scratch, request.profile, request.plugin) {
                Ok(made) => made,
                Err(source) => return Measured::refused(ToolCallError::Host { tool, source }),
            };
        let denials = store.data().hooks.denials.clone();
        let store_built = Instant::now();
        let deadline = store_built + limits.tool_timeout();
        let mut instantiated = None;
        let run = async {
            let instance = pre.instantiate_async(&mut store).await?;
            instantiated = Some(Instant::now());
            call.run(&mut store, instance).await
        };
        let outcome = tokio::time::timeout_at(deadline.into(), run).await;
        let called = Instant::now();

        let profile = request.profile.to_string();
        debug!(stdout = %stdout.contents(), stderr = %stderr.contents(), "guest output");
        let too_large = |kind: OutputKind, size: Option<usize>| ToolCallError::OutputTooLarge {
            tool: tool.clone(),
            profile: profile.clone(),
            kind,
            limit_kb: limits.max_output_kb,
            size,
        };
        let overflow = if stdout.overflowed() {
            Some(too_large(OutputKind::Stdout, None))
        } else if stderr.overflowed() {
            Some(too_large(OutputKind::Stderr, None))
        } else {
            None
        };
        let timeout = || ToolCallError::Timeout {
            tool: tool.clone(),
            profile: profile.clone(),
            limit_ms: limits.tool_timeout_ms,
        };
        let limit = |what, key, limit, unit, note| ToolCallError::ResourceLimit {
            tool: tool.clone(),
            profile: profile.clone(),
            what,
            key,
            limit,
            unit,
            note,
        };
        let disk_limit = store.data().disk.exceeded().map(|hit| match hit {
            disk::DiskLimit::Write => limit(
                "of file writes per call",
                "max_write_mb",
                limits.max_write_mb,
                " MiB",
                Some("the write that crossed it was refused; what the plugin wrote before is left as written".into()),
            ),
            disk::DiskLimit::Scratch => limit(
                "in the scratch directory",
                "scratch_mb",
                limits.scratch_mb,
                " MiB",
                Some("the file whose write crossed it was removed".into()),
            ),
        });
        if let (Some(disk::DiskLimit::Scratch), Some(dir)) =
            (store.data().disk.exceeded(), request.scratch)
        {
            store.data().disk.remove_partial(dir);
        }
        let dropped = store.data().log_dropped;
        if dropped > 0 {
            warn!(profile = %profile, plugin = request.plugin, "{dropped} log records dropped: the plugin passed capabilities.max_log_kb = {} (each record costs at least {LOG_RECORD_MIN_BYTES} bytes)", limits.max_log_kb);
        }
        let result = match outcome {
            _ if disk_limit.is_some() => Err(disk_limit.expect("checked")),
            Err(_elapsed) => Err(timeout()),
            Ok(Err(error)) => Err(if error.downcast_ref::<DeadlineExceeded>().is_some() {
                timeout()
            } else if error.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
                ToolCallError::OutOfFuel {
                    tool: tool.clone(),
                    profile: profile.clone(),
                    fuel: limits.fuel,
                }
            } else if store.data().memory.refused() {
                ToolCallError::MemoryLimit {
                    tool: tool.clone(),
                    profile: profile.clone(),
                    limit_mb: limits.memory_mb,
                }
            } else if let Some(overflow) = overflow {
                overflow
            } else if format!("{error:#}").contains(HOSTCALL_FUEL_EXHAUSTED) {
                too_large(OutputKind::Result, None)
            } else if table_full(&error) {
                limit(
                    "open handles (files, directories, streams, sockets, HTTP fields)",
                    "max_handles",
                    handles,
                    "",
                    None,
                )
            } else if format!("{error:#}").contains("total size of fields exceeds limit") {
                limit(
                    "for host-held HTTP header fields (each handle holds at most memory_mb / max_handles)",
                    "memory_mb",
                    limits.memory_mb,
                    " MiB",
                    None,
                )
            } else if let Some(interface) = unlinked_network_import(&error) {
                warn!(target: "warren::denial", profile = %profile, plugin = request.plugin, "denied {interface}: the profile grants no network");
                ToolCallError::Denied {
                    tool: tool.clone(),
                    profile: profile.clone(),
                    request: format!("network access ({interface})"),
                    capability: "capabilities.net".into(),
                    reason: "the profile grants no network, so the plugin's network imports are not linked; add the hosts it needs to `net`".into(),
                }
            } else {
                // A trap's own message says what happened; the wasm backtrace of an
                // unnamed guest only adds noise for the model.
                let error = match error.downcast_ref::<Trap>() {
                    Some(trap) => trap.to_string(),
                    None => format!("{:#}", anyhow::Error::from(error)),
                };
                let stderr = stderr.contents();
                let tail = &stderr
                    [stderr.floor_char_boundary(stderr.len().saturating_sub(STDERR_TAIL_BYTES))..];
                let message = if tail.trim().is_empty() {
                    error
                } else {
                    format!("{error}; stderr: {}", tail.trim())
                };
                ToolCallError::Trap {
                    tool: tool.clone(),
                    plugin: request.plugin.to_string(),
                    message,
                }
            }),
            Ok(Ok(_)) if overflow.is_some() => Err(overflow.expect("checked")),
            Ok(Ok(Ok(output))) if output.len() > limits.max_output_bytes() => {
                Err(too_large(OutputKind::Result, Some(output.len())))
            }
            Ok(Ok(Ok(output))) => Ok(output),
            Ok(Ok(Err(tool_error))) => {
                Err(match (denials.entries().into_iter().next(), tool_error) {
                    (Some(denial), _) => ToolCallError::Denied {
                        tool: tool.clone(),
                        profile: profile.clone(),
                        request: denial.request,
                        capability: denial.capability.to_string(),
                        reason: denial.reason,
                    },
                    (None, ToolError::InvalidInput(message) | ToolError::Failed(message))
                        if message.len() > limits.max_output_bytes() =>
                    {
                        too_large(OutputKind::Result, Some(message.len()))
                    }
                    (None, ToolError::InvalidInput(message)) => ToolCallError::InvalidInput {
                        tool: tool.clone(),
                        message,
                    },
                    (None, ToolError::Failed(message)) => {
                        if error::reports_denial(&message) {
                            warn!(target: "warren::denial", profile = %profile, plugin = request.plugin, "plugin reported a denial: {message}");
                        }
                        ToolCallError::Failed {
                            tool: tool.clone(),
                            message,
                        }
                    }
                })
            }
        };
        // What is left of the fuel the store was given; none when it ran out.
        let fuel_used = store
            .get_fuel()
            .ok()
            .map(|left| limits.fuel.saturating_sub(left));
        drop(store);
        if let Some(instantiated) = instantiated {
            phases::PHASES.record([started, store_built, instantiated, called, Instant::now()]);
        }
        if let Err(error) = &result {
            tracing::info!(kind = error.kind().as_str(), "tool call failed: {error}");
        }
        Measured::new(result, fuel_used)
    }

    /// A fresh store for one call, with fuel, epoch deadline and memory cap set
    /// before anything is instantiated.
    fn store(
        &self,
        caps: &CapabilitySet,
        scratch: Option<&Path>,
        profile: &str,
        plugin: &str,
    ) -> anyhow::Result<(Store<CallState>, CappedPipe, CappedPipe)> {
        let limits = &caps.limits;
        let stdout = CappedPipe::new(limits.max_output_bytes());
        let stderr = CappedPipe::new(limits.max_output_bytes());
        let denials = DenialLog::new(profile, plugin);
        let wasi = wasi::wasi_ctx(caps, scratch, &stdout, &stderr, &denials)?;
        let handles = self.call_handles(caps);
        let mut table = ResourceTable::new();
        table.set_max_capacity(usize::try_from(handles).unwrap_or(usize::MAX));
        // Host memory held through `fields` handles: at most `handles` of them, each
        // at most memory_mb / handles, so together at most `memory_mb`.
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(
            (limits.memory_bytes() / usize::try_from(handles).unwrap_or(1).max(1))
                .clamp(1024, MAX_FIELD_BYTES),
        );
        let scratch_budget = scratch
            .filter(|_| caps.scratch)
            .map(|dir| (dir.to_path_buf(), limits.scratch_bytes()));
        let state = CallState {
            wasi,
            http,
            table,
            hooks: NetHooks {
                policy: caps.net.clone(),
                denials,
            },
            memory: MemoryCap::new(limits.memory_bytes()),
            who: (profile.to_string(), plugin.to_string()),
            log_budget: limits.max_log_bytes(),
            log_dropped: 0,
            disk: disk::DiskBudget::new(limits.max_write_bytes(), scratch_budget),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.memory);
        store.set_fuel(limits.fuel)?;
        let deadline = Instant::now() + limits.tool_timeout();
        store.set_epoch_deadline(1);
        // Yield to the executor every tick, so a computing guest never starves other
        // tasks, and trap once the wall-time limit has passed.
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline {
                Err(wasmtime::Error::new(DeadlineExceeded))
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        Ok((store, stdout, stderr))
    }
}

/// Whether a call failed because its resource table was full (`max_handles`).
fn table_full(error: &wasmtime::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<wasmtime::component::ResourceTableError>(),
            Some(wasmtime::component::ResourceTableError::Full)
        )
    })
}

/// What wasmtime fails a call with when the guest hands the host more data in one go
/// than the store's hostcall fuel allows (for a typed component: a result too large
/// for the output cap; see `plugin::typed`).
const HOSTCALL_FUEL_EXHAUSTED: &str =
    "too much data is being copied between the host and the guest";

/// What a network function of an offline call traps with.
const NOT_LINKED: &str = "not linked without a net grant: `";

/// Defines every `wasi:http` and `wasi:sockets` function `component` imports as a
/// trap, and the resources those interfaces own as empty host types, so a plugin that
/// imports the network still instantiates under a profile without `net` but can
/// create nothing. (wasmtime's `define_unknown_imports_as_traps` would also stub the
/// `wasi:io` types the network interfaces `use`, which then no longer match.)
fn stub_network_imports(
    linker: &mut Linker<CallState>,
    component: &Component,
    engine: &Engine,
) -> anyhow::Result<()> {
    use wasmtime::component::types::ComponentItem;
    use wasmtime::component::ResourceType;
    let mut seen: Vec<ResourceType> = Vec::new();
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        let network = name.starts_with("wasi:http/") || name.starts_with("wasi:sockets/");
        let mut resources = Vec::new();
        let mut functions = Vec::new();
        for (export, item) in instance.exports(engine) {
            match item.ty {
                // A resource first seen here is this interface's own; later sightings
                // are `use`s of it, which the linker resolves by itself.
                ComponentItem::Resource(resource) if !seen.contains(&resource) => {
                    seen.push(resource);
                    resources.push(export.to_string());
                }
                ComponentItem::ComponentFunc(_) => functions.push(export.to_string()),
                _ => {}
            }
        }
        if !network {
            continue;
        }
        let mut stubs = linker.instance(name)?;
        for resource in resources {
            stubs.resource(&resource, ResourceType::host::<()>(), |_, _| Ok(()))?;
        }
        for function in functions {
            let qualified = format!("{name}#{function}");
            stubs.func_new(&function, move |_, _, _, _| {
                Err(wasmtime::Error::msg(format!("{NOT_LINKED}{qualified}`")))
            })?;
        }
    }
    Ok(())
}

/// The network interface an offline call tried to use, when that is why it trapped.
fn unlinked_network_import(error: &wasmtime::Error) -> Option<String> {
    let message = format!("{error:#}");
    let start = message.find(NOT_LINKED)? + NOT_LINKED.len();
    let name = &message[start..];
    let name = &name[..name.find('`')?];
    Some(name.split('#').next().unwrap_or(name).to_string())
}

/// Raises the soft limit on open descriptors to the hard limit (so guests' files
/// cannot starve the host early) and returns it.
fn raise_descriptor_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let current = getrlimit(Resource::Nofile);
    let hard = current.maximum.unwrap_or(1 << 20).min(1 << 20);
    if current.current.is_some_and(|soft| soft < hard) {
        let raised = Rlimit {
            current: Some(hard),
            maximum: current.maximum,
        };
        if let Err(error) = setrlimit(Resource::Nofile, raised) {
            warn!("cannot raise the open-file limit to {hard}: {error}");
            return current.current.unwrap_or(1024);
        }
    }
    current.current.map_or(hard, |soft| soft.max(hard))
}

/// WASI p2 without `wasi:sockets`: io, clocks, filesystem, random and cli, for
/// profiles with no `net` grant.
fn add_offline_wasi(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView as _};
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random};
    use wasmtime_wasi::random::WasiRandom;
    use wasmtime_wasi_io::bindings::wasi::io;

    /// The resource table, for `wasi:io`.
    struct HasIo;
    impl wasmtime::component::HasData for HasIo {
        type Data<'a> = &'a mut ResourceTable;
    }

    let l = linker;
    io::error::add_to_linker::<CallState, HasIo>(l, |t| &mut t.table)?;
    io::poll::add_to_linker::<CallState, HasIo>(l, |t| &mut t.table)?;
    io::streams::add_to_linker::<CallState, HasIo>(l, |t| &mut t.table)?;
    clocks::wall_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
    filesystem::preopens::add_to_linker::<CallState, WasiFilesystem>(l, CallState::filesystem)?;
    filesystem::types::add_to_linker::<CallState, WasiFilesystem>(l, CallState::filesystem)?;
    random::random::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    random::insecure::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    random::insecure_seed::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    cli::exit::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::environment::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_input::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_output::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    Ok(())
}

/// Whether pooled memories and tables may be reset in place (dirty pages copied back,
/// found with PAGEMAP_SCAN) rather than given back to the kernel. Only where no swap
/// is active: the scan reports dirty pages that are present, so a page the kernel
/// swapped out would be neither reset nor given back, and the next instance in the
/// slot would read what the last one wrote (wasmtime 48; see
/// bytecodealliance/wasmtime#14357). Swap turned on after the engine is made is not
/// seen; docs/security.md says so.
fn reset_in_place() -> bool {
    let swaps = std::fs::read_to_string("/proc/swaps");
    let in_place = swaps.as_deref().is_ok_and(|swaps| !swap_active(swaps));
    if !in_place {
        tracing::info!(
            "swap is active (or /proc/swaps unreadable): pooled memories are reset by \
             giving their pages back to the kernel, not in place"
        );
    }
    in_place
}

/// Whether `/proc/swaps` lists a swap area (any line after its header).
fn swap_active(swaps: &str) -> bool {
    swaps.lines().skip(1).any(|line| !line.trim().is_empty())
}

/// The engine's configuration: with the pooling allocator when `pooling` is given,
/// its slots reset in place when it holds `true`.
fn engine_config(pooling: Option<bool>) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true);
    if let Some(in_place) = pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_SLOTS)
            .total_core_instances(POOL_SLOTS * 4)
            .total_memories(POOL_SLOTS * 2)
            .total_tables(POOL_SLOTS * 4)
            .total_stacks(POOL_SLOTS)
            .max_memories_per_component(8)
            .max_tables_per_component(16)
            .max_core_instances_per_component(64)
            .max_memory_size((MAX_MEMORY_MB << 20) as usize)
            .table_elements(100_000)
            .max_component_instance_size(1 << 20)
            .max_core_instance_size(1 << 20)
            .max_unused_warm_slots(WARM_SLOTS);
        if in_place {
            // A slot's memory is reset for its next instance by copying back only the
            // pages the last one dirtied (found with Linux's PAGEMAP_SCAN, 6.7+), which
            // stay resident: the next instance takes no page faults on them and the
            // slot needs no madvise. Up to this much per memory; where the kernel
            // lacks the ioctl, wasmtime falls back to madvise.
            pool.linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
                .table_keep_resident(KEEP_RESIDENT_TABLE)
                .pagemap_scan(wasmtime::Enabled::Auto);
        }
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

#[cfg(test)]
mod tests {
    use super::swap_active;

    /// A swap area listed in `/proc/swaps` turns the in-place reset off; the header
    /// alone (no swap) leaves it on.
    #[test]
    fn any_listed_swap_area_counts_as_swap() {
        let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        assert!(!swap_active(header));
        assert!(!swap_active(""));
        assert!(swap_active(&format!(
            "{header}/swapfile                               file\t\t2097148\t\t0\t\t-2\n"
        )));
        assert!(swap_active(&format!(
            "{header}/dev/zram0                              partition\t8388604\t\t1024\t\t100\n"
        )));
    }
}
