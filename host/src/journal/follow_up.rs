//! A person's follow-up to an agent of a run that no process runs (`warren resume
//! RUN --follow-up AGENT TEXT`): checked against the journal and the limits, then
//! recorded as the run's next message, so the resumed run brings the agent back
//! (each ancestor that had finished replayed from its record) and the agent reads it
//! at its recorded end and answers live.

use super::record::Record;
use super::resume::Resume;
use crate::config::RunLimits;
use crate::events::MessageMode;
use crate::outcome::AgentState;

/// A follow-up to agent `agent` of a journaled run, from `from`.
#[derive(Clone, Debug)]
pub(crate) struct FollowUp {
    /// The agent's id.
    pub(crate) agent: String,
    /// The message.
    pub(crate) text: String,
    /// Who sends it (a person).
    pub(crate) from: String,
}

impl Resume {
    /// The record that sends `follow_up` (the run's next message), or why it cannot
    /// be sent: no such agent, one that ended other than ok or ran on a worker, over
    /// `max_follow_ups` or `max_message_kb`.
    pub(crate) fn follow_up(
        &self,
        follow_up: &FollowUp,
        limits: &RunLimits,
    ) -> anyhow::Result<Record> {
        let run = &self.run;
        let Some(agent) = self.agent(&follow_up.agent) else {
            anyhow::bail!(
                "run {run} has no agent `{}` (`warren show {run}` lists its agents)",
                follow_up.agent
            );
        };
        let id = &agent.intro.agent;
        if let Some(outcome) = agent
            .finished
            .as_ref()
            .filter(|o| o.state != AgentState::Ok)
        {
            anyhow::bail!(
                "agent {id} of run {run} ended {}: only an agent that finished ok takes a follow-up",
                outcome.state.as_str()
            );
        }
        if agent.finished.is_some() && !agent.ran_here() {
            anyhow::bail!(
                "agent {id} of run {run} ran on a worker: its conversation is there, so a follow-up after its run ended cannot resume it (send one while the run is live)"
            );
        }
        let taken = agent
            .letters
            .iter()
            .filter(|l| l.mode == MessageMode::FollowUp)
            .count();
        if taken >= limits.max_follow_ups {
            anyhow::bail!(
                "agent {id} of run {run} has taken {taken} follow-ups already (at most {}: [defaults] max_follow_ups)",
                limits.max_follow_ups
            );
        }
        let max = limits.max_message_kb * 1024;
        if follow_up.text.len() > max {
            anyhow::bail!(
                "the follow-up is {} bytes, over [defaults] max_message_kb = {} KiB",
                follow_up.text.len(),
                limits.max_message_kb
            );
        }
        anyhow::ensure!(!follow_up.text.trim().is_empty(), "the follow-up is empty");
        Ok(Record::MessageSent {
            agent: id.clone(),
            seq: self.max_message_seq + 1,
            from: format!("{} (a person)", follow_up.from),
            sender: None,
            mode: MessageMode::FollowUp,
            text: follow_up.text.clone(),
        })
    }
}
