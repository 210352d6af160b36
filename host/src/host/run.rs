//! A run in progress ([`Run`]), how to cancel it from elsewhere ([`Canceller`]) and
//! how it ended ([`RunReport`]).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::events::EventStream;
use crate::jobs::{Job, JobId, Tree};
use crate::journal::Record;
use crate::outcome::{AgentOutcome, AgentState};

/// A run in progress: a root agent and the tree of sub-agents below it.
pub struct Run {
    /// The job tree (ids, states, results, budget).
    pub(crate) tree: Arc<Tree>,
    /// The root's id.
    pub root: JobId,
    /// The root agent's task.
    pub(super) handle: tokio::task::JoinHandle<AgentOutcome>,
    /// A subscription made before the root started, so the first caller of
    /// [`Run::events`] sees every event.
    pub(super) first_events: std::sync::Mutex<Option<EventStream>>,
}

/// Cancels a run's whole tree ([`Run::canceller`]); cheap to clone.
#[derive(Clone, Debug)]
pub struct Canceller(CancellationToken);

impl Canceller {
    /// Cancels the run: in-flight model calls and tool calls stop at once.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// How a run ended: the root's outcome and every agent of the tree.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The run's id.
    pub run_id: String,
    /// The root agent's outcome (its text is the run's answer).
    pub root: AgentOutcome,
    /// Every job, the root first, then in creation order.
    pub agents: Vec<Job>,
    /// Dollars spent by the whole tree.
    pub cost_usd: f64,
}

impl Run {
    /// In a replay, the first point where it left the recording (`None`: it has not,
    /// or this is not a replay).
    pub fn replay_divergence(&self) -> Option<crate::jobs::Divergence> {
        self.tree.mode.replay()?.divergence()
    }

    /// A token that cancels the whole tree (for Ctrl-C handlers).
    pub(crate) fn cancel_token(&self) -> CancellationToken {
        self.tree.cancel.clone()
    }

    /// The run's id (its journal's name under `.warren/runs/`).
    pub fn id(&self) -> &str {
        &self.tree.run_id
    }

    /// A handle that cancels the whole tree from elsewhere (a Ctrl-C handler, another
    /// task) while this [`Run`] is awaited.
    pub fn canceller(&self) -> Canceller {
        Canceller(self.tree.cancel.clone())
    }

    /// The run's events: the first call gets every event since the start, later calls
    /// those published from then on.
    pub fn events(&self) -> EventStream {
        self.first_events
            .lock()
            .expect("event subscription poisoned")
            .take()
            .unwrap_or_else(|| self.tree.events.subscribe())
    }

    /// Cancels the whole tree: in-flight model calls and tool calls stop at once.
    pub fn cancel(&self) {
        self.tree.cancel.cancel();
    }

    /// Waits for the root to finish and reports every agent.
    pub async fn wait(self) -> RunReport {
        let root = match self.handle.await {
            Ok(outcome) => outcome,
            // A panic is a failure of the run, not a cancellation.
            Err(error) if error.is_panic() => AgentOutcome {
                state: AgentState::Error,
                error: Some(format!("the root agent crashed (a bug in warren): {error}")),
                ..AgentOutcome::cancelled_before_start()
            },
            Err(error) => AgentOutcome {
                error: Some(format!("the root agent's task was cancelled: {error}")),
                ..AgentOutcome::cancelled_before_start()
            },
        };
        self.tree.record(|| Record::RunFinished {
            state: root.state,
            cost_usd: self.tree.budget.spent(),
        });
        if let Some(journal) = &self.tree.journal {
            journal.flush().await;
        }
        let mut agents = self.tree.jobs();
        agents.sort_by_key(|job| (job.parent.is_some(), job.created));
        RunReport {
            run_id: self.tree.run_id.clone(),
            root,
            agents,
            cost_usd: self.tree.budget.spent(),
        }
    }
}
