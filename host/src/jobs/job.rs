//! One job of a run's tree: its id, its phase, what a parent's selection of jobs
//! means, and how it is titled; the run ids jobs derive from.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::events::{summarize, AgentIntro, Event, SpawnMode};
use crate::outcome::AgentOutcome;

/// A job's id: six hex digits, unique within its run. Ids derive from the run's id
/// (random per run), so they differ from run to run; where a job must be named across
/// runs (events, traces, `--json`, queue jobs), the run's id goes with it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub(crate) String);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`: a width in a table (`{:<8}`) applies.
        f.pad(&self.0)
    }
}

/// Which jobs a `job_ids` argument names: the one reading of a list of job ids
/// (`await_agents`, and a session's caller).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum JobSelection {
    /// `"*"`: every job of the caller.
    All,
    /// The ids given, trimmed, empty ones left out.
    Ids(Vec<JobId>),
}

impl JobSelection {
    /// Reads `job_ids`: a list of ids, one comma-separated string, or `"*"`. Anything
    /// else names no job.
    pub(crate) fn parse(value: &Value) -> JobSelection {
        let ids: Vec<&str> = match value {
            Value::String(all) if all.trim() == "*" => return JobSelection::All,
            Value::String(list) => list.split(',').collect(),
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        JobSelection::Ids(
            ids.into_iter()
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(|id| JobId(id.to_string()))
                .collect(),
        )
    }
}

/// Where a job is in its life.
#[derive(Clone, Debug)]
pub enum Phase {
    /// Waiting for a concurrency slot.
    Queued,
    /// Running since the instant given.
    Running(Instant),
    /// Finished.
    Done(AgentOutcome),
}

impl Phase {
    /// The state as tables, JSON and `list_agents` name it: `queued`, `running`, or
    /// the outcome's state. The one rendering of a phase.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Running(_) => "running",
            Phase::Done(outcome) => outcome.state.as_str(),
        }
    }
}

/// What [`Tree::cancel_job`] did.
#[derive(Debug)]
pub(crate) enum CancelJob {
    /// No such job, or not one the caller may cancel.
    NotFound,
    /// It had already finished: nothing was cancelled.
    Finished(Job),
    /// It and its descendants are cancelled (each ends as it notices).
    Cancelled(Job),
}

/// One sub-agent (or the root) in the tree.
#[derive(Clone, Debug)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// Who spawned it (`None` for the root).
    pub parent: Option<JobId>,
    /// Its profile.
    pub profile: String,
    /// The task, as given.
    pub task: String,
    /// Where it is.
    pub phase: Phase,
    /// When it was created.
    pub created: Instant,
    /// Cancels it and its descendants (through [`Tree::cancel_job`](super::Tree::cancel_job)
    /// from outside the crate).
    pub(crate) cancel: CancellationToken,
    /// Flips to `true` when it finishes.
    pub(crate) done: watch::Receiver<bool>,
    /// Flips `done`: its handle's, and the tree's to put it back (a follow-up that
    /// resumes it).
    pub(super) done_flag: std::sync::Arc<watch::Sender<bool>>,
    /// Whether its result went to the parent (awaited or notified).
    pub delivered: bool,
    /// The short label its parent gave at spawn (`description`).
    pub label: Option<String>,
    /// Whether its parent waits for it (`None` for a root).
    pub mode: Option<SpawnMode>,
    /// The messages sent to it.
    pub(crate) mailbox: std::sync::Arc<super::mailbox::Mailbox>,
}

impl Job {
    /// The profile, with the label when there is one: `researcher (check the docs)`.
    pub fn title(&self) -> String {
        title(&self.profile, self.label.as_deref())
    }

    /// The event that introduces the job to a watcher that has not seen it: its
    /// `agent_queued` while it waits, its `agent_started` once it runs (or ran).
    pub fn introduction(&self) -> Event {
        let intro = AgentIntro {
            agent: self.id.0.clone(),
            parent: self.parent.as_ref().map(|p| p.0.clone()),
            profile: self.profile.clone(),
            task: summarize(&self.task),
            label: self.label.clone(),
            mode: self.mode,
        };
        match self.phase {
            Phase::Queued => Event::AgentQueued(intro),
            Phase::Running(_) | Phase::Done(_) => Event::AgentStarted(intro),
        }
    }

    /// Marks the result delivered; `false` when it already was (a result goes to the
    /// parent once, through an await or a notification).
    pub(super) fn deliver(&mut self) -> bool {
        !std::mem::replace(&mut self.delivered, true)
    }
}

/// Sixteen hex digits from the process's random hash keys (drawn from the operating
/// system), a per-process counter, the clock and the process id: distinct across runs,
/// processes and machines.
pub(crate) fn random_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    hasher.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    format!("{:016x}", hasher.finish())
}

/// A profile with its spawn label, when there is one: `researcher (check the docs)`.
/// The one rendering of an agent's title (result blocks, lists, progress lines).
pub(crate) fn title(profile: &str, label: Option<&str>) -> String {
    match label {
        Some(label) => format!("{profile} ({label})"),
        None => profile.to_string(),
    }
}
