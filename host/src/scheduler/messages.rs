//! Messages to running agents: a parent (or an ancestor) leaves a message in a
//! descendant's mailbox, to be read at its next turn boundary or to cut its current
//! step; the answer is a receipt, never an error that ends the sender.

use std::time::SystemTime;

use std::sync::Arc;

use super::parts::{Parent, Scheduler};
use crate::events::MessageMode;
use crate::jobs::mailbox::{Letter, Posted, Room};
use crate::jobs::{Job, JobId, Phase, Tree};
use crate::journal::{Fact, Journaling, Record};
use crate::outcome::AgentState;

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
    /// The agent had finished: this follow-up resumed it, with its history, to read it
    /// in its next turn. Its new result is delivered as any child's.
    Resumed {
        /// Its number in the run.
        seq: u64,
    },
    /// It was not accepted, for this reason.
    Rejected(String),
}

impl Receipt {
    /// The receipt in one sentence, for a person (`warren send`, the web view).
    pub(crate) fn sentence(&self, to: &JobId) -> String {
        match self {
            Receipt::Queued { seq, behind: 0 } => {
                format!("queued: message #{seq} to {to} is read at its next turn boundary")
            }
            Receipt::Queued { seq, behind } => format!(
                "queued: message #{seq} to {to} is read at its next turn boundary, after {behind} earlier"
            ),
            Receipt::Resumed { seq } => format!(
                "resumed: {to} had finished; message #{seq} resumed it with its history"
            ),
            Receipt::Rejected(why) => format!("rejected: {why}"),
        }
    }
}

/// Who sends a message.
pub(crate) enum Sender<'a> {
    /// An agent, to one of its descendants.
    Agent(&'a Parent<'a>),
    /// A person (`warren send`, the web view), to any agent of the run.
    Person(&'a str),
    /// The run whose job this tree runs on a worker, to this tree's root: the
    /// message as numbered and signed there.
    Relayed {
        /// Who sent it there.
        from: &'a str,
        /// Its number there.
        seq: u64,
    },
}

impl Scheduler {
    /// Leaves `text` for `parent`'s descendant `to`, delivered as `mode` says (see
    /// [`Scheduler::message_from`]).
    pub(crate) async fn message(
        &self,
        parent: &Parent<'_>,
        to: &JobId,
        text: String,
        mode: MessageMode,
    ) -> Receipt {
        let tree = parent.place.tree.clone();
        self.message_from(&tree, Sender::Agent(parent), to, text, mode)
            .await
    }

    /// Leaves `text` from `sender` for agent `to` of `tree`, delivered as `mode` says;
    /// a follow-up to an agent that finished resumes it. The message is on disk (a
    /// journaled run's) before the receipt says it is queued.
    pub(crate) async fn message_from(
        &self,
        tree: &Arc<Tree>,
        sender: Sender<'_>,
        to: &JobId,
        text: String,
        mode: MessageMode,
    ) -> Receipt {
        let job = match admit(tree, &sender, to, &text, mode) {
            Ok(job) => job,
            Err(why) => return Receipt::Rejected(why),
        };
        let limits = &tree.limits;
        let room = Room {
            queued: limits.max_queued_messages,
            follow_ups: limits.max_follow_ups,
        };
        if let Err(why) = job.mailbox.accepts(mode, room) {
            return Receipt::Rejected(format!("agent {to}: {why}"));
        }
        let (seq, from, sender_id) = match &sender {
            Sender::Agent(parent) => (
                tree.next_message(),
                tree.path(&parent.place.id),
                Some(parent.place.id.0.clone()),
            ),
            Sender::Person(who) => (tree.next_message(), format!("{who} (a person)"), None),
            Sender::Relayed { from, seq } => (*seq, from.to_string(), None),
        };
        let letter = Letter {
            seq,
            from,
            sender: sender_id,
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
        match job.mailbox.post(letter, room, || tree.requeue(to)) {
            Ok(Posted::Waiting(behind)) => Receipt::Queued { seq, behind },
            Ok(Posted::Woke) => Receipt::Resumed { seq },
            // It ended meanwhile: the message is recorded as sent, and never read.
            Err(why) => Receipt::Rejected(format!("agent {to}: {why}")),
        }
    }
}

impl Scheduler {
    /// Leaves a replayed run's recorded `letter` for agent `to`, as the recording
    /// did (a follow-up wakes it if it rests), with no limit or receipt: it was
    /// accepted then.
    pub(crate) fn leave_as_recorded(&self, tree: &Arc<Tree>, to: &JobId, letter: Letter) {
        let Some(job) = tree.job(to) else {
            return;
        };
        tree.record(|| Record::MessageSent {
            agent: to.0.clone(),
            seq: letter.seq,
            from: letter.from.clone(),
            sender: letter.sender.clone(),
            mode: letter.mode,
            text: letter.text.clone(),
        });
        let _ = job
            .mailbox
            .post(letter, Room::UNBOUNDED, || tree.requeue(to));
    }
}

/// Agent `to` of `tree`, when `sender` may send it `text` in `mode`; else why not.
fn admit(
    tree: &Tree,
    sender: &Sender<'_>,
    to: &JobId,
    text: &str,
    mode: MessageMode,
) -> Result<Job, String> {
    if text.trim().is_empty() {
        return Err("the message is empty".into());
    }
    let limits = &tree.limits;
    if text.len() > limits.max_message_kb * 1024 {
        return Err(format!(
            "the message is {} bytes; a message may hold at most {} KiB ([defaults] max_message_kb)",
            text.len(),
            limits.max_message_kb
        ));
    }
    if to.0.len() > MAX_JOB_ID_BYTES {
        return Err(format!(
            "`job_id` is {} bytes: not a job id (ids are six hex digits, as spawn_agent answered)",
            to.0.len()
        ));
    }
    let Some(job) = tree.job(to) else {
        return Err(format!("there is no agent {to} in this run"));
    };
    if let Sender::Agent(parent) = sender {
        if !tree.descends_from(to, &parent.place.id) {
            return Err(format!(
                "agent {to} is not one of your sub-agents (nor one of theirs)"
            ));
        }
    }
    if let Phase::Done(outcome) = &job.phase {
        if outcome.state != AgentState::Ok {
            return Err(format!(
                "agent {to} ended {}: only an agent that finished ok can be resumed",
                outcome.state.as_str()
            ));
        }
        if mode != MessageMode::FollowUp {
            return Err(format!(
                "agent {to} has finished: a {} message reaches only a running agent (send mode \"follow_up\" to resume it with its history)",
                mode.as_str()
            ));
        }
        if let Some(why) = tree.budget.used_up() {
            return Err(format!("agent {to} cannot be resumed: {why}"));
        }
    }
    Ok(job)
}
