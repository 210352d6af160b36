//! One instance made ahead of its call, for the plugins whose instantiation is a large
//! part of a call (the interpreters behind `run_python` and `run_js`): when a call of
//! such a plugin ends, its store is dropped and the next instance for the same caller
//! (capabilities, scratch directory, profile and plugin) is instantiated, both on a
//! background task, so the caller's next call finds an instance ready and waits only
//! for its own code.
//!
//! A ready instance is as fresh as any: it was instantiated in a store built for that
//! caller and has run nothing but its instantiation; it is used by one call, then
//! dropped. Its fuel, memory and descriptors count as the call's, as they would have
//! had it been instantiated on the call's path; the call's deadline is set when it is
//! taken. At most one is kept per plugin: a call from another caller replaces it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::{Instance, InstancePre};
use wasmtime::{Engine, Store};

use super::limits::CappedPipe;
use super::state::{new_store, CallState};
use crate::policy::CapabilitySet;

/// How long after a call its store is dropped and the next instance made.
const REFILL_DELAY: std::time::Duration = std::time::Duration::from_millis(1);

/// Who a ready instance was made for: a call takes it only with the same.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Caller {
    caps: CapabilitySet,
    scratch: Option<PathBuf>,
    profile: String,
    plugin: String,
}

impl Caller {
    /// `profile` calling `plugin` under `caps`, with its scratch directory.
    pub(super) fn new(
        caps: &CapabilitySet,
        scratch: Option<&std::path::Path>,
        profile: &str,
        plugin: &str,
    ) -> Caller {
        Caller {
            caps: caps.clone(),
            scratch: scratch.map(PathBuf::from),
            profile: profile.to_string(),
            plugin: plugin.to_string(),
        }
    }
}

/// A store for one call, with its pipes and descriptor share, and its instance when it
/// was made ahead (else the call instantiates it).
pub(super) struct Ready {
    pub(super) store: Store<CallState>,
    pub(super) instance: Option<Instance>,
    pub(super) stdout: CappedPipe,
    pub(super) stderr: CappedPipe,
    pub(super) descriptors: OwnedSemaphorePermit,
}

/// The one ready instance a plugin keeps, if any.
#[derive(Default)]
pub(super) struct ReadySlot {
    slot: Mutex<Option<(Caller, Ready)>>,
}

impl ReadySlot {
    /// The ready instance, if it was made for `caller` (else it stays).
    pub(super) fn take(&self, caller: &Caller) -> Option<Ready> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some((made_for, _)) if made_for == caller => slot.take().map(|(_, ready)| ready),
            _ => None,
        }
    }

    fn put(&self, caller: Caller, ready: Ready) {
        let old = self
            .slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace((caller, ready));
        drop(old);
    }
}

/// What a background refill needs: owned copies of the call's context.
pub(super) struct Refill {
    pub(super) slot: Arc<ReadySlot>,
    pub(super) engine: Engine,
    pub(super) pre: InstancePre<CallState>,
    pub(super) caller: Caller,
    pub(super) handles: u64,
    pub(super) descriptors: Arc<tokio::sync::Semaphore>,
    pub(super) share: u32,
    /// Whether pooled memories are reset in place, so that keeping a finished
    /// store's pages resident (see `resident`) spares the next instance its faults.
    pub(super) keep_resident: bool,
}

impl Refill {
    /// Drops `spent` (the finished call's store: its memory slot is reset here, off
    /// the caller's path), then makes the next instance for the same caller. A refill
    /// that cannot get its descriptor share, or fails, leaves the slot empty: the next
    /// call instantiates on its own path, as any call does.
    pub(super) fn start(self, spent: Store<CallState>) {
        tokio::spawn(async move {
            // After the call has gone back to its caller: resetting and mapping memory
            // takes the process's address-space lock, which the caller's own page
            // faults would otherwise wait for.
            tokio::time::sleep(REFILL_DELAY).await;
            let memory = spent.data().guest_memory.filter(|_| self.keep_resident);
            let joined = memory.map(|memory| memory.keep_resident());
            if let Some(joined) = joined.filter(|joined| joined.pages > 0) {
                tracing::debug!(
                    runs = joined.runs,
                    pages = joined.pages,
                    "joined a finished instance's written pages"
                );
            }
            drop(spent);
            let Ok(descriptors) = self.descriptors.try_acquire_many_owned(self.share) else {
                return;
            };
            let caller = &self.caller;
            let Ok((mut store, stdout, stderr)) = new_store(
                &self.engine,
                &caller.caps,
                caller.scratch.as_deref(),
                (&caller.profile, &caller.plugin),
                self.handles,
            ) else {
                return;
            };
            let deadline = Instant::now() + caller.caps.limits.tool_timeout();
            let made =
                tokio::time::timeout_at(deadline.into(), self.pre.instantiate_async(&mut store))
                    .await;
            if let Ok(Ok(instance)) = made {
                let ready = Ready {
                    store,
                    instance: Some(instance),
                    stdout,
                    stderr,
                    descriptors,
                };
                self.slot.put(self.caller, ready);
            }
        });
    }
}
