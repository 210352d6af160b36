//! Concurrency slots, granted first come, first served: a sub-agent needs a slot of its
//! run (`max_concurrent`) and, when it runs in this process, one of the host
//! (`max_concurrent_total`). A slot is asked for when the spawn is made, in the order
//! of the spawns, so the one told "started" runs and the one told "queued" waits, and
//! queued children start in the order they were spawned.
//!
//! A queue of waiters behind one lock, not two semaphores: a child needs both slots at
//! once, and asking for them from spawned tasks would grant them in whatever order the
//! tasks happen to be polled.
//!
//! A slot is for working, not for waiting: an agent that waits for its own sub-agents
//! gives its slots back ([`Lease::step_aside`]) and takes them again, ahead of every
//! spawn still waiting, when they are done. A parent holding a slot while its children
//! wait for one would stall the tree as soon as parents fill the slots (100 children
//! of a `max_concurrent = 4` run, each spawning its own, never finished). A root holds
//! no slot; a root that waits is counted instead ([`SlotQueue::roots_waiting`]): a
//! worker takes another job in its place.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

/// The slots of one run: how many of its sub-agents may run at once.
#[derive(Debug)]
pub(crate) struct RunSlots {
    /// Slots free now. Changed only under the host queue's lock (an atomic only so
    /// that a run can be shared without a lock of its own).
    free: AtomicUsize,
}

impl RunSlots {
    /// `max_concurrent` slots.
    pub(crate) fn new(max_concurrent: usize) -> Arc<RunSlots> {
        Arc::new(RunSlots {
            free: AtomicUsize::new(max_concurrent),
        })
    }
}

/// The host's queue of sub-agents waiting for slots, and its own slots.
#[derive(Debug)]
pub(crate) struct SlotQueue {
    state: Mutex<State>,
    /// Roots of this host's runs that only wait for their sub-agents now.
    roots_waiting: watch::Sender<usize>,
}

#[derive(Debug)]
struct State {
    /// Host slots free now (`max_concurrent_total`).
    host_free: usize,
    /// Who waits, in the order they asked.
    waiting: VecDeque<Waiter>,
}

#[derive(Debug)]
struct Waiter {
    run: Arc<RunSlots>,
    /// Whether it runs here and so needs a host slot too.
    local: bool,
    grant: oneshot::Sender<Permit>,
}

/// The slots one job works in, shared by its handle (which gives them back once the
/// job's end is published) and its agent (which lends them out while it waits).
#[derive(Debug, Default)]
pub(crate) struct Lease {
    held: Mutex<Option<Permit>>,
}

impl Lease {
    /// The job works in `permit` from now on.
    pub(crate) fn hold(&self, permit: Permit) {
        *self.held.lock().expect("lease poisoned") = Some(permit);
    }

    /// The slots, taken back (the job ended).
    pub(crate) fn take(&self) -> Option<Permit> {
        self.held.lock().expect("lease poisoned").take()
    }

    /// Gives the slots back while the job only waits; `None` when it held none (a
    /// root). [`Rejoin::rejoin`] takes them again.
    pub(crate) fn step_aside(&self) -> Option<Rejoin> {
        let mut permit = self.take()?;
        let held = permit.held.take()?;
        held.queue.release(&held.run, held.local);
        Some(Rejoin { held })
    }
}

/// What a job that stepped aside takes again.
#[derive(Debug)]
pub(crate) struct Rejoin {
    held: Held,
}

impl Rejoin {
    /// Takes the slots again, ahead of every waiting spawn, into `lease`; gives up
    /// when `cancel` fires first (the job is ending: it needs no slot to end).
    pub(crate) async fn rejoin(self, lease: &Lease, cancel: &CancellationToken) {
        let Held { queue, run, local } = self.held;
        let reservation = queue.reserve_first(&run, local);
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {}
            permit = reservation.wait() => lease.hold(permit),
        }
    }
}

/// A root counted as waiting until dropped.
pub(crate) struct RootWaiting(Arc<SlotQueue>);

impl Drop for RootWaiting {
    fn drop(&mut self) {
        self.0.roots_waiting.send_modify(|n| *n -= 1);
    }
}

/// Slots held by one running sub-agent; dropping it frees them for the next waiter.
#[derive(Debug)]
pub(crate) struct Permit {
    /// `None` once the slots were handed back by hand (a grant nobody took).
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    queue: Arc<SlotQueue>,
    run: Arc<RunSlots>,
    local: bool,
}

/// A place in the queue, taken when the spawn is made.
pub(crate) enum Reservation {
    /// The slots were free: the child starts at once.
    Granted(Permit),
    /// The child waits for the slots, behind every earlier waiter.
    Queued(oneshot::Receiver<Permit>),
}

impl Reservation {
    /// Whether the child had to queue.
    pub(crate) fn is_queued(&self) -> bool {
        matches!(self, Reservation::Queued(_))
    }

    /// The slots, once granted. Dropping this future gives up the place in the queue.
    pub(crate) async fn wait(self) -> Permit {
        match self {
            Reservation::Granted(permit) => permit,
            // The queue never drops a waiter's sender without sending: it either grants
            // or is dropped with the host, when nothing waits any more.
            Reservation::Queued(grant) => grant.await.unwrap_or(Permit { held: None }),
        }
    }
}

impl SlotQueue {
    /// A host with `max_concurrent_total` slots.
    pub(crate) fn new(max_concurrent_total: usize) -> Arc<SlotQueue> {
        Arc::new(SlotQueue {
            state: Mutex::new(State {
                host_free: max_concurrent_total,
                waiting: VecDeque::new(),
            }),
            roots_waiting: watch::Sender::new(0),
        })
    }

    /// How many roots of this host's runs only wait for their sub-agents, as it
    /// changes (a worker takes that many more jobs).
    pub(crate) fn roots_waiting(&self) -> watch::Receiver<usize> {
        self.roots_waiting.subscribe()
    }

    /// Counts a root as waiting until the guard is dropped.
    pub(crate) fn root_waits(self: &Arc<Self>) -> RootWaiting {
        self.roots_waiting.send_modify(|n| *n += 1);
        RootWaiting(self.clone())
    }

    /// Asks for a slot of `run` (and of the host, for a child that runs here `local`).
    /// Granted at once when both are free: no waiter can be ahead then, since every
    /// release serves each waiter that fits.
    pub(crate) fn reserve(self: &Arc<Self>, run: &Arc<RunSlots>, local: bool) -> Reservation {
        self.reserve_at(run, local, false)
    }

    /// [`SlotQueue::reserve`] for a job that stepped aside and takes its slots again:
    /// ahead of every waiter (it was working before them, and its work is what they
    /// wait for).
    fn reserve_first(self: &Arc<Self>, run: &Arc<RunSlots>, local: bool) -> Reservation {
        self.reserve_at(run, local, true)
    }

    /// A slot now, else a place at the back of the queue (at its front: `first`).
    fn reserve_at(self: &Arc<Self>, run: &Arc<RunSlots>, local: bool, first: bool) -> Reservation {
        let mut state = self.state.lock().expect("slot queue poisoned");
        if state.fits(run, local) {
            state.take(run, local);
            return Reservation::Granted(self.permit(run, local));
        }
        let (grant, granted) = oneshot::channel();
        let waiter = Waiter {
            run: run.clone(),
            local,
            grant,
        };
        match first {
            true => state.waiting.push_front(waiter),
            false => state.waiting.push_back(waiter),
        }
        Reservation::Queued(granted)
    }

    fn permit(self: &Arc<Self>, run: &Arc<RunSlots>, local: bool) -> Permit {
        Permit {
            held: Some(Held {
                queue: self.clone(),
                run: run.clone(),
                local,
            }),
        }
    }

    /// Gives slots back and hands them to waiters, oldest first.
    fn release(self: &Arc<Self>, run: &RunSlots, local: bool) {
        let mut state = self.state.lock().expect("slot queue poisoned");
        state.give_back(run, local);
        // A waiter that cannot be served (its run is full, or the host is) does not
        // hold up waiters of other runs; waiters of its own run stay behind it.
        let mut index = 0;
        let mut blocked_runs: Vec<*const RunSlots> = Vec::new();
        let mut host_blocked = false;
        while index < state.waiting.len() {
            let waiter = &state.waiting[index];
            if waiter.grant.is_closed() {
                state.waiting.remove(index);
                continue;
            }
            let run_ptr = Arc::as_ptr(&waiter.run);
            let blocked = blocked_runs.contains(&run_ptr) || (waiter.local && host_blocked);
            if blocked || !state.fits(&waiter.run, waiter.local) {
                blocked_runs.push(run_ptr);
                host_blocked |= waiter.local;
                index += 1;
                continue;
            }
            let waiter = state.waiting.remove(index).expect("index in range");
            state.take(&waiter.run, waiter.local);
            let permit = self.permit(&waiter.run, waiter.local);
            if let Err(mut unclaimed) = waiter.grant.send(permit) {
                // Cancelled between the check and the send: take the slots back here,
                // under the lock, instead of through the permit's drop.
                unclaimed.held = None;
                state.give_back(&waiter.run, waiter.local);
                // An earlier waiter may fit now: look again from the front.
                (index, host_blocked) = (0, false);
                blocked_runs.clear();
            }
        }
    }
}

impl State {
    fn fits(&self, run: &RunSlots, local: bool) -> bool {
        run.free.load(Ordering::Relaxed) > 0 && (!local || self.host_free > 0)
    }

    fn take(&mut self, run: &RunSlots, local: bool) {
        run.free.fetch_sub(1, Ordering::Relaxed);
        if local {
            self.host_free -= 1;
        }
    }

    fn give_back(&mut self, run: &RunSlots, local: bool) {
        run.free.fetch_add(1, Ordering::Relaxed);
        if local {
            self.host_free += 1;
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            held.queue.release(&held.run, held.local);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(reservation: &mut Reservation) -> Option<Permit> {
        match reservation {
            Reservation::Granted(_) => {
                match std::mem::replace(reservation, Reservation::Queued(oneshot::channel().1)) {
                    Reservation::Granted(permit) => Some(permit),
                    Reservation::Queued(_) => unreachable!(),
                }
            }
            Reservation::Queued(grant) => grant.try_recv().ok(),
        }
    }

    #[test]
    fn slots_go_to_waiters_in_the_order_they_asked() {
        let host = SlotQueue::new(32);
        let run = RunSlots::new(3);
        let mut all: Vec<Reservation> = (0..6).map(|_| host.reserve(&run, true)).collect();
        let queued: Vec<bool> = all.iter().map(Reservation::is_queued).collect();
        assert_eq!(queued, [false, false, false, true, true, true]);
        let mut held: Vec<Option<Permit>> = all.iter_mut().map(granted).collect();
        assert!(held[3].is_none());
        // The second child ends: the fourth (the first queued) starts, not a later one.
        held[1] = None;
        held[3] = granted(&mut all[3]);
        assert!(held[3].is_some());
        assert!(granted(&mut all[4]).is_none() && granted(&mut all[5]).is_none());
        held[0] = None;
        assert!(granted(&mut all[4]).is_some());
    }

    #[test]
    fn the_host_limit_is_shared_in_order_and_a_full_run_does_not_block_others() {
        let host = SlotQueue::new(2);
        let (a, b) = (RunSlots::new(1), RunSlots::new(5));
        let mut first_a = host.reserve(&a, true);
        let mut second_a = host.reserve(&a, true);
        let mut first_b = host.reserve(&b, true);
        let mut second_b = host.reserve(&b, true);
        let first_a = granted(&mut first_a).unwrap();
        let _first_b = granted(&mut first_b).unwrap();
        assert!(second_b.is_queued() && second_a.is_queued());
        // Freeing a's slot: a's next waiter is first in line and gets it; b's waits
        // for the host.
        drop(first_a);
        let second_a = granted(&mut second_a);
        assert!(second_a.is_some());
        assert!(granted(&mut second_b).is_none());
        // A child on a worker needs no host slot: it is not held up by the host limit.
        let mut remote = host.reserve(&b, false);
        assert!(!remote.is_queued(), "only the host is full");
        assert!(granted(&mut remote).is_some());
    }

    #[tokio::test]
    async fn a_job_that_steps_aside_lends_its_slot_and_takes_it_back_first() {
        let host = SlotQueue::new(8);
        let run = RunSlots::new(1);
        let lease = Lease::default();
        lease.hold(host.reserve(&run, true).wait().await);
        let mut spawned = host.reserve(&run, true);
        let mut later = host.reserve(&run, true);
        assert!(spawned.is_queued() && later.is_queued());
        // The parent waits for its child: the child gets the slot.
        let rejoin = lease.step_aside().expect("it held a slot");
        let child = granted(&mut spawned).expect("the lent slot");
        // The child is done: the parent takes the slot again before `later`.
        let cancel = CancellationToken::new();
        let back = rejoin.rejoin(&lease, &cancel);
        tokio::pin!(back);
        assert!(
            futures_util::poll!(&mut back).is_pending(),
            "the child still works"
        );
        drop(child);
        back.await;
        assert!(granted(&mut later).is_none(), "the parent went first");
        drop(lease.take());
        assert!(granted(&mut later).is_some());
        // A root holds no slot: nothing to lend.
        assert!(Lease::default().step_aside().is_none());
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_its_place_to_the_next() {
        let host = SlotQueue::new(8);
        let run = RunSlots::new(1);
        let mut first = host.reserve(&run, true);
        let gone = host.reserve(&run, true);
        let mut next = host.reserve(&run, true);
        let first = granted(&mut first).unwrap();
        drop(gone);
        drop(first);
        let next = granted(&mut next);
        assert!(next.is_some());
        assert_eq!(run.free.load(Ordering::Relaxed), 0);
        drop(next);
        assert_eq!(run.free.load(Ordering::Relaxed), 1);
    }
}
