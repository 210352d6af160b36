//! A remote child's agents mirrored into the parent's run: their ids mapped onto
//! jobs of this tree, their starts and ends recorded through those jobs' handles,
//! their cost charged to the run as it is spent.
//!
//! When the child's job is tried again (its worker died), the sub-agents its earlier
//! attempt started stay in the tree: the retry cancelled their jobs, but some had
//! finished, and a sub-agent that finished is work done. Each is settled from its own
//! job in Redis once the child ends ([`Mirror::settle_earlier_attempts`]), so the tree
//! and the jobs Redis completed agree.

use std::collections::HashMap;
use std::time::Duration;

use super::client::RemoteQueue;
use super::wire::{job_id, Progress, CANCEL_GRACE};
use crate::events::{AgentIntro, Event, PersonRequest, SpawnMode};
use crate::jobs::mailbox::Letter;
use crate::jobs::{JobHandle, JobId};
use crate::outcome::AgentOutcome;

/// Maps a worker's agent ids onto this run's: the remote root is the child's own job,
/// each remote descendant a job registered in this tree under its mapped parent. The
/// remote agents' starts and ends go through their jobs' handles here, as a local
/// agent's do; their other events are republished under the mapped ids.
pub(super) struct Mirror<'a> {
    /// The child's job (the remote root).
    job: &'a JobHandle,
    /// Remote agent id → this run's job id.
    ids: HashMap<String, JobId>,
    /// The mirrored descendants not yet finished.
    descendants: HashMap<JobId, JobHandle>,
    /// Each remote agent's cost so far (its `usage` events are cumulative).
    costs: HashMap<String, f64>,
    /// What this attempt's agents have cost, charged to the tree as it was spent.
    pub(super) charged: f64,
    /// The worker's run of this attempt and its root agent's id there: the root's
    /// children run as jobs `RUN-AGENT`.
    attempt: Option<(String, String)>,
    /// The job in Redis of each mirrored child of a remote root, every attempt's.
    by_job: HashMap<String, JobId>,
    /// What each mirrored agent was seen to cost, by this tree's id.
    seen_cost: HashMap<JobId, f64>,
    /// Unfinished descendants of earlier attempts.
    earlier: HashMap<JobId, JobHandle>,
    /// Messages forwarded to the remote agents, by number, until they read them.
    pub(super) forwarded: HashMap<u64, Letter>,
    /// Told of each letter left for a mirrored descendant.
    pub(super) letters: std::sync::Arc<tokio::sync::Notify>,
    /// Requests for a person the remote agents began waiting on (ids mapped), to
    /// be asked here; and those they stopped waiting on.
    pub(super) asked: Vec<PersonRequest>,
    pub(super) closed: Vec<String>,
}

impl<'a> Mirror<'a> {
    pub(super) fn new(job: &'a JobHandle) -> Mirror<'a> {
        Mirror {
            job,
            ids: HashMap::new(),
            descendants: HashMap::new(),
            costs: HashMap::new(),
            charged: 0.0,
            attempt: None,
            by_job: HashMap::new(),
            seen_cost: HashMap::new(),
            earlier: HashMap::new(),
            forwarded: HashMap::new(),
            letters: Default::default(),
            asked: Vec::new(),
            closed: Vec::new(),
        }
    }

    fn local(&self, remote: &str) -> Option<String> {
        self.ids.get(remote).map(|id| id.0.clone())
    }

    /// A mirrored descendant, whose letters go to its worker.
    fn register(&mut self, child: JobHandle) {
        child.place().mailbox.relay_to(self.letters.clone());
        self.descendants.insert(child.id().clone(), child);
    }

    /// The letters left for mirrored descendants, taken, each with the id its
    /// worker knows the agent by.
    pub(super) fn letters_for_descendants(&self) -> Vec<(String, Letter)> {
        let mut taken = Vec::new();
        for (remote, local) in &self.ids {
            if let Some(handle) = self.descendants.get(local) {
                let letters = handle.place().mailbox.take(u32::MAX);
                taken.extend(letters.into_iter().map(|l| (remote.clone(), l)));
            }
        }
        taken
    }

    pub(super) fn apply(&mut self, progress: Progress) {
        for event in progress.events {
            let mapped = match event {
                event @ (Event::InputRequested(_) | Event::InputAnswered(_)) => self.person(event),
                event => self.map(event, progress.run.as_deref()),
            };
            if let Some(event) = mapped {
                self.job.place().tree.events.publish(event);
            }
        }
    }

    /// The event with this run's ids, to republish; `None` for one that concerns no
    /// agent of this subtree, or a start or end (recorded through the job's handle,
    /// which publishes it; the child's own end is its caller's to record).
    fn map(&mut self, mut event: Event, run: Option<&str>) -> Option<Event> {
        let root = self.job.id();
        match &mut event {
            Event::AgentStarted(AgentIntro {
                agent,
                parent: None,
                ..
            }) => {
                // A (re)started remote root: a retry on another worker starts afresh.
                // What the earlier attempt spent stays charged: it was spent; what
                // it started is settled when the child ends.
                self.ids.clear();
                self.costs.clear();
                self.charged = 0.0;
                self.earlier.extend(self.descendants.drain());
                self.attempt = run.map(|run| (run.to_string(), agent.clone()));
                self.ids.insert(std::mem::take(agent), root.clone());
                self.job.start();
                return None;
            }
            Event::AgentQueued(intro) => {
                let AgentIntro {
                    agent,
                    parent,
                    profile,
                    task,
                    label,
                    mode,
                } = intro;
                let under = parent.as_ref().and_then(|p| self.ids.get(p));
                let place = match under.and_then(|id| self.descendants.get(id)) {
                    Some(parent) => parent.place(),
                    None => self.job.place(),
                };
                let mode = mode.unwrap_or(SpawnMode::Background);
                let child = place.child(profile, task, label.as_deref(), mode);
                if let Some((run, root)) = &self.attempt {
                    if parent.as_deref() == Some(root.as_str()) {
                        self.by_job.insert(job_id(run, agent), child.id().clone());
                    }
                }
                self.ids.insert(std::mem::take(agent), child.id().clone());
                self.register(child);
                return None;
            }
            Event::AgentStarted(AgentIntro { agent, .. }) => {
                let id = self.ids.get(agent.as_str())?;
                self.descendants.get(id)?.start();
                return None;
            }
            Event::AgentFinished { agent, .. } => {
                let id = self.ids.get(agent.as_str())?;
                if let (Some(descendant), Some(outcome)) =
                    (self.descendants.remove(id), event.outcome())
                {
                    descendant.finish(outcome);
                }
                return None;
            }
            Event::Usage {
                agent, cost_usd, ..
            } => {
                let before = self.costs.insert(agent.clone(), *cost_usd).unwrap_or(0.0);
                let spent = (*cost_usd - before).max(0.0);
                self.job.place().tree.budget.charge(spent);
                self.charged += spent;
                *agent = self.local(agent)?;
                self.seen_cost.insert(JobId(agent.clone()), *cost_usd);
            }
            Event::AgentMessage { .. } | Event::AgentMessageDelivered { .. } => {
                return self.map_message(event);
            }
            Event::Lagged { .. } => return None,
            other => {
                let agent = other.agent_mut()?;
                *agent = self.local(agent)?;
            }
        }
        Some(event)
    }

    /// A request for a person or its answer, with this run's ids; the request kept
    /// to be asked here, the answer's request to be closed here.
    fn person(&mut self, mut event: Event) -> Option<Event> {
        match &mut event {
            Event::InputRequested(request) => {
                request.agent = self.local(&request.agent)?;
                self.asked.push(request.clone());
            }
            Event::InputAnswered(answered) => {
                answered.agent = self.local(&answered.agent)?;
                self.closed.push(answered.request.clone());
            }
            _ => {}
        }
        Some(event)
    }

    /// A message event with this run's ids; `None` for a message sent from here (to
    /// the remote root, or forwarded to a descendant), announced here when it was
    /// sent. A remote agent's reading of one is told its sender.
    fn map_message(&mut self, mut event: Event) -> Option<Event> {
        let root = self.job.id().clone();
        // A message forwarded from here was announced here when it was sent.
        let forwarded = match &event {
            Event::AgentMessage { seq, .. } => Some(self.forwarded.contains_key(seq)),
            _ => None,
        };
        let agent = event.agent_mut()?;
        let to_root = self.ids.get(agent.as_str()) == Some(&root);
        if forwarded.is_some_and(|forwarded| forwarded || to_root) {
            return None;
        }
        *agent = self.local(agent)?;
        if let Event::AgentMessageDelivered { agent, seq, turn } = &event {
            self.delivered(agent.clone(), *seq, *turn);
        }
        Some(event)
    }

    /// Remote agent `to` (by this run's id) read forwarded message `seq` in its turn
    /// `turn`: its sender (an agent of this run) is told, as for a message read here.
    fn delivered(&mut self, to: String, seq: u64, turn: u32) {
        let Some(letter) = self.forwarded.remove(&seq) else {
            return;
        };
        let tree = &self.job.place().tree;
        if let Some(sender) = letter
            .sender
            .as_ref()
            .and_then(|id| tree.job(&JobId(id.clone())))
        {
            sender
                .mailbox
                .receipt(letter.seq, letter.receipt(&to, turn));
        }
    }

    /// Settles each sub-agent job that an earlier attempt of the child (job `owner`)
    /// started and its retry cancelled, from the job itself: completed, failed or
    /// cancelled as Redis has it (waiting up to [`CANCEL_GRACE`] for one still
    /// being cancelled), registered in the tree first if its start was never
    /// mirrored (its worker died before sending it). What one cost beyond what its
    /// events said is charged to the run.
    pub(super) async fn settle_earlier_attempts(&mut self, queue: &RemoteQueue, owner: &str) {
        let abandoned = match queue.abandoned(owner).await {
            Ok(abandoned) => abandoned,
            Err(error) => {
                tracing::warn!(job = %owner, "reading the earlier attempts' sub-agent jobs: {error:#}");
                return;
            }
        };
        for job in abandoned {
            let handle = match self.by_job.get(&job) {
                Some(id) => match self.earlier.remove(id) {
                    Some(handle) => handle,
                    // Its end was mirrored before its worker died.
                    None => continue,
                },
                None => match queue.profile_and_task(&job).await {
                    Some((profile, task)) => {
                        let place = self.job.place();
                        let handle = place.child(&profile, &task, None, SpawnMode::Background);
                        handle.start();
                        handle
                    }
                    // Removed before any worker took it: it never ran.
                    None => continue,
                },
            };
            let outcome = settled(queue, &job).await;
            let seen = self.seen_cost.get(handle.id()).copied().unwrap_or(0.0);
            self.job
                .place()
                .tree
                .budget
                .charge((outcome.cost_usd - seen).max(0.0));
            handle.finish(outcome);
        }
    }

    /// Ends mirrored descendants whose end was never seen (their worker died, or
    /// events were lost) as cancelled, so no job stays "running" in the report.
    pub(super) fn finish_descendants(&mut self) {
        let earlier: Vec<_> = self.earlier.drain().collect();
        for (_, descendant) in self.descendants.drain().chain(earlier) {
            descendant.finish(AgentOutcome {
                error: Some("its end was not reported by the worker".into()),
                ..AgentOutcome::cancelled_before_start()
            });
        }
    }
}

/// The outcome of sub-agent job `job` of an earlier attempt, as Redis has it: its end
/// (waiting up to [`CANCEL_GRACE`] while its worker cancels it), or cancelled before
/// it started when the retry removed it from the queue.
async fn settled(queue: &RemoteQueue, job: &str) -> AgentOutcome {
    if queue.profile_and_task(job).await.is_none() {
        return AgentOutcome {
            error: Some(
                "an earlier attempt's sub-agent: the retry removed it from the queue before it started".into(),
            ),
            ..AgentOutcome::cancelled_before_start()
        };
    }
    // The retry cancelled it when it began, well before this runs: only its end may
    // still be on its way.
    let deadline = tokio::time::Instant::now() + CANCEL_GRACE;
    loop {
        if let Ok(Some(end)) = queue.finished(job).await {
            return end.outcome;
        }
        if tokio::time::Instant::now() >= deadline {
            return AgentOutcome {
                error: Some(format!(
                    "an earlier attempt's sub-agent: the retry cancelled it, and its job had not ended within {} s",
                    CANCEL_GRACE.as_secs()
                )),
                ..AgentOutcome::cancelled_before_start()
            };
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
