//! Where the time of fresh-sandbox calls goes, summed over every call of the
//! process: building the store (WASI context, limits), instantiating the component
//! (memory images, tables, imports, start functions), the guest's call, and
//! tearing down (result checks, dropping the store, which resets its memory slot).
//! Four relaxed atomic additions per call; read by `cargo bench --bench fresh_calls`
//! and `--bench code_tools`, the only readers outside the crate: the breakdown is
//! inside the sandbox, where no public call can time it, so `totals` and
//! `PhaseTotals` (opaque but for its `Display`, the mean of each phase per call)
//! are compiled for them alone (the `internals` feature).

use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "internals")]
use std::time::Duration;
use std::time::Instant;

/// Cumulative phase times of every call that instantiated.
pub(crate) static PHASES: Phases = Phases::new();

/// Running totals, in nanoseconds.
pub(crate) struct Phases {
    calls: AtomicU64,
    nanos: [AtomicU64; 4],
}

/// A snapshot of [`Phases`]: calls, and the total time of each phase. Subtract two to
/// time a stretch of calls; its `Display` is the mean of each phase per call.
#[cfg(feature = "internals")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseTotals {
    /// Calls that got as far as an instance.
    calls: u64,
    /// Building the store.
    store: Duration,
    /// Instantiating the component.
    instantiate: Duration,
    /// The guest's call.
    call: Duration,
    /// Checking the result and dropping the store.
    teardown: Duration,
}

#[cfg(feature = "internals")]
impl std::fmt::Display for PhaseTotals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mean = |total: Duration| total.as_secs_f64() * 1e6 / self.calls.max(1) as f64;
        write!(
            f,
            "store {:.1} µs, instantiate {:.1} µs, guest call {:.1} µs, teardown {:.1} µs",
            mean(self.store),
            mean(self.instantiate),
            mean(self.call),
            mean(self.teardown)
        )
    }
}

impl Phases {
    const fn new() -> Phases {
        Phases {
            calls: AtomicU64::new(0),
            nanos: [
                AtomicU64::new(0),
                AtomicU64::new(0),
                AtomicU64::new(0),
                AtomicU64::new(0),
            ],
        }
    }

    /// Adds one call whose phases ended at these instants (start, store built,
    /// instantiated, called, torn down).
    pub(crate) fn record(&self, at: [Instant; 5]) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        for (i, total) in self.nanos.iter().enumerate() {
            let nanos = at[i + 1].saturating_duration_since(at[i]).as_nanos();
            total.fetch_add(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Relaxed);
        }
    }
}

/// The totals so far; subtract two snapshots to time a stretch of calls.
#[cfg(feature = "internals")]
pub fn totals() -> PhaseTotals {
    let nanos = |i: usize| Duration::from_nanos(PHASES.nanos[i].load(Ordering::Relaxed));
    PhaseTotals {
        calls: PHASES.calls.load(Ordering::Relaxed),
        store: nanos(0),
        instantiate: nanos(1),
        call: nanos(2),
        teardown: nanos(3),
    }
}

#[cfg(feature = "internals")]
impl std::ops::Sub for PhaseTotals {
    type Output = PhaseTotals;

    fn sub(self, before: PhaseTotals) -> PhaseTotals {
        PhaseTotals {
            calls: self.calls - before.calls,
            store: self.store.saturating_sub(before.store),
            instantiate: self.instantiate.saturating_sub(before.instantiate),
            call: self.call.saturating_sub(before.call),
            teardown: self.teardown.saturating_sub(before.teardown),
        }
    }
}
