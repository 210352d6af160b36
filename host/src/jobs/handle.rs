//! [`JobHandle`]: the one owner of a job's life. A job is registered (queued), started
//! and finished through its handle and nowhere else, for the root of a run, a child run
//! here, a child run on a worker (and the worker's agents mirrored below it) and an
//! MCP session alike; each transition updates the tree and publishes its event in one
//! step, so whatever observes jobs (the live view, the event log, traces, a journal)
//! hooks in here once.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::mailbox::Mailbox;
use super::slots::{Lease, Permit};
use super::tree::{JobId, Phase, Tree};
use crate::events::{AgentIntro, SpawnMode};
use crate::journal::{Fact, Record};
use crate::outcome::{AgentOutcome, AgentState};

/// Where a job sits: its tree, its id and its cancellation tokens. Cheap to clone;
/// what an agent or a backend needs to work as that job, without the right to end it.
#[derive(Clone)]
pub(crate) struct Placement {
    /// The run's tree.
    pub tree: Arc<Tree>,
    /// The job's id there.
    pub id: JobId,
    /// Cancels the job (and, through `children_cancel`, its descendants).
    pub(crate) cancel: CancellationToken,
    /// Parent token of the job's own children; cancelled when the job ends.
    pub(crate) children_cancel: CancellationToken,
    /// The concurrency slots it works in, once granted.
    pub(crate) lease: Arc<Lease>,
    /// The messages sent to its agent.
    pub(crate) mailbox: Arc<Mailbox>,
    /// Whether it is its tree's root (a run's, a session's, or a worker's queue job):
    /// a root holds no slot of its own.
    pub(crate) root: bool,
}

impl Placement {
    /// Registers a child of this job, queued, and announces it (`agent_queued`).
    pub(crate) fn child(
        &self,
        profile: &str,
        task: &str,
        label: Option<&str>,
        mode: SpawnMode,
    ) -> JobHandle {
        let tree = &self.tree;
        let cancel = self.children_cancel.child_token();
        let (id, done, mailbox) = tree.insert(
            Some(&self.id),
            profile,
            task,
            label,
            Some(mode),
            cancel.clone(),
        );
        let child = JobHandle::new(tree, (id, done, mailbox), cancel, false);
        child.registered();
        child
    }
}

/// The right to move one job through its life: `queued` (registered) → `running`
/// ([`start`](JobHandle::start)) → done ([`finish`](JobHandle::finish)). Finishing
/// takes the handle, so a job ends once; a handle dropped unfinished (its task
/// panicked or was aborted) ends the job as an error, so no job waits forever.
pub struct JobHandle {
    /// Where the job sits.
    place: Placement,
    /// Flips the job's `done` flag; `None` once finished.
    done: Option<Arc<watch::Sender<bool>>>,
}

impl JobHandle {
    /// Registers the root job of `tree` (cancelled with the whole tree).
    pub(crate) fn root(tree: &Arc<Tree>, profile: &str, task: &str) -> JobHandle {
        let cancel = tree.cancel.clone();
        let entry = tree.insert(None, profile, task, None, None, cancel.clone());
        let root = JobHandle::new(tree, entry, cancel, true);
        root.registered();
        root
    }

    fn new(
        tree: &Arc<Tree>,
        (id, done, mailbox): (JobId, Arc<watch::Sender<bool>>, Arc<Mailbox>),
        cancel: CancellationToken,
        root: bool,
    ) -> JobHandle {
        JobHandle {
            place: Placement {
                tree: tree.clone(),
                id,
                children_cancel: cancel.child_token(),
                cancel,
                lease: Arc::default(),
                root,
                mailbox,
            },
            done: Some(done),
        }
    }

    /// The job's id.
    pub fn id(&self) -> &JobId {
        &self.place.id
    }

    /// Where the job sits.
    pub(crate) fn place(&self) -> &Placement {
        &self.place
    }

    /// Holds the job's concurrency slots until it ends ([`JobHandle::finish`] gives
    /// them back after publishing the end).
    pub(crate) fn hold(&mut self, slots: Permit) {
        self.place.lease.hold(slots);
    }

    /// The job runs from now on (`agent_started`). Starting again (a worker's retry
    /// of the same job) restarts its clock.
    pub fn start(&self) {
        let tree = &self.place.tree;
        tree.set_phase(&self.place.id, Phase::Running(Instant::now()));
        if let Some(intro) = self.intro() {
            tree.happened(Fact::AgentStarted(&intro));
        }
    }

    /// The job ended with `outcome`: its `agent_finished` event, its phase, then its
    /// `done` flag (so whoever wakes on the flag finds the outcome in the tree).
    /// Returns the outcome.
    pub(crate) fn finish(mut self, outcome: AgentOutcome) -> AgentOutcome {
        self.end(outcome.clone());
        outcome
    }

    /// The job's agent finished with `outcome` and may be resumed by a follow-up: its
    /// end is published as [`JobHandle::finish`] publishes it, and the handle stays
    /// to [`start`](JobHandle::start) it again once a follow-up wakes it.
    pub(crate) fn rest(&mut self, outcome: AgentOutcome) {
        self.publish_end(outcome, true);
    }

    /// The resting job will not be resumed (its parent ended): no letter gets in any
    /// more, and a follow-up accepted just before ends it, cancelled before it ran.
    pub(crate) fn retire(mut self) {
        self.place.mailbox.close();
        let requeued = self
            .place
            .tree
            .job(&self.place.id)
            .is_some_and(|job| !matches!(job.phase, Phase::Done(_)));
        if requeued {
            self.end(AgentOutcome {
                error: Some("its parent ended before the follow-up could run".into()),
                ..AgentOutcome::cancelled_before_start()
            });
        } else {
            self.done = None;
        }
    }

    fn end(&mut self, outcome: AgentOutcome) {
        self.publish_end(outcome, false);
        self.done = None;
    }

    /// Publishes the job's end; `resting`: it may be resumed.
    fn publish_end(&mut self, outcome: AgentOutcome, resting: bool) {
        let Some(done) = self.done.clone() else {
            return;
        };
        let tree = &self.place.tree;
        // What its agent ended without reading stays undelivered, said in its result.
        if resting {
            self.place.mailbox.rest();
        } else {
            self.place.mailbox.close();
        }
        tree.happened(Fact::Recorded(Record::agent_finished(
            &self.place.id.0,
            &outcome,
        )));
        tree.set_phase(&self.place.id, Phase::Done(outcome));
        done.send_replace(true);
        // Only now may the next child start: given back only after its end is
        // published, so no observer ever sees more agents running than the limits
        // allow.
        drop(self.place.lease.take());
    }

    /// Journals the job's registration (the root's too, so a journal names every job)
    /// and, for a child, announces it (`agent_queued`).
    fn registered(&self) {
        if let Some(intro) = self.intro() {
            let queued = Record::AgentQueued(intro);
            self.place.tree.happened(Fact::Recorded(queued));
        }
    }

    /// Who the job is, its task whole (one read of it).
    fn intro(&self) -> Option<AgentIntro> {
        let job = self.place.tree.job(&self.place.id)?;
        Some(AgentIntro {
            agent: job.id.0,
            parent: job.parent.map(|p| p.0),
            profile: job.profile,
            task: job.task,
            label: job.label,
            mode: job.mode,
        })
    }
}

impl Drop for JobHandle {
    fn drop(&mut self) {
        // A resting job's end is published already: dropped (its process exits, its
        // task with it), it stays as it ended.
        let resting = self
            .place
            .tree
            .job(&self.place.id)
            .is_some_and(|job| matches!(job.phase, Phase::Done(_)));
        if self.done.is_some() && !resting {
            self.end(AgentOutcome {
                state: AgentState::Error,
                error: Some("its task ended without an outcome (a bug in warren)".into()),
                ..AgentOutcome::cancelled_before_start()
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunLimits;
    use crate::events::Event;
    use crate::jobs::slots::{Reservation, RunSlots, SlotQueue};

    /// One slot: the job holding it gives it back in `finish`, after its
    /// `agent_finished` is published, so whoever gets the slot next finds that event
    /// already on the bus.
    #[test]
    fn a_jobs_slots_pass_on_only_after_its_end_is_published() {
        let tree = Tree::new(RunLimits::default());
        let (queue, run) = (SlotQueue::new(1), RunSlots::new(1));
        let Reservation::Granted(first) = queue.reserve(&run, true) else {
            panic!("the first reservation waits")
        };
        let Reservation::Queued(next) = queue.reserve(&run, true) else {
            panic!("the second reservation was granted at once")
        };
        let root = JobHandle::root(&tree, "main", "t");
        let mut child = root
            .place()
            .child("worker", "c", None, SpawnMode::Background);
        child.hold(first);
        child.start();
        let mut events = tree.events.subscribe();
        let id = child.id().0.clone();
        let waiter = std::thread::spawn(move || {
            next.blocking_recv().expect("granted");
            std::iter::from_fn(|| events.try_next())
                .any(|r| matches!(r.event, Event::AgentFinished { ref agent, .. } if *agent == id))
        });
        child.finish(AgentOutcome::cancelled_before_start());
        assert!(
            waiter.join().unwrap(),
            "the next job got the slot before this one's end was published"
        );
    }

    /// A resting job dropped (its process exits before its parent's end retires it)
    /// keeps the end it rested with: no second end, no error.
    #[test]
    fn a_resting_job_dropped_keeps_its_end() {
        let tree = Tree::new(RunLimits::default());
        let root = JobHandle::root(&tree, "main", "t");
        let mut child = root
            .place()
            .child("worker", "c", None, SpawnMode::Background);
        let id = child.id().clone();
        child.start();
        let mut events = tree.events.subscribe();
        child.rest(AgentOutcome {
            state: AgentState::Ok,
            ..AgentOutcome::cancelled_before_start()
        });
        drop(child);
        let Phase::Done(outcome) = tree.job(&id).unwrap().phase else {
            panic!("not done")
        };
        assert_eq!(outcome.state, AgentState::Ok);
        let ends = std::iter::from_fn(|| events.try_next())
            .filter(|r| matches!(r.event, Event::AgentFinished { .. }))
            .count();
        assert_eq!(ends, 1);
    }

    #[tokio::test]
    async fn every_transition_is_an_event_and_a_dropped_handle_ends_its_job() {
        let tree = Tree::new(RunLimits::default());
        let mut events = tree.events.subscribe();
        let root = JobHandle::root(&tree, "main", "t");
        root.start();
        let child = root
            .place()
            .child("worker", "c", Some("label"), SpawnMode::Background);
        let id = child.id().clone();
        let mut done = tree.job(&id).unwrap().done;
        child.start();
        drop(child);
        assert!(*done.wait_for(|d| *d).await.unwrap());
        let job = tree.job(&id).unwrap();
        let Phase::Done(outcome) = &job.phase else {
            panic!("{:?}", job.phase)
        };
        assert_eq!(outcome.state, AgentState::Error);
        assert_eq!(tree.active_subagents(), 0);
        let outcome = root.finish(AgentOutcome::cancelled_before_start());
        assert_eq!(outcome.state, AgentState::Cancelled);
        let mut kinds = Vec::new();
        while let Some(record) = events.try_next() {
            let agent = record.event.agent().unwrap_or_default().to_string();
            let kind = serde_json::to_value(&record.event).unwrap()["type"].clone();
            kinds.push(format!("{}:{}", kind.as_str().unwrap(), agent == id.0));
        }
        assert_eq!(
            kinds,
            [
                "agent_started:false",
                "agent_queued:true",
                "agent_started:true",
                "agent_finished:true",
                "agent_finished:false"
            ]
        );
    }
}
