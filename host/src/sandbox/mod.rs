//! The sandbox: one wasmtime [`Engine`] and [`Linker`] shared by every plugin, and a
//! fresh [`Store`] per tool call whose WASI context, fuel, deadline, memory cap and
//! output caps come from the caller's [`CapabilitySet`].
//!
//! Layout: `engine` (the engine's configuration, the pooling allocator), `state` (one
//! call's store state), `wasi` (a call's WASI context from its capabilities), [`net`]
//! (the network policy applied, and `wasi:http` hooks), `linking` (the offline
//! linker: WASI without sockets, network imports as traps), [`limits`] (memory cap,
//! capped pipes), `disk` (file-write and scratch budgets), [`error`] (what a call can
//! fail with), `classify` (how a call ended, as one of those errors), [`figures`]
//! (what a call used: fuel, output bytes).
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
mod classify;
mod disk;
mod engine;
pub(crate) mod error;
pub(crate) mod figures;
pub(crate) mod limits;
mod linking;
pub(crate) mod net;
pub(crate) mod phases;
mod ready;
mod resident;
mod state;
mod wasi;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tracing::{debug, info_span, warn, Instrument};
use wasmtime::component::{
    Component, ComponentExportIndex, HasSelf, Instance, InstancePre, Linker,
};
use wasmtime::{Engine, Store};

pub(crate) use self::bindings::exports::warren::plugin::tool::{ToolError, ToolSpec};
use self::bindings::warren::plugin::host_log;
use self::bindings::PluginIndices;
use self::classify::{CallEnd, Outcome};
use self::engine::{engine_config, raise_descriptor_limit, reset_in_place};
pub(crate) use self::error::{ToolCallError, ToolOutcome};
pub(crate) use self::figures::{CallFigures, Measured};
use self::limits::CappedPipe;
use self::linking::{add_offline_wasi, stub_network_imports};
use self::ready::{Caller, Ready, ReadySlot, Refill};
use self::resident::InPlace;
use self::state::{arm_deadline, new_store};
pub(crate) use self::state::{CallState, LOG_RECORD_MIN_BYTES};
use crate::policy::CapabilitySet;

/// How often the epoch advances; the granularity of `tool_timeout_ms` and of yielding
/// to other tasks while a guest computes.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Descriptors kept for the host (its sockets, files, the compile cache) whatever the
/// guests hold.
const RESERVED_DESCRIPTORS: u64 = 1024;

/// Calls that may hold their full `max_handles` at once before a further call waits:
/// the per-call cap is cut to the descriptor budget divided by this.
const MIN_PARALLEL_CALLS: u64 = 8;

/// One tool call: what to run and under which capabilities.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToolRequest<'a> {
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
pub(crate) struct Linked {
    /// Linked with `wasi:http` and `wasi:sockets`.
    networked: InstancePre<CallState>,
    /// Linked without them.
    offline: InstancePre<CallState>,
    /// For a plugin whose instances are made ahead of their calls (see `ready`).
    ready: Option<Arc<ReadySlot>>,
}

impl Linked {
    /// The pre-instance for a call under `caps`.
    pub(crate) fn for_caps(&self, caps: &CapabilitySet) -> &InstancePre<CallState> {
        if caps.net.patterns().is_empty() {
            &self.offline
        } else {
            &self.networked
        }
    }
}

impl Prepared {
    /// This plugin with each caller's next instance made ahead of its call, in the
    /// background, when a call ends (the interpreters: instantiating them is a large
    /// part of a call). Every call still gets an instance of its own.
    pub(crate) fn made_ahead(mut self) -> Prepared {
        self.linked.ready = Some(Arc::default());
        self
    }
}

/// A `warren:plugin/plugin` component: linked, with its `tool` exports found once.
pub(crate) struct Prepared {
    /// The component with its imports resolved.
    linked: Linked,
    /// Where `list-tools` and `call-tool` are, checked against the WIT once.
    indices: PluginIndices,
    /// Where `call-tool` is, for calling it with a result read in place.
    call_tool: ComponentExportIndex,
}

/// What a [`GuestCall`] returns: boxed, because an `impl Future` here trips the
/// compiler's higher-ranked `Send` check in the agent tasks that await it.
pub(crate) type GuestFuture<'s> =
    Pin<Box<dyn Future<Output = wasmtime::Result<Result<String, ToolError>>> + Send + 's>>;

/// What one call runs in its fresh instance: the export to call and how to read what
/// it returns. `Ok(Err(_))` is the tool's own error; `Err(_)` a trap or host fault,
/// which [`Sandbox::run_call`] turns into the limit or crash that caused it.
pub(crate) trait GuestCall: Send {
    /// Calls the export on `instance`, which lives in `store`.
    fn run<'s>(self, store: &'s mut Store<CallState>, instance: Instance) -> GuestFuture<'s>
    where
        Self: 's;
}

/// `warren:plugin/tool.call-tool(name, arguments)`.
struct CallTool<'a> {
    /// Where `call-tool` is.
    call_tool: &'a ComponentExportIndex,
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
            let call = instance
                .get_typed_func::<(&str, &str), (InPlace<Result<String, ToolError>>,)>(
                    &mut *store,
                    self.call_tool,
                )?;
            let (result,) = call
                .call_async(&mut *store, (self.tool, self.arguments))
                .await?;
            store.data_mut().guest_memory = result.memory;
            Ok(result.value)
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
    /// refuses the address-space reservation): the call benches say so.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pooling: bool,
    /// Whether pooled slots are reset in place (no swap; see `engine::reset_in_place`).
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
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// How instances get their memory, in words: from the pooling allocator, whose
    /// slots are reset in place between instances (only where no swap is active) or
    /// given back to the kernel, or on demand where the machine refused the pool's
    /// address-space reservation. Not for embedders: the call benches print it beside
    /// their figures, which depend on it.
    #[cfg(feature = "internals")]
    pub fn memory_slots(&self) -> &'static str {
        match (self.pooling, self.resets_in_place) {
            (true, true) => "memory slots: pooled, reset in place (no swap)",
            (true, false) => {
                "memory slots: pooled, pages given back to the kernel after each call (swap active)"
            }
            (false, _) => "memory slots: allocated on demand (no pooling: the fallback)",
        }
    }

    /// Resolves a component's imports once per linker, so each call only
    /// instantiates. Any component whose imports warren provides links.
    pub(crate) fn link(&self, component: &Component) -> anyhow::Result<Linked> {
        let networked = self.linker.instantiate_pre(component)?;
        let mut offline = self.offline_linker.clone();
        stub_network_imports(&mut offline, component, &self.engine)?;
        let offline = offline.instantiate_pre(component)?;
        Ok(Linked {
            networked,
            offline,
            ready: None,
        })
    }

    /// Links a `warren:plugin/plugin` component and finds its `tool` exports.
    pub(crate) fn prepare(&self, component: &Component) -> anyhow::Result<Prepared> {
        let linked = self.link(component)?;
        let indices = PluginIndices::new(&linked.networked)?;
        let component = linked.networked.component();
        let call_tool = component
            .get_export_index(None, "warren:plugin/tool@0.1.0")
            .and_then(|tool| component.get_export_index(Some(&tool), "call-tool"))
            .context("the component exports no `warren:plugin/tool@0.1.0.call-tool`")?;
        Ok(Prepared {
            linked,
            indices,
            call_tool,
        })
    }

    /// The most handles one call may hold: `max_handles`, cut to the share of the
    /// process's descriptors that keeps [`MIN_PARALLEL_CALLS`] calls running.
    pub(crate) fn call_handles(&self, caps: &CapabilitySet) -> u64 {
        caps.limits.max_handles.min(self.max_call_handles)
    }

    /// Asks a plugin for its tools, in a sandbox with no capabilities.
    pub(crate) async fn list_tools(
        &self,
        pre: &Prepared,
        plugin: &str,
    ) -> anyhow::Result<Vec<ToolSpec>> {
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
    /// `request.capabilities`, its result with what it used: a tool the plugin lists
    /// as `listed` and the model knows as `request.tool` (renamed by
    /// `[plugins.NAME]`): reports use the model's name.
    pub(crate) async fn call_as(
        &self,
        pre: &Prepared,
        listed: &str,
        request: ToolRequest<'_>,
    ) -> Measured {
        let call = CallTool {
            call_tool: &pre.call_tool,
            tool: listed,
            arguments: request.arguments,
        };
        self.run_call(&pre.linked, request, call).await
    }

    /// Runs `call` on `linked` in a fresh store under `request.capabilities`: the one
    /// path every tool call takes, whatever the component's kind. The result comes
    /// with the fuel the guest burned (measured whether or not the call succeeded:
    /// a call that ran out burned all of it) and the size of what it returned.
    pub(crate) async fn run_call(
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
        let tool = request.tool.to_string();
        let started = Instant::now();
        let pre = linked.for_caps(caps);
        let caller = linked
            .ready
            .as_ref()
            .map(|_| Caller::new(caps, request.scratch, request.profile, request.plugin));
        let Ready {
            mut store,
            instance,
            stdout,
            stderr,
            descriptors: _descriptors,
        } = match self.ready_for(linked, &request, caller.as_ref()).await {
            Ok(ready) => ready,
            Err(source) => return Measured::refused(ToolCallError::Host { tool, source }),
        };
        let store_built = Instant::now();
        let (outcome, instantiated) = instantiate_and_call(
            &mut store,
            pre,
            instance,
            call,
            store_built + limits.tool_timeout(),
        )
        .await;
        let called = Instant::now();
        debug!(stdout = %stdout.contents(), stderr = %stderr.contents(), "guest output");
        settle(store.data(), &request);
        let end = CallEnd {
            tool: request.tool,
            profile: request.profile,
            plugin: request.plugin,
            limits,
            handles: self.call_handles(caps),
            stdout: &stdout,
            stderr: &stderr,
            memory_refused: store.data().memory.refused(),
            disk: store.data().disk.exceeded(),
            denials: &store.data().hooks.denials,
        };
        // What is left of the fuel the store was given; none when it ran out.
        let fuel_used = store
            .get_fuel()
            .ok()
            .map(|left| limits.fuel.saturating_sub(left));
        let measured = end
            .classify(outcome, fuel_used)
            .with_memory_peak(store.data().memory.peak_bytes());
        self.recycle(linked, caller, caps, store);
        if let Some(instantiated) = instantiated {
            phases::PHASES.record([started, store_built, instantiated, called, Instant::now()]);
        }
        if let Err(error) = &measured.result {
            tracing::info!(kind = error.kind().as_str(), "tool call failed: {error}");
        }
        measured
    }

    /// The instance made ahead for `caller`, its deadline armed, or else a fresh store.
    async fn ready_for(
        &self,
        linked: &Linked,
        request: &ToolRequest<'_>,
        caller: Option<&Caller>,
    ) -> anyhow::Result<Ready> {
        let ready = linked
            .ready
            .as_ref()
            .zip(caller)
            .and_then(|(slot, caller)| slot.take(caller));
        match ready {
            Some(mut ready) => {
                arm_deadline(&mut ready.store, request.capabilities.limits.tool_timeout());
                Ok(ready)
            }
            None => self.fresh(request).await,
        }
    }

    /// Hands a finished call's store to a refill of the caller's ready slot (which
    /// makes its next instance), or drops it when the plugin has none.
    fn recycle(
        &self,
        linked: &Linked,
        caller: Option<Caller>,
        caps: &CapabilitySet,
        store: Store<CallState>,
    ) {
        match (&linked.ready, caller) {
            (Some(slot), Some(caller)) => Refill {
                slot: slot.clone(),
                engine: self.engine.clone(),
                pre: linked.for_caps(caps).clone(),
                caller,
                handles: self.call_handles(caps),
                descriptors: self.descriptors.clone(),
                share: self.descriptor_share(caps),
                keep_resident: self.resets_in_place,
            }
            .start(store),
            _ => drop(store),
        }
    }

    /// A fresh store for `request`, with its share of the process's descriptors
    /// (held until the call ends: however many it opens, the others keep theirs) and
    /// no instance yet.
    async fn fresh(&self, request: &ToolRequest<'_>) -> anyhow::Result<Ready> {
        let caps = request.capabilities;
        let descriptors = self.reserve_descriptors(caps).await?;
        let (store, stdout, stderr) =
            self.store(caps, request.scratch, request.profile, request.plugin)?;
        Ok(Ready {
            store,
            instance: None,
            stdout,
            stderr,
            descriptors,
        })
    }

    /// The descriptors a call under `caps` may open (its handles, its preopened
    /// directories and a few for WASI itself), reserved until the permit is dropped.
    async fn reserve_descriptors(
        &self,
        caps: &CapabilitySet,
    ) -> anyhow::Result<tokio::sync::OwnedSemaphorePermit> {
        let share = self.descriptor_share(caps);
        Ok(self.descriptors.clone().acquire_many_owned(share).await?)
    }

    /// How many of the process's descriptors a call under `caps` reserves.
    fn descriptor_share(&self, caps: &CapabilitySet) -> u32 {
        u32::try_from(self.call_handles(caps) + caps.fs.len() as u64 + 8).unwrap_or(u32::MAX)
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
        let handles = self.call_handles(caps);
        new_store(&self.engine, caps, scratch, (profile, plugin), handles)
    }
}

/// Instantiates `pre` in `store` (unless `ready` is an instance made ahead in it) and
/// runs `call` on it, both before `deadline`; with when the instance was ready, if it
/// got that far.
async fn instantiate_and_call(
    store: &mut Store<CallState>,
    pre: &InstancePre<CallState>,
    ready: Option<Instance>,
    call: impl GuestCall,
    deadline: Instant,
) -> (Outcome, Option<Instant>) {
    let mut instantiated = None;
    let run = async {
        let instance = match ready {
            Some(instance) => instance,
            None => pre.instantiate_async(&mut *store).await?,
        };
        instantiated = Some(Instant::now());
        call.run(store, instance).await
    };
    let outcome = tokio::time::timeout_at(deadline.into(), run).await;
    (outcome, instantiated)
}

/// What a call leaves to tidy whatever its result: a scratch file whose write
/// crossed `scratch_mb` is removed, and dropped log records are reported once.
fn settle(state: &CallState, request: &ToolRequest<'_>) {
    if let (Some(disk::DiskLimit::Scratch), Some(dir)) = (state.disk.exceeded(), request.scratch) {
        state.disk.remove_partial(dir);
    }
    let dropped = state.log_dropped;
    if dropped > 0 {
        warn!(profile = %request.profile, plugin = request.plugin, "{dropped} log records dropped: the plugin passed capabilities.max_log_kb = {} (each record costs at least {LOG_RECORD_MIN_BYTES} bytes)", request.capabilities.limits.max_log_kb);
    }
}
