//! A parent and its children's ends: waiting for them (lending the parent's slots out
//! meanwhile), handing each result over once, and what is left when the parent would
//! finish.

use std::time::Duration;

use futures_util::future::join_all;

use super::parts::{Parent, Scheduler};
use crate::jobs::slots::{Rejoin, RootWaiting};
use crate::jobs::{CancelJob, Job, JobId, JobSelection, Phase, Placement};
use crate::journal::Drained;

/// How many of the awaited children must end before a wait returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Until {
    /// Every one.
    All,
    /// The first.
    Any,
}

/// One awaited child as the wait left it.
#[derive(Clone, Debug)]
pub(crate) enum Report {
    /// A child of the parent: finished (its result is delivered by this report) or
    /// still under way.
    Child(Box<Job>),
    /// No child of the parent has this id.
    NotFound(JobId),
}

impl Report {
    /// The child reported, when it is one.
    pub(crate) fn into_job(self) -> Option<Job> {
        match self {
            Report::Child(job) => Some(*job),
            Report::NotFound(_) => None,
        }
    }
}

impl Scheduler {
    /// Waits for `parent`'s children `ids` (all, or the first with [`Until::Any`]),
    /// up to `timeout`, and reports each. While it waits, `parent` lends its slots out
    /// (a root is counted as waiting, so a worker takes another job in its place) and
    /// takes them back ahead of queued spawns. A finished child is delivered: it is
    /// not pushed to the parent again.
    pub(crate) async fn wait(
        &self,
        parent: &Parent<'_>,
        ids: &[JobId],
        until: Until,
        timeout: Option<Duration>,
    ) -> Vec<Report> {
        let place = parent.place;
        let own = |id: &JobId| {
            place
                .tree
                .job(id)
                .filter(|job| job.parent.as_ref() == Some(&place.id))
        };
        let waits: Vec<_> = ids
            .iter()
            .filter_map(own)
            .map(|job| {
                let mut done = job.done;
                Box::pin(async move {
                    let _ = done.wait_for(|finished| *finished).await;
                })
            })
            .collect();
        if !waits.is_empty() {
            let wait = async move {
                match until {
                    Until::Any => drop(futures_util::future::select_all(waits).await),
                    Until::All => drop(join_all(waits).await),
                }
            };
            let waiting = self.step_aside(place);
            match timeout {
                Some(limit) => drop(tokio::time::timeout(limit, wait).await),
                None => wait.await,
            }
            waiting.rejoin(place).await;
        }
        ids.iter()
            .map(|id| match own(id) {
                Some(job) => {
                    if matches!(job.phase, Phase::Done(_)) {
                        place.tree.mark_delivered(id);
                    }
                    Report::Child(Box::new(job))
                }
                None => Report::NotFound(id.clone()),
            })
            .collect()
    }

    /// Runs `wait` (an agent waiting for a person, say) with `place`'s slots lent out,
    /// as a parent waiting for its children does, and takes them back before it
    /// returns.
    pub(crate) async fn aside<F: std::future::Future>(
        &self,
        place: &Placement,
        wait: F,
    ) -> F::Output {
        let waiting = self.step_aside(place);
        let out = wait.await;
        waiting.rejoin(place).await;
        out
    }

    /// The children of `parent` that finished and were not yet delivered, delivered
    /// now, in spawn order.
    pub(crate) fn finished(&self, parent: &Placement) -> Vec<Job> {
        parent.tree.take_finished_undelivered(&parent.id)
    }

    /// When `parent` would finish while children of its still run: those (by id) and
    /// every child whose result it has not been given, to wait for before it may.
    /// `None`: nothing runs, it may finish.
    pub(crate) fn unfinished(&self, parent: &Placement) -> Option<Drained> {
        let children = parent.tree.children(&parent.id);
        let running: Vec<String> = children
            .iter()
            .filter(|job| !matches!(job.phase, Phase::Done(_)))
            .map(|job| job.id.0.clone())
            .collect();
        if running.is_empty() {
            return None;
        }
        let delivered = children
            .into_iter()
            .filter(|job| !job.delivered)
            .map(|job| job.id.0)
            .collect();
        Some(Drained { running, delivered })
    }

    /// The children of `parent` that `selection` names (an id that is not one is
    /// kept, to be reported not found).
    pub(crate) fn select(&self, parent: &Placement, selection: &JobSelection) -> Vec<JobId> {
        parent.tree.select(&parent.id, selection)
    }

    /// `parent`'s children, in spawn order.
    pub(crate) fn children(&self, parent: &Placement) -> Vec<Job> {
        parent.tree.children(&parent.id)
    }

    /// Cancels `parent`'s child `id` and its descendants.
    pub(crate) fn cancel(&self, parent: &Placement, id: &JobId) -> CancelJob {
        parent.tree.cancel_job(id, Some(&parent.id))
    }

    /// `place` only waits for its sub-agents from now until [`Waiting::rejoin`]: it
    /// gives back its concurrency slots (or, as a root, is counted as waiting).
    fn step_aside(&self, place: &Placement) -> Waiting {
        if place.root {
            return Waiting::Root {
                _counted: self.slots().root_waits(),
            };
        }
        match place.lease.step_aside() {
            Some(rejoin) => Waiting::Child(rejoin),
            None => Waiting::Unslotted,
        }
    }
}

/// What a parent waiting for its sub-agents gave up.
enum Waiting {
    /// A root, counted as waiting until dropped.
    Root {
        /// The count, taken back when dropped.
        _counted: RootWaiting,
    },
    /// A child's slots, lent out.
    Child(Rejoin),
    /// Nothing: it held no slot.
    Unslotted,
}

impl Waiting {
    /// The wait is over: takes the slots again (ahead of waiting spawns).
    async fn rejoin(self, place: &Placement) {
        if let Waiting::Child(rejoin) = self {
            rejoin.rejoin(&place.lease, &place.cancel).await;
        }
    }
}
