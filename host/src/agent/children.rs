//! An agent's children as its loop meets them: results of finished background
//! children delivered before a turn, children still running awaited before the
//! agent may finish, and the wait itself (also `await_agents`'s).

use std::time::Duration;

use futures_util::future::join_all;

use super::runtime::Agent;
use crate::jobs::{not_found_block, result_block, JobId, Phase};
use crate::journal::Drained;
use crate::llm::{ChatRequest, Message};
use crate::outcome::AgentState;

impl Agent {
    /// The model answered without tool calls: ends the conversation (`Err(Ok)`)
    /// unless children still run, whose results (and any not yet delivered) are then
    /// awaited and added to `request` for turn `next` (`Ok`: whom it named running and
    /// whose results it was given). A replay waits for the children the recording
    /// did at that turn, and names those it named.
    pub(super) async fn drain_children(
        &self,
        request: &mut ChatRequest,
        next: u32,
    ) -> Result<Drained, Result<(), (AgentState, String)>> {
        let recorded = self
            .replaying()
            .then(|| {
                self.tree
                    .recorded(&self.id)?
                    .response(next)?
                    .drained
                    .clone()
            })
            .flatten();
        let waited = match recorded {
            Some(waited) => waited,
            None => {
                let children = self.tree.children(&self.id);
                let running: Vec<String> = children
                    .iter()
                    .filter(|job| !matches!(job.phase, Phase::Done(_)))
                    .map(|job| job.id.0.clone())
                    .collect();
                if running.is_empty() {
                    return Err(Ok(()));
                }
                // Report the running children and any finished ones not yet
                // reported, in one message, so no separate notification follows.
                let delivered = children
                    .into_iter()
                    .filter(|job| !job.delivered)
                    .map(|job| job.id.0)
                    .collect();
                Drained { running, delivered }
            }
        };
        let pending: Vec<JobId> = waited.delivered.iter().cloned().map(JobId).collect();
        let blocks = self.await_jobs(&pending, None, false).await;
        request.messages.push(Message::User(format!(
            "You were about to finish while sub-agents were still running ({}). Nothing is abandoned: \
             these are their results. Take them into account and give your final answer.\n\n{blocks}",
            waited.running.join(", ")
        )));
        Ok(waited)
    }

    /// Result blocks of children that finished and were not yet reported before turn
    /// `turn`, with their ids; in a replay, those the recording reported then, once
    /// they finish.
    pub(super) async fn finished_children_notes(&self, turn: u32) -> (Vec<String>, String) {
        if self.replaying() {
            if let Some(recorded) = self.tree.recorded(&self.id).and_then(|r| r.response(turn)) {
                if recorded.notified.is_empty() {
                    return (Vec::new(), String::new());
                }
                let ids: Vec<JobId> = recorded.notified.iter().cloned().map(JobId).collect();
                let blocks = self.await_jobs(&ids, None, false).await;
                return (recorded.notified.clone(), blocks);
            }
        }
        let jobs = self.tree.take_finished_undelivered(&self.id);
        let ids = jobs.iter().map(|job| job.id.0.clone()).collect();
        let blocks = jobs
            .iter()
            .map(result_block)
            .collect::<Vec<_>>()
            .join("\n\n");
        (ids, blocks)
    }

    /// Waits for `ids` (all, or the first with `any`), up to `timeout`, and returns
    /// their result blocks.
    pub(crate) async fn await_jobs(
        &self,
        ids: &[JobId],
        timeout: Option<Duration>,
        any: bool,
    ) -> String {
        let mut waits = Vec::new();
        for id in ids {
            if let Some(job) = self
                .tree
                .job(id)
                .filter(|j| j.parent.as_ref() == Some(&self.id))
            {
                let mut done = job.done.clone();
                waits.push(Box::pin(async move {
                    let _ = done.wait_for(|finished| *finished).await;
                }));
            }
        }
        if !waits.is_empty() {
            let wait = async move {
                if any {
                    futures_util::future::select_all(waits).await;
                } else {
                    join_all(waits).await;
                }
            };
            let waiting = self.step_aside();
            match timeout {
                Some(limit) => {
                    let _ = tokio::time::timeout(limit, wait).await;
                }
                None => wait.await,
            }
            waiting.rejoin(self).await;
        }
        ids.iter()
            .map(|id| {
                match self
                    .tree
                    .job(id)
                    .filter(|j| j.parent.as_ref() == Some(&self.id))
                {
                    Some(job) => {
                        if matches!(job.phase, Phase::Done(_)) {
                            self.tree.mark_delivered(id);
                        }
                        result_block(&job)
                    }
                    None => not_found_block(&id.0),
                }
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// This agent only waits for its sub-agents from now until [`Waiting::rejoin`]:
    /// it gives back its concurrency slots (or, as a root, is counted as waiting, so
    /// a worker takes another job in its place).
    fn step_aside(&self) -> Waiting {
        // Only a root has no spawning call above it.
        if self.parent_span.is_none() {
            return Waiting::Root {
                _counted: self.runtime.slots.root_waits(),
            };
        }
        match self.lease.step_aside() {
            Some(rejoin) => Waiting::Child(rejoin),
            None => Waiting::Unslotted,
        }
    }
}

/// What an agent waiting for its sub-agents gave up.
enum Waiting {
    /// Counted as waiting until dropped.
    Root {
        _counted: crate::jobs::slots::RootWaiting,
    },
    Child(crate::jobs::slots::Rejoin),
    Unslotted,
}

impl Waiting {
    /// The wait is over: takes the slots again (ahead of waiting spawns).
    async fn rejoin(self, agent: &Agent) {
        if let Waiting::Child(rejoin) = self {
            rejoin.rejoin(&agent.lease, &agent.cancel).await;
        }
    }
}
