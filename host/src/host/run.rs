//! A run in progress ([`Run`]), how to cancel it from elsewhere ([`Canceller`]) and
//! how it ended ([`RunReport`], an [`AgentReport`] per agent).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::events::EventStream;
use crate::jobs::{title, Job, JobId, Phase, Tree};
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
}

/// How a run ended: the root's outcome and every agent of the tree.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The run's id.
    pub run_id: String,
    /// The root agent's outcome (its text is the run's answer).
    pub root: AgentOutcome,
    /// Every agent, the root first, then in creation order.
    pub agents: Vec<AgentReport>,
    /// Dollars spent by the whole tree.
    pub cost_usd: f64,
}

/// One agent of a run's tree, as the run's end found it.
#[derive(Clone, Debug)]
pub struct AgentReport {
    /// Its id, unique within the run.
    pub id: JobId,
    /// Who spawned it (`None` for the root).
    pub parent: Option<JobId>,
    /// Its profile.
    pub profile: String,
    /// The short description its parent gave at spawn, if any.
    pub label: Option<String>,
    /// The task, as given.
    pub task: String,
    /// How it ended (`None`: it was still queued or running when the run ended).
    pub outcome: Option<AgentOutcome>,
    /// Whether it had started (a concurrency slot, its first turn).
    pub(crate) started: bool,
}

impl AgentReport {
    /// Its state as tables and JSON name it: `queued`, `running`, or its outcome's.
    pub fn state(&self) -> &'static str {
        match (&self.outcome, self.started) {
            (Some(outcome), _) => outcome.state.as_str(),
            (None, true) => "running",
            (None, false) => "queued",
        }
    }

    /// The profile, with the label when there is one: `researcher (check the docs)`.
    pub(crate) fn title(&self) -> String {
        title(&self.profile, self.label.as_deref())
    }
}

impl From<Job> for AgentReport {
    fn from(job: Job) -> AgentReport {
        let (outcome, started) = match job.phase {
            Phase::Done(outcome) => (Some(outcome), true),
            Phase::Running(_) => (None, true),
            Phase::Queued => (None, false),
        };
        AgentReport {
            id: job.id,
            parent: job.parent,
            profile: job.profile,
            label: job.label,
            task: job.task,
            outcome,
            started,
        }
    }
}

impl Run {
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
        let mut jobs = self.tree.jobs();
        jobs.sort_by_key(|job| (job.parent.is_some(), job.created));
        RunReport {
            run_id: self.tree.run_id.clone(),
            root,
            agents: jobs.into_iter().map(AgentReport::from).collect(),
            cost_usd: self.tree.budget.spent(),
        }
    }
}
