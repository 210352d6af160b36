//! The run a `warren run --web` serves: the event pump feeds it every event
//! ([`LiveRun::apply`], then [`LiveRun::flush`] after each burst); it keeps the shared
//! fold ([`RunState`]) for snapshots and turns each burst into one frame of server-sent
//! events for every connected client: the events themselves, then the rows of the
//! agents they changed and the run's totals.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use super::api::{self, RunInfo};
use crate::events::{Event, EventRecord};
use crate::jobs::run_state::RunState;
use crate::jobs::{CancelJob, JobId, Tree};

/// Bursts kept for an event-stream client that falls behind; past that it is told to
/// start over from a snapshot.
const FRAME_BACKLOG: usize = 1024;

/// A run of this process, as its events come.
pub(crate) struct LiveRun {
    /// The fold and what the next frame holds.
    inner: Mutex<Inner>,
    /// Frames to event-stream clients, one per burst of events.
    frames: broadcast::Sender<Bytes>,
    /// The run's jobs: its limits, its spend, and how a job is cancelled.
    tree: Arc<Tree>,
    /// The root's profile.
    profile: String,
    /// The root's task.
    task: String,
}

#[derive(Default)]
struct Inner {
    /// Where every agent stands.
    state: RunState,
    /// The events of the burst so far, as event-stream text.
    pending: String,
    /// Agents the burst changed.
    changed: BTreeSet<String>,
}

impl LiveRun {
    /// The view of the run whose jobs are `tree`, rooted at job `root`.
    pub(crate) fn new(tree: Arc<Tree>, root: &JobId) -> Arc<LiveRun> {
        let (profile, task) = tree
            .job(root)
            .map(|job| (job.profile, job.task))
            .unwrap_or_default();
        Arc::new(LiveRun {
            inner: Mutex::default(),
            frames: broadcast::channel(FRAME_BACKLOG).0,
            tree,
            profile,
            task,
        })
    }

    /// The run's id.
    pub(crate) fn run_id(&self) -> &str {
        &self.tree.run_id
    }

    /// The run's journal file, when it is journaled (its transcripts are read from
    /// it).
    pub(super) fn journal_path(&self) -> Option<std::path::PathBuf> {
        self.tree.journal.as_ref().map(|j| j.path().to_path_buf())
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Folds one event in; clients get it with the next [`LiveRun::flush`].
    pub(crate) fn apply(&self, record: &EventRecord) {
        let watched = self.frames.receiver_count() > 0;
        let mut inner = self.inner();
        let changed = inner.state.apply(record).map(|a| a.id.clone());
        if !watched || matches!(record.event, Event::Lagged { .. }) {
            return;
        }
        if let Some(id) = changed {
            inner.changed.insert(id);
        }
        if let Ok(data) = serde_json::to_string(record) {
            push_frame(&mut inner.pending, "event", &data);
        }
    }

    /// Sends the burst's frame: its events, the rows of the agents they changed, the
    /// run's totals.
    pub(crate) fn flush(&self) {
        let mut inner = self.inner();
        if inner.pending.is_empty() {
            return;
        }
        let mut frame = std::mem::take(&mut inner.pending);
        let changed = std::mem::take(&mut inner.changed);
        for id in &changed {
            if let Some(agent) = inner.state.agent(id) {
                push_frame(
                    &mut frame,
                    "agent",
                    &api::agent_row(agent, None).to_string(),
                );
            }
        }
        let run = api::run_summary(&self.info(&inner.state), &inner.state);
        push_frame(&mut frame, "run", &run.to_string());
        // Sent under the lock: a client subscribing (under it too) gets its snapshot
        // and then exactly the frames after it.
        let _ = self.frames.send(Bytes::from(frame));
    }

    /// The snapshot as an event-stream frame, and the frames after it.
    pub(super) fn subscribe(&self) -> (Bytes, broadcast::Receiver<Bytes>) {
        let inner = self.inner();
        let receiver = self.frames.subscribe();
        let mut frame = String::new();
        push_frame(
            &mut frame,
            "snapshot",
            &self.snapshot_of(&inner.state).to_string(),
        );
        (Bytes::from(frame), receiver)
    }

    /// The run and every agent, as `/api/run` answers.
    pub(super) fn snapshot(&self) -> Value {
        self.snapshot_of(&self.inner().state)
    }

    fn snapshot_of(&self, state: &RunState) -> Value {
        api::snapshot(&self.info(state), state, |_| None)
    }

    /// One agent's row.
    pub(super) fn agent(&self, id: &str) -> Option<Value> {
        let inner = self.inner();
        inner.state.agent(id).map(|a| api::agent_row(a, None))
    }

    fn info(&self, state: &RunState) -> RunInfo {
        let root = state.root().and_then(|id| state.agent(id));
        RunInfo {
            id: self.tree.run_id.clone(),
            task: self.task.clone(),
            profile: self.profile.clone(),
            live: true,
            finished: root.is_some_and(|r| r.finished_ms.is_some()),
            state: root.map_or("queued", |r| r.state).to_string(),
            budget_usd: self.tree.limits.budget_usd,
            max_concurrent: Some(self.tree.limits.max_concurrent),
            cost_usd: self.tree.budget.spent(),
        }
    }

    /// The run's journal file, when it is journaled.
    pub(super) fn journal(&self) -> Option<std::path::PathBuf> {
        self.tree.journal.as_ref().map(|j| j.path().to_path_buf())
    }

    /// Cancels agent `id` and its subtree, as `cancel_agent` does for the agent that
    /// spawned it.
    pub(super) fn cancel(&self, id: &str) -> CancelJob {
        self.tree.cancel_job(&JobId(id.to_string()), None)
    }
}

/// Appends one server-sent event (`data` is one line of JSON).
pub(super) fn push_frame(out: &mut String, kind: &str, data: &str) {
    out.push_str("event: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(data);
    out.push_str("\n\n");
}
