//! The sandbox: one wasmtime [`Engine`] and [`Linker`] shared by every plugin, and a
//! fresh [`Store`] per tool call whose WASI context, fuel, deadline, memory cap and
//! output caps come from the caller's [`CapabilitySet`].
//!
//! Layout: [`capabilities`] (the validated set and its WASI context), [`net`] (the
//! network policy and `wasi:http` hooks), [`limits`] (memory cap, capped pipes),
//! [`error`] (what a call can fail with).

mod bindings;
pub mod capabilities;
pub mod error;
pub mod limits;
pub mod net;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info_span, warn, Instrument};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use self::bindings::exports::warren::plugin::tool::ToolError;
pub use self::bindings::exports::warren::plugin::tool::ToolSpec;
use self::bindings::warren::plugin::host_log;
pub use self::bindings::PluginPre;
pub use self::capabilities::CapabilitySet;
pub use self::error::{OutputKind, ToolCallError};
use self::limits::{CappedPipe, MemoryCap};
use self::net::{DenialLog, NetHooks};

/// How often the epoch advances; the granularity of `tool_timeout_ms` and of yielding
/// to other tasks while a guest computes.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Bytes of `host-log` records a guest may emit per call; later records are dropped.
const LOG_BUDGET_BYTES: usize = 64 * 1024;

/// Bytes of stderr quoted in a trap report (the end, where a panic message is).
const STDERR_TAIL_BYTES: usize = 2048;

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
    /// What is left of [`LOG_BUDGET_BYTES`].
    log_budget: usize,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
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
        if message.len() > self.log_budget {
            if self.log_budget > 0 {
                warn!(profile = %profile, plugin = %plugin, "plugin log budget of {LOG_BUDGET_BYTES} bytes per call used up; dropping further records");
                self.log_budget = 0;
            }
            return;
        }
        self.log_budget -= message.len();
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

/// Shared wasmtime state: the engine (with its epoch ticker) and the linker.
pub struct Sandbox {
    /// Compiles and runs every plugin; fuel and epoch interruption are on.
    engine: Engine,
    /// WASI p2, wasi:http and host-log, shared by every instantiation.
    linker: Linker<CallState>,
    /// Whether the pooling allocator is in use (it falls back when the machine
    /// refuses the address-space reservation).
    pooling: bool,
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
        let (engine, pooling) = match Engine::new(&engine_config(true)) {
            Ok(engine) => (engine, true),
            Err(error) => {
                warn!(
                    "pooling allocator unavailable ({error}); falling back to on-demand allocation"
                );
                (Engine::new(&engine_config(false))?, false)
            }
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        host_log::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;

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
            pooling,
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

    /// Resolves a component's imports once, so each call only instantiates.
    pub fn prepare(&self, component: &Component) -> anyhow::Result<PluginPre<CallState>> {
        let pre = self.linker.instantiate_pre(component)?;
        Ok(PluginPre::new(pre)?)
    }

    /// Asks a plugin for its tools, in a sandbox with no capabilities.
    pub async fn list_tools(
        &self,
        pre: &PluginPre<CallState>,
        plugin: &str,
    ) -> anyhow::Result<Vec<ToolSpec>> {
        let caps = CapabilitySet::default();
        let (mut store, _, _) = self.store(&caps, None, "(loading)", plugin)?;
        let deadline = Instant::now() + caps.tool_timeout();
        let run = async {
            let instance = pre.instantiate_async(&mut store).await?;
            instance
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
                caps.tool_timeout_ms
            ),
        }
    }

    /// Runs one tool call in a fresh store under `request.capabilities`.
    pub async fn call(
        &self,
        pre: &PluginPre<CallState>,
        request: ToolRequest<'_>,
    ) -> Result<String, ToolCallError> {
        let span = info_span!(
            "sandbox.call",
            tool = request.tool,
            plugin = request.plugin,
            profile = request.profile
        );
        self.call_inner(pre, request).instrument(span).await
    }

    async fn call_inner(
        &self,
        pre: &PluginPre<CallState>,
        request: ToolRequest<'_>,
    ) -> Result<String, ToolCallError> {
        let caps = request.capabilities;
        let tool = request.tool.to_string();
        let (mut store, stdout, stderr) = self
            .store(caps, request.scratch, request.profile, request.plugin)
            .map_err(|source| ToolCallError::Host {
                tool: tool.clone(),
                source,
            })?;
        let denials = store.data().hooks.denials.clone();
        let deadline = Instant::now() + caps.tool_timeout();
        let run = async {
            let instance = pre.instantiate_async(&mut store).await?;
            instance
                .warren_plugin_tool()
                .call_call_tool(&mut store, request.tool, request.arguments)
                .await
        };
        let outcome = tokio::time::timeout_at(deadline.into(), run).await;

        let profile = request.profile.to_string();
        debug!(stdout = %stdout.contents(), stderr = %stderr.contents(), "guest output");
        let too_large = |kind: OutputKind, size: Option<usize>| ToolCallError::OutputTooLarge {
            tool: tool.clone(),
            profile: profile.clone(),
            kind,
            limit_kb: caps.max_output_kb,
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
            limit_ms: caps.tool_timeout_ms,
        };
        let result = match outcome {
            Err(_elapsed) => Err(timeout()),
            Ok(Err(error)) => Err(if error.downcast_ref::<DeadlineExceeded>().is_some() {
                timeout()
            } else if error.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
                ToolCallError::OutOfFuel {
                    tool: tool.clone(),
                    profile: profile.clone(),
                    fuel: caps.fuel,
                }
            } else if store.data().memory.refused() {
                ToolCallError::MemoryLimit {
                    tool: tool.clone(),
                    profile: profile.clone(),
                    limit_mb: caps.memory_mb,
                }
            } else if let Some(overflow) = overflow {
                overflow
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
            Ok(Ok(Ok(output))) if output.len() > caps.max_output_bytes() => {
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
                        if message.len() > caps.max_output_bytes() =>
                    {
                        too_large(OutputKind::Result, Some(message.len()))
                    }
                    (None, ToolError::InvalidInput(message)) => ToolCallError::InvalidInput {
                        tool: tool.clone(),
                        message,
                    },
                    (None, ToolError::Failed(message)) => {
                        if message.starts_with("denied") {
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
        if let Err(error) = &result {
            tracing::info!(kind = error.kind(), "tool call failed: {error}");
        }
        result
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
        let stdout = CappedPipe::new(caps.max_output_bytes());
        let stderr = CappedPipe::new(caps.max_output_bytes());
        let denials = DenialLog::new(profile, plugin);
        let wasi = caps.wasi_ctx(scratch, &stdout, &stderr, &denials)?;
        let state = CallState {
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            hooks: NetHooks {
                policy: caps.net.clone(),
                denials,
            },
            memory: MemoryCap::new(caps.memory_bytes()),
            who: (profile.to_string(), plugin.to_string()),
            log_budget: LOG_BUDGET_BYTES,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.memory);
        store.set_fuel(caps.fuel)?;
        let deadline = Instant::now() + caps.tool_timeout();
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

fn engine_config(pooling: bool) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_SLOTS)
            .total_core_instances(POOL_SLOTS * 4)
            .total_memories(POOL_SLOTS * 2)
            .total_tables(POOL_SLOTS * 4)
            .total_stacks(POOL_SLOTS)
            .max_memories_per_component(8)
            .max_tables_per_component(16)
            .max_core_instances_per_component(64)
            .max_memory_size((capabilities::MAX_MEMORY_MB << 20) as usize)
            .table_elements(100_000)
            .max_component_instance_size(1 << 20)
            .max_core_instance_size(1 << 20);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}
