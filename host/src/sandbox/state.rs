//! The state of one tool call's store: its WASI and `wasi:http` contexts, resource
//! table, network hooks, memory cap, log budget and disk budgets, all set from the
//! caller's capabilities before anything is instantiated.

use std::path::Path;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::warren::plugin::host_log;
use super::classify::DeadlineExceeded;
use super::disk;
use super::limits::{CappedPipe, MemoryCap};
use super::net::{DenialLog, NetHooks};
use super::resident::GuestMemory;
use super::wasi;
use crate::policy::CapabilitySet;

/// Every `host-log` record costs at least this many bytes of `capabilities.max_log_kb`,
/// so a flood of empty records is bounded like a flood of long ones.
pub(crate) const LOG_RECORD_MIN_BYTES: usize = 128;

/// Largest memory one `wasi:http` fields handle may hold (wasmtime's default).
const MAX_FIELD_BYTES: usize = 128 * 1024;

/// The state of one tool call's [`wasmtime::Store`].
pub(crate) struct CallState {
    /// The WASI context built from the capability set.
    pub(super) wasi: WasiCtx,
    /// wasi:http's per-store context.
    http: WasiHttpCtx,
    /// Resources handed to the guest.
    pub(super) table: ResourceTable,
    /// Routes outgoing HTTP through the network policy.
    pub(super) hooks: NetHooks,
    /// Enforces `memory_mb`.
    pub(super) memory: MemoryCap,
    /// Who is calling, for `host-log` records: profile, plugin.
    who: (String, String),
    /// What is left of `capabilities.max_log_kb`, in bytes.
    log_budget: usize,
    /// Records dropped once the log budget was used up (reported once, after the call).
    pub(super) log_dropped: u64,
    /// File-write and scratch budgets.
    pub(super) disk: disk::DiskBudget,
    /// Where the guest's linear memory lies (as its result was lifted from it), so
    /// the store's refill can keep its pages resident for the next instance (see
    /// `resident`).
    pub(super) guest_memory: Option<GuestMemory>,
}

impl CallState {
    /// The state of a call under `caps` that may hold `handles` handles, by
    /// `profile`'s call of `plugin`, writing to `stdout` and `stderr`.
    pub(super) fn new(
        caps: &CapabilitySet,
        scratch: Option<&Path>,
        (profile, plugin): (&str, &str),
        handles: u64,
        (stdout, stderr): (&CappedPipe, &CappedPipe),
    ) -> anyhow::Result<Self> {
        let limits = &caps.limits;
        let denials = DenialLog::new(profile, plugin);
        let wasi = wasi::wasi_ctx(caps, scratch, stdout, stderr, &denials)?;
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
        Ok(CallState {
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
            guest_memory: None,
        })
    }
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

/// A fresh store for one call by `profile` of `plugin` under `caps`, holding at most
/// `handles` handles, with fuel, epoch deadline and memory cap set before anything is
/// instantiated.
pub(super) fn new_store(
    engine: &Engine,
    caps: &CapabilitySet,
    scratch: Option<&Path>,
    (profile, plugin): (&str, &str),
    handles: u64,
) -> anyhow::Result<(Store<CallState>, CappedPipe, CappedPipe)> {
    let limits = &caps.limits;
    let stdout = CappedPipe::new(limits.max_output_bytes());
    let stderr = CappedPipe::new(limits.max_output_bytes());
    let state = CallState::new(
        caps,
        scratch,
        (profile, plugin),
        handles,
        (&stdout, &stderr),
    )?;
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.memory);
    store.set_fuel(limits.fuel)?;
    arm_deadline(&mut store, limits.tool_timeout());
    Ok((store, stdout, stderr))
}

/// Sets `store`'s wall-time limit to `timeout` from now: it yields to the executor
/// every tick, so a computing guest never starves other tasks, and traps once the
/// limit has passed.
pub(super) fn arm_deadline(store: &mut Store<CallState>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Err(wasmtime::Error::new(DeadlineExceeded))
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}
