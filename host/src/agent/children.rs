//! An agent's children as its loop meets them: results of finished background
//! children delivered before a turn, children still running awaited before the
//! agent may finish, and the wait itself (also `await_agents`'s), each a call to the
//! scheduler whose typed answer is put in words here.

use std::time::Duration;

use super::runtime::Agent;
use crate::jobs::mode::AgentMode;
use crate::jobs::{not_found_block, result_block, JobId};
use crate::journal::Drained;
use crate::llm::{ChatRequest, Message};
use crate::outcome::AgentState;
use crate::scheduler::{Report, Until};

/// The result blocks of a wait's reports, as the model reads them.
pub(crate) fn report_blocks(reports: &[Report]) -> String {
    reports
        .iter()
        .map(|report| match report {
            Report::Child(job) => result_block(job),
            Report::NotFound(id) => not_found_block(&id.0),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

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
        let recorded = match self.mode() {
            AgentMode::Replayed(_, Some(agent)) => {
                agent.response(next).and_then(|r| r.drained.clone())
            }
            // Brought back at an end it had recorded, so that a descendant could
            // read a follow-up sent after the run ended: it waits for its children's
            // new ends and keeps its recorded answer.
            AgentMode::Resumed(Some(agent)) if agent.ended_at(next - 1) => {
                if let Some(unfinished) = self.runtime.scheduler.unfinished(&self.place) {
                    let pending: Vec<JobId> = unfinished.delivered.into_iter().map(JobId).collect();
                    self.await_jobs(&pending, None, Until::All).await;
                }
                return Err(Ok(()));
            }
            _ => None,
        };
        let waited = match recorded {
            Some(waited) => waited,
            // Reports the running children and any finished ones not yet reported,
            // in one message, so no separate notification follows.
            None => match self.runtime.scheduler.unfinished(&self.place) {
                Some(unfinished) => unfinished,
                None => return Err(Ok(())),
            },
        };
        let pending: Vec<JobId> = waited.delivered.iter().cloned().map(JobId).collect();
        let blocks = self.await_jobs(&pending, None, Until::All).await;
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
        if let AgentMode::Replayed(_, Some(agent)) = self.mode() {
            if let Some(recorded) = agent.response(turn) {
                if recorded.notified.is_empty() {
                    return (Vec::new(), String::new());
                }
                let ids: Vec<JobId> = recorded.notified.iter().cloned().map(JobId).collect();
                let blocks = self.await_jobs(&ids, None, Until::All).await;
                return (recorded.notified.clone(), blocks);
            }
        }
        let jobs = self.runtime.scheduler.finished(&self.place);
        let ids = jobs.iter().map(|job| job.id.0.clone()).collect();
        let blocks = jobs
            .iter()
            .map(result_block)
            .collect::<Vec<_>>()
            .join("\n\n");
        (ids, blocks)
    }

    /// Waits for `ids` (all, or the first with `Until::Any`), up to `timeout`, and
    /// returns their result blocks.
    pub(crate) async fn await_jobs(
        &self,
        ids: &[JobId],
        timeout: Option<Duration>,
        until: Until,
    ) -> String {
        let reports = self
            .runtime
            .scheduler
            .wait(&self.parent(), ids, until, timeout)
            .await;
        report_blocks(&reports)
    }
}
