//! A remote child's agents mirrored into the parent's run: their ids mapped onto
//! jobs of this tree, their starts and ends recorded through those jobs' handles,
//! their cost charged to the run as it is spent.

use std::collections::HashMap;

use crate::events::{AgentIntro, Event, SpawnMode};
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
}

impl<'a> Mirror<'a> {
    pub(super) fn new(job: &'a JobHandle) -> Mirror<'a> {
        Mirror {
            job,
            ids: HashMap::new(),
            descendants: HashMap::new(),
            costs: HashMap::new(),
            charged: 0.0,
        }
    }

    fn local(&self, remote: &str) -> Option<String> {
        self.ids.get(remote).map(|id| id.0.clone())
    }

    pub(super) fn apply(&mut self, events: Vec<Event>) {
        for event in events {
            if let Some(event) = self.map(event) {
                self.job.place().tree.events.publish(event);
            }
        }
    }

    /// The event with this run's ids, to republish; `None` for one that concerns no
    /// agent of this subtree, or a start or end (recorded through the job's handle,
    /// which publishes it; the child's own end is its caller's to record).
    fn map(&mut self, mut event: Event) -> Option<Event> {
        let root = self.job.id();
        match &mut event {
            Event::AgentStarted(AgentIntro {
                agent,
                parent: None,
                ..
            }) => {
                // A (re)started remote root: a retry on another worker starts afresh.
                // What the earlier attempt spent stays charged: it was spent.
                self.ids.clear();
                self.costs.clear();
                self.charged = 0.0;
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
                self.ids.insert(std::mem::take(agent), child.id().clone());
                self.descendants.insert(child.id().clone(), child);
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
                self.job.place().tree.charge(spent);
                self.charged += spent;
                *agent = self.local(agent)?;
            }
            Event::Lagged { .. } => return None,
            other => {
                let agent = other.agent_mut()?;
                *agent = self.local(agent)?;
            }
        }
        Some(event)
    }

    /// Ends mirrored descendants whose end was never seen (their worker died, or
    /// events were lost) as cancelled, so no job stays "running" in the report.
    pub(super) fn finish_descendants(&mut self) {
        for (_, descendant) in self.descendants.drain() {
            descendant.finish(AgentOutcome {
                error: Some("its end was not reported by the worker".into()),
                ..AgentOutcome::cancelled_before_start()
            });
        }
    }
}
