//! The job tree of one run: ids, phases, labels, the shared budget and the index of
//! each job's children. A job's phase changes only through its
//! [`JobHandle`](super::handle::JobHandle); everything here that writes is `pub(super)`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) use super::job::random_id;
pub(crate) use super::job::{title, CancelJob, Job, JobId, JobSelection, Phase};
use super::slots;
use crate::config::RunLimits;
use crate::events::{EventBus, SpawnMode};
use crate::journal::{Journal, Record, Resume};

/// Finished agents of one run that may keep their conversation for a follow-up at
/// once; one more ends for good, and a follow-up to it is refused.
pub(crate) const MAX_RESTING: u64 = 1024;

/// The shared state of one run (one agent tree).
pub(crate) struct Tree {
    /// Every job, the root included, with an index of each job's children.
    jobs: Mutex<Table>,
    /// Sub-agents running at once (`max_concurrent`).
    pub(crate) slots: Arc<slots::RunSlots>,
    /// The run's limits.
    pub limits: RunLimits,
    /// What the whole tree may spend, and has spent.
    pub budget: super::budget::Budget,
    /// Seeds job ids.
    next_id: AtomicU64,
    /// The number of the last message sent to one of its agents.
    messages: AtomicU64,
    /// The approvals and questions its agents wait on.
    pub(crate) requests: super::requests::Requests,
    /// Finished agents keeping their conversation for a follow-up (at most
    /// [`MAX_RESTING`]).
    resting: AtomicU64,
    /// Sub-agents spawned in this process (the root not counted): at most
    /// `max_agents - 1`.
    spawned: AtomicU64,
    /// Cancels the whole run.
    pub(crate) cancel: CancellationToken,
    /// Where the run's events go.
    pub events: EventBus,
    /// The run's id: random (16 hex digits) unless given. Its job ids derive from it,
    /// and it names the run in events, traces, `--json` and queue jobs.
    pub run_id: String,
    /// The queue job this run works for, on a worker (its sub-agent jobs are
    /// recorded under it, so a retry can cancel an earlier attempt's).
    pub(crate) queue_job: Option<String>,
    /// On a worker, the conversation its root opens with and the one it leaves.
    pub(crate) carried: super::carried::Carried,
    /// Where the run is journaled, when it is.
    pub(crate) journal: Option<Arc<Journal>>,
    /// How the run runs: live, resumed, replayed or forked.
    pub mode: super::mode::Mode,
    /// The system prompts this process has journaled (by digest).
    prompts: Mutex<std::collections::HashSet<String>>,
    /// The tool sets whose definitions this process has journaled (by names).
    tool_sets: Mutex<std::collections::HashSet<Vec<String>>>,
}

/// The jobs of a tree, indexed so that the per-turn questions (an agent's children,
/// how many sub-agents are active) cost what they return, not the tree's size.
#[derive(Default)]
struct Table {
    /// Every job by id.
    jobs: BTreeMap<JobId, Job>,
    /// Each parent's children, in creation order.
    children: HashMap<JobId, Vec<JobId>>,
    /// Sub-agents not yet done.
    active: usize,
}

impl Tree {
    /// An empty tree with `limits`.
    #[cfg(test)]
    pub(crate) fn new(limits: RunLimits) -> Arc<Tree> {
        Tree::for_queue_job(limits, None, None, None)
    }

    /// An empty tree with `limits` for queue job `queue_job`, named `run_id` (random
    /// when `None`).
    pub(crate) fn for_queue_job(
        limits: RunLimits,
        queue_job: Option<String>,
        run_id: Option<String>,
        journal: Option<Arc<Journal>>,
    ) -> Arc<Tree> {
        let run_id = run_id.unwrap_or_else(random_id);
        let events = match queue_job {
            Some(_) => EventBus::for_queue_job(&run_id),
            None => EventBus::new(&run_id),
        };
        Tree::build(limits, queue_job, run_id, journal, events)
    }

    /// An empty tree for an outside caller's session, named `run_id`: as
    /// [`Tree::for_queue_job`], with the smaller event buffer of a session.
    pub(crate) fn for_session(
        limits: RunLimits,
        run_id: String,
        journal: Option<Arc<Journal>>,
    ) -> Arc<Tree> {
        let events = EventBus::for_session(&run_id);
        Tree::build(limits, None, run_id, journal, events)
    }

    fn build(
        limits: RunLimits,
        queue_job: Option<String>,
        run_id: String,
        journal: Option<Arc<Journal>>,
        events: EventBus,
    ) -> Arc<Tree> {
        Arc::new(Tree {
            jobs: Mutex::default(),
            slots: slots::RunSlots::new(limits.max_concurrent),
            limits,
            budget: super::budget::Budget::new(limits.budget_usd),
            next_id: AtomicU64::new(id_seed(&run_id)),
            // On a worker, the job's agents also read messages numbered in the parent's
            // run: its own numbers start far above them, so a reading is never
            // mistaken for another's.
            messages: AtomicU64::new(if queue_job.is_some() { 1 << 40 } else { 0 }),
            requests: super::requests::Requests::new(limits.max_pending_requests, limits.answers),
            resting: AtomicU64::new(0),
            spawned: AtomicU64::new(0),
            cancel: CancellationToken::new(),
            events,
            run_id,
            queue_job,
            carried: Default::default(),
            journal,
            mode: super::mode::Mode::Live,
            tool_sets: Mutex::default(),
            prompts: Mutex::default(),
        })
    }

    /// A tree that replays the recording `resume` (a fork, named `run_id`, is
    /// journaled in `journal`; a replay is not); its jobs take their recorded ids; spending starts at nothing and each replayed response is charged
    /// as recorded, so budgets end the replay where they ended the run).
    pub(crate) fn replaying(
        limits: RunLimits,
        resume: Arc<Resume>,
        replay: super::mode::Replay,
        run_id: Option<String>,
        journal: Option<Arc<Journal>>,
    ) -> Arc<Tree> {
        let mut tree = Tree::for_queue_job(limits, None, run_id, journal);
        let fresh = Arc::get_mut(&mut tree).expect("a new tree has one owner");
        fresh.mode = super::mode::Mode::replaying(resume, replay);
        tree
    }

    /// The tree of run `resume.run`, continued by this process: the earlier
    /// processes' spending counts against its budget from the start.
    pub(crate) fn resumed(
        limits: RunLimits,
        journal: Arc<Journal>,
        resume: Arc<Resume>,
    ) -> Arc<Tree> {
        let mut tree = Tree::for_queue_job(limits, None, Some(resume.run.clone()), Some(journal));
        let fresh = Arc::get_mut(&mut tree).expect("a new tree has one owner");
        fresh.budget.charge(resume.spent_usd);
        // Its messages number on from those an earlier process recorded.
        fresh.messages = AtomicU64::new(resume.max_message_seq);
        // Tools a person approved for the rest of the run stay approved.
        for tool in resume.approved_tools() {
            fresh.requests.approve_tool(tool);
        }
        fresh.mode = super::mode::Mode::Resumed(resume);
        tree
    }

    /// An empty tree named `run_id`: it hands out the same job ids, in the same order,
    /// as every other tree of that name.
    #[cfg(test)]
    pub(crate) fn with_run_id(limits: RunLimits, run_id: &str) -> Arc<Tree> {
        Tree::for_queue_job(limits, None, Some(run_id.to_string()), None)
    }

    /// Registers a new job, queued; returns its id and the sender that marks it done.
    /// Only [`JobHandle`](super::handle::JobHandle) registers jobs.
    pub(super) fn insert(
        &self,
        parent: Option<&JobId>,
        profile: &str,
        task: &str,
        label: Option<&str>,
        mode: Option<SpawnMode>,
        cancel: CancellationToken,
    ) -> (
        JobId,
        Arc<watch::Sender<bool>>,
        Arc<super::mailbox::Mailbox>,
    ) {
        let mut jobs = self.jobs.lock().expect("job table poisoned");
        let recorded = self.mode.claim(parent, profile, task);
        let id = recorded.map(JobId).unwrap_or_else(|| loop {
            // A multiplicative hash of a counter: short, distinct, not sequential-looking.
            let n = self
                .next_id
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let id = JobId(format!("{:06x}", (n >> 40) & 0xff_ffff));
            let taken = self.mode.is_recorded(&id);
            if !jobs.jobs.contains_key(&id) && !taken {
                break id;
            }
        });
        let (sender, done) = watch::channel(false);
        let sender = Arc::new(sender);
        let mailbox = Arc::<super::mailbox::Mailbox>::default();
        if let Some(parent) = parent {
            jobs.children
                .entry(parent.clone())
                .or_default()
                .push(id.clone());
            jobs.active += 1;
        }
        jobs.jobs.insert(
            id.clone(),
            Job {
                id: id.clone(),
                parent: parent.cloned(),
                profile: profile.to_string(),
                task: task.to_string(),
                phase: Phase::Queued,
                created: Instant::now(),
                cancel,
                done,
                done_flag: sender.clone(),
                delivered: false,
                label: label.map(str::to_string),
                mode,
                mailbox: mailbox.clone(),
            },
        );
        (id, sender, mailbox)
    }

    /// Adds a placeholder job and returns its id: a run hands out ids in a sequence
    /// fixed by its id, so tests can know a child's id before a run of that id creates
    /// it ([`Tree::with_run_id`]).
    #[doc(hidden)]
    #[cfg(test)]
    pub(crate) fn add_for_tests(&self) -> JobId {
        self.insert(None, "test", "test", None, None, CancellationToken::new())
            .0
    }

    /// Moves job `id` to `phase`. Only [`JobHandle`](super::handle::JobHandle) does.
    pub(super) fn set_phase(&self, id: &JobId, phase: Phase) {
        let mut table = self.jobs.lock().expect("job table poisoned");
        let Some(job) = table.jobs.get_mut(id) else {
            return;
        };
        let ends = !matches!(job.phase, Phase::Done(_)) && matches!(phase, Phase::Done(_));
        let counted = job.parent.is_some();
        job.phase = phase;
        if ends && counted {
            table.active -= 1;
        }
    }

    /// Puts finished job `id` back in the queue: a follow-up resumes it. Its result
    /// is to be delivered again, and whoever waits for it waits for its next end.
    pub(crate) fn requeue(&self, id: &JobId) {
        let mut table = self.jobs.lock().expect("job table poisoned");
        let Some(job) = table.jobs.get_mut(id) else {
            return;
        };
        if !matches!(job.phase, Phase::Done(_)) {
            return;
        }
        job.phase = Phase::Queued;
        job.delivered = false;
        job.done_flag.send_replace(false);
        if job.parent.is_some() {
            table.active += 1;
        }
    }

    /// A copy of one job.
    pub(crate) fn job(&self, id: &JobId) -> Option<Job> {
        self.jobs
            .lock()
            .expect("job table poisoned")
            .jobs
            .get(id)
            .cloned()
    }

    /// Takes one of the run's places for a finished agent that keeps its conversation
    /// for a follow-up; `false` when all [`MAX_RESTING`] are taken (it ends for good).
    pub(crate) fn take_rest(&self) -> bool {
        self.resting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_RESTING).then_some(n + 1)
            })
            .is_ok()
    }

    /// Takes the place of one more sub-agent of this run, within `[defaults]
    /// max_agents` (the root holds one); why not when the run holds that many.
    pub(crate) fn take_agent_place(&self) -> Result<(), String> {
        let max = self.limits.max_agents as u64;
        self.spawned
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n + 1 < max).then_some(n + 1)
            })
            .map(drop)
            .map_err(|n| {
                format!(
                    "spawn refused: this run holds {} agents, the root included, the most it may ([defaults] max_agents = {max}); raise it in warren.toml for a larger tree",
                    n + 1
                )
            })
    }

    /// Gives back a place [`Tree::take_rest`] took: its agent was woken, or ended
    /// for good.
    pub(crate) fn give_back_rest(&self) {
        let _ = self
            .resting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// The number of the next message sent in this run (1, 2, …).
    pub(crate) fn next_message(&self) -> u64 {
        self.messages.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Whether job `id` descends from job `ancestor` (is its child, or a child's, …).
    pub(crate) fn descends_from(&self, id: &JobId, ancestor: &JobId) -> bool {
        let table = self.jobs.lock().expect("job table poisoned");
        let mut at = table.jobs.get(id).and_then(|job| job.parent.as_ref());
        while let Some(parent) = at {
            if parent == ancestor {
                return true;
            }
            at = table.jobs.get(parent).and_then(|job| job.parent.as_ref());
        }
        false
    }

    /// Cancels job `id` and its descendants (each job's token is a child of its
    /// parent's): the one way a job is cancelled by the agent that spawned it
    /// (`cancel_agent`) or by whoever watches the run. `caller`: the job asking, which
    /// may cancel only its own children; `None` for the run's owner, who may cancel any.
    pub(crate) fn cancel_job(&self, id: &JobId, caller: Option<&JobId>) -> CancelJob {
        let Some(job) = self
            .job(id)
            .filter(|job| caller.is_none() || job.parent.as_ref() == caller)
        else {
            return CancelJob::NotFound;
        };
        if matches!(job.phase, Phase::Done(_)) {
            return CancelJob::Finished(job);
        }
        job.cancel.cancel();
        CancelJob::Cancelled(job)
    }

    /// Copies of every job, in id order.
    pub(crate) fn jobs(&self) -> Vec<Job> {
        self.jobs
            .lock()
            .expect("job table poisoned")
            .jobs
            .values()
            .cloned()
            .collect()
    }

    /// The children of `parent`, in creation order.
    pub(crate) fn children(&self, parent: &JobId) -> Vec<Job> {
        let table = self.jobs.lock().expect("job table poisoned");
        table
            .children
            .get(parent)
            .into_iter()
            .flatten()
            .filter_map(|id| table.jobs.get(id).cloned())
            .collect()
    }

    /// The jobs `selection` names among `parent`'s: every child for `*`, else the ids
    /// as given (an id that is not a child is kept, for a `NOT FOUND` block).
    pub(crate) fn select(&self, parent: &JobId, selection: &JobSelection) -> Vec<JobId> {
        match selection {
            JobSelection::All => self
                .children(parent)
                .into_iter()
                .map(|job| job.id)
                .collect(),
            JobSelection::Ids(ids) => ids.clone(),
        }
    }

    /// Copies of `parent`'s children that finished and were not yet delivered, marked
    /// delivered now, in spawn order. Only those are copied: a parent of thousands of
    /// children would otherwise copy all of them on every turn.
    pub(crate) fn take_finished_undelivered(&self, parent: &JobId) -> Vec<Job> {
        let mut guard = self.jobs.lock().expect("job table poisoned");
        let table = &mut *guard;
        let Some(children) = table.children.get(parent) else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        for id in children {
            if let Some(job) = table.jobs.get_mut(id) {
                if matches!(job.phase, Phase::Done(_)) && job.deliver() {
                    taken.push(job.clone());
                }
            }
        }
        taken
    }

    pub(crate) fn mark_delivered(&self, id: &JobId) -> bool {
        let mut table = self.jobs.lock().expect("job table poisoned");
        table.jobs.get_mut(id).is_some_and(Job::deliver)
    }

    /// Sub-agents queued or running (the root excluded). A job's end is published
    /// before it stops counting, so none left means every end was published.
    pub(crate) fn active_subagents(&self) -> usize {
        self.jobs.lock().expect("job table poisoned").active
    }

    /// Journals `record` (when the run is journaled), without waiting.
    pub(crate) fn record(&self, record: impl FnOnce() -> Record) {
        if let Some((journal, record)) = self.to_journal(record) {
            journal.record(record);
        }
    }

    /// Journals `record` and waits until it is written (not synced): the end of a
    /// call that could have had an effect, so that a crash of the process after it
    /// cannot leave the call in doubt.
    pub(crate) async fn record_written(&self, record: impl FnOnce() -> Record) {
        if let Some((journal, record)) = self.to_journal(record) {
            journal.record_written(record).await;
        }
    }

    /// The journal and `record`, unless the run is not journaled or the record is in
    /// it already (a resumed run's journal has its earlier records; a fork's is new).
    fn to_journal(&self, record: impl FnOnce() -> Record) -> Option<(&Journal, Record)> {
        let journal = self.journal.as_ref()?;
        let record = record();
        (!self.mode.journaled(&record)).then_some((journal, record))
    }

    /// Journals the definitions of `tools` unless this process did already (so a
    /// set shared by a thousand agents is written once).
    pub(crate) fn record_tool_set(&self, names: &[String], tools: impl FnOnce() -> Record) {
        if self.journal.is_some() && first_time(&self.tool_sets, names) {
            self.record(tools);
        }
    }

    /// The digest naming system prompt `text` in the journal (`None` for no prompt),
    /// journaling the prompt unless this process did already (so a prompt shared by a
    /// thousand agents is written once).
    pub(crate) fn record_prompt(&self, text: &str) -> Option<String> {
        if text.is_empty() {
            return None;
        }
        let digest = crate::journal::record::prompt_digest(text);
        if self.journal.is_some() && first_time(&self.prompts, digest.as_str()) {
            self.record(|| Record::SystemPrompt {
                digest: digest.clone(),
                text: text.to_string(),
            });
        }
        Some(digest)
    }

    /// The path of job `id` from the root: each job's profile and id, `/` between.
    pub(crate) fn path(&self, id: &JobId) -> String {
        let table = self.jobs.lock().expect("job table poisoned");
        let mut parts = Vec::new();
        let mut at = Some(id.clone());
        while let Some(current) = at {
            match table.jobs.get(&current) {
                Some(job) => {
                    parts.push(format!("{}[{}]", job.profile, job.id));
                    at = job.parent.clone();
                }
                None => {
                    parts.push(current.0);
                    at = None;
                }
            }
        }
        parts.reverse();
        parts.join("/")
    }

    /// Journals `record` (when the run is journaled) and waits until it is on disk.
    pub(crate) async fn record_durably(&self, record: impl FnOnce() -> Record) {
        if let Some(journal) = &self.journal {
            journal.record_durably(record()).await;
        }
    }
}

/// Where a run's job-id sequence starts: a fixed function of the run's id (not the
/// process's random hasher), so a run of the same id hands out the same ids.
fn id_seed(run_id: &str) -> u64 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(run_id.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("a digest has 8 bytes"))
}

/// Whether `key` is new to `seen`, which then holds it.
fn first_time<K, Q>(seen: &Mutex<std::collections::HashSet<K>>, key: &Q) -> bool
where
    K: std::hash::Hash + Eq + std::borrow::Borrow<Q>,
    Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
{
    let mut seen = seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    !seen.contains(key) && seen.insert(key.to_owned())
}

#[cfg(test)]
mod tests;
