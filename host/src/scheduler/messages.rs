//! Messages to running agents: a parent (or an ancestor) leaves a message in a
//! descendant's mailbox, to be read at its next turn boundary or to cut its current
//! step; the answer is a receipt, never an error that ends the sender.

use std::time::SystemTime;

use super::parts::{Parent, Scheduler};
use crate::events::MessageMode;
use crate::jobs::mailbox::Letter;
use crate::jobs::{JobId, Phase};
use crate::journal::{Fact, Journaling, Record};

/// The longest `job_id` looked up (a job's id is six hex digits): a longer one is
/// refused without echoing it.
const MAX_JOB_ID_BYTES: usize = 64;

/// What became of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Receipt {
    /// It waits in the agent's mailbox (behind `behind` earlier ones) and is read at
    /// the agent's next turn boundary; an interrupt also cuts the agent's current step.
    Queued {
        /// Its number in the run.
        seq: u64,
        /// Messages waiting before it.
        behind: usize,
    },
    /// It was not accepted, for this reason.
    Rejected(String),
}

impl Scheduler {
    /// Leaves `text` for `parent`'s descendant `to`, delivered as `mode` says. The
    /// message is on disk (a journaled run's) before the receipt says it is queued.
    pub(crate) async fn message(
        &self,
        parent: &Parent<'_>,
        to: &JobId,
        text: String,
        mode: MessageMode,
    ) -> Receipt {
        let tree = &parent.place.tree;
        if text.trim().is_empty() {
            return Receipt::Rejected("the message is empty".into());
        }
        let limits = &tree.limits;
        if text.len() > limits.max_message_kb * 1024 {
            return Receipt::Rejected(format!(
                "the message is {} bytes; a message may hold at most {} KiB ([defaults] max_message_kb)",
                text.len(),
                limits.max_message_kb
            ));
        }
        if to.0.len() > MAX_JOB_ID_BYTES {
            return Receipt::Rejected(format!(
                "`job_id` is {} bytes: not a job id (ids are six hex digits, as spawn_agent answered)",
                to.0.len()
            ));
        }
        let Some(job) = tree.job(to) else {
            return Receipt::Rejected(format!("there is no agent {to} in this run"));
        };
        if !tree.descends_from(to, &parent.place.id) {
            return Receipt::Rejected(format!(
                "agent {to} is not one of your sub-agents (nor one of theirs)"
            ));
        }
        if let Phase::Done(outcome) = &job.phase {
            return Receipt::Rejected(format!(
                "agent {to} has ended ({}): a message reaches only an agent that is queued or running",
                outcome.state.as_str()
            ));
        }
        let most = limits.max_queued_messages;
        if let Err(why) = job.mailbox.accepts(most) {
            return Receipt::Rejected(format!("agent {to}: {why}"));
        }
        let seq = tree.next_message();
        let letter = Letter {
            seq,
            from: tree.path(&parent.place.id),
            sender: Some(parent.place.id.0.clone()),
            sent: SystemTime::now(),
            text,
            mode,
            due: 0,
        };
        let sent = Record::MessageSent {
            agent: to.0.clone(),
            seq,
            from: letter.from.clone(),
            sender: letter.sender.clone(),
            mode,
            text: letter.text.clone(),
        };
        tree.happened_as(Fact::Recorded(sent), Journaling::Durably)
            .await;
        match job.mailbox.post(letter, most) {
            Ok(behind) => Receipt::Queued { seq, behind },
            // It ended meanwhile: the message is recorded as sent, and never read.
            Err(why) => Receipt::Rejected(format!("agent {to}: {why}")),
        }
    }
}
