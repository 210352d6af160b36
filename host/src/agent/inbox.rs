//! What reaches an agent between its turns besides its tool results: its finished
//! children's results, the receipts of messages it sent, and the messages sent to
//! it, in one user message before the turn; and an interrupt, which cuts the turn's
//! model request or tool wait.

use std::future::Future;
use std::time::SystemTime;

use tokio::sync::watch;

use super::runtime::Agent;
use crate::events::MessageMode;
use crate::jobs::mailbox::{Letter, Room};
use crate::jobs::mode::AgentMode;
use crate::jobs::JobId;
use crate::journal::{Fact, Record};
use crate::llm::{ChatRequest, Message, ToolCall};

/// The result of a tool call an interrupt cut.
const CUT_BY_INTERRUPT: &str = "cut by an interrupt (a message sent to you, which follows) before its result came back: it may or may not have taken effect";

/// `work`'s output, or `None` when an interrupt comes first (`work` is then dropped,
/// as a cancelled call is).
pub(super) async fn unless_interrupted<T>(
    interrupts: &mut watch::Receiver<u64>,
    work: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        value = work => Some(value),
        Ok(()) = interrupts.changed() => None,
    }
}

impl Agent {
    /// The receipts of this agent's messages for turn `turn`: those that came, or in
    /// a replay those its recording had then (waited for, as their agents replay).
    async fn receipts_before(&self, turn: u32) -> Vec<(u64, String)> {
        let recorded = match self.mode() {
            AgentMode::Replayed(_, Some(agent)) => agent.response(turn).map(|r| &r.receipts),
            _ => None,
        };
        match recorded {
            Some(seqs) if seqs.is_empty() => Vec::new(),
            Some(seqs) => {
                let within = std::time::Duration::from_secs(10);
                self.place.mailbox.take_receipts_of(seqs, within).await
            }
            None => self.place.mailbox.take_receipts(),
        }
    }

    /// Before turn `turn`: adds to `request` what reached this agent since its last
    /// one (finished children's results, receipts, messages), in one user message.
    /// Returns the ids of the children whose results it carries, and the numbers of
    /// the messages whose receipts it carries.
    pub(super) async fn before_turn(
        &self,
        request: &mut ChatRequest,
        turn: u32,
    ) -> (Vec<String>, Vec<u64>) {
        let (notified, notes) = self.finished_children_notes(turn).await;
        let mut parts = Vec::new();
        if !notes.is_empty() {
            parts.push(format!(
                "<agent_notifications>\nThese background sub-agents finished:\n\n{notes}\n</agent_notifications>"
            ));
        }
        let receipts = self.receipts_before(turn).await;
        if !receipts.is_empty() {
            let texts: Vec<&str> = receipts.iter().map(|(_, text)| text.as_str()).collect();
            parts.push(format!(
                "<message_receipts>\n{}\n</message_receipts>",
                texts.join("\n")
            ));
        }
        let letters = self.place.mailbox.take(turn);
        if !letters.is_empty() {
            self.delivered(&letters, turn);
            parts.extend(letters.iter().map(letter_text));
        }
        if !parts.is_empty() {
            request.messages.push(Message::User(parts.join("\n\n")));
        }
        (notified, receipts.iter().map(|(seq, _)| *seq).collect())
    }

    /// `letters` reach this agent in turn `turn`'s request: each is announced, and its
    /// sender gets a receipt.
    fn delivered(&self, letters: &[Letter], turn: u32) {
        let tree = &self.place.tree;
        for letter in letters {
            // Journaled before the turn's model response, in order: a resumed run
            // reads it back at the same turn, never twice.
            tree.happened(Fact::Recorded(Record::MessageDelivered {
                agent: self.place.id.0.clone(),
                seq: letter.seq,
                turn,
            }));
            let sender = letter.sender.clone().and_then(|id| tree.job(&JobId(id)));
            if let Some(sender) = sender {
                sender
                    .mailbox
                    .receipt(letter.seq, letter.receipt(&self.place.id.0, turn));
            }
        }
    }

    /// Whether the recording this agent is resumed or replayed from says an interrupt
    /// cut its turn `turn`.
    pub(super) fn recorded_as_cut(&self, turn: u32) -> bool {
        match self.mode() {
            AgentMode::Resumed(Some(recorded)) | AgentMode::Replayed(_, Some(recorded)) => {
                recorded.was_cut(turn)
            }
            _ => false,
        }
    }

    /// In a resumed run, leaves the messages an earlier process accepted for this
    /// agent in its mailbox again: each it had read, for the turn it read it in (its
    /// history is rebuilt as it was); each it had not, for the turn after its last
    /// recorded one.
    /// In a replay, each is left for the turn the recording read it in; one the
    /// recorded agent never read is left unread again.
    pub(super) fn restore_letters(&self) {
        let (recorded, unread) = match self.mode() {
            AgentMode::Resumed(Some(recorded)) => (recorded, recorded.turns() + 1),
            AgentMode::Replayed(_, Some(recorded)) => (recorded, u32::MAX),
            _ => return,
        };
        let replayed = matches!(self.mode(), AgentMode::Replayed(..));
        for letter in &recorded.letters {
            // In a replay, a follow-up an agent sent to wake this one after it finished
            // is left when the sender's call is replayed, so this one rests first.
            if replayed && recorded.woken_by(letter) {
                continue;
            }
            let restored = Letter::recorded(letter, letter.delivered.unwrap_or(unread));
            // Accepted before: no limit refuses it now.
            let _ = self.place.mailbox.post(restored, Room::UNBOUNDED, || {});
        }
    }

    /// An interrupt cut the tool calls of a turn: each gets a result saying so.
    pub(super) fn interrupted_calls(&self, calls: &[ToolCall], request: &mut ChatRequest) {
        tracing::info!(agent = %self.place.id, calls = calls.len(), "an interrupt cut the turn's tool calls");
        for call in calls {
            request.messages.push(Message::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: CUT_BY_INTERRUPT.to_string(),
                is_error: true,
            });
        }
    }
}

/// A message as its agent reads it: who sent it, when, and how, clearly marked.
fn letter_text(letter: &Letter) -> String {
    let sent = letter
        .sent
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let how = match letter.mode {
        MessageMode::Queue => "queued for your next turn",
        MessageMode::Interrupt => "an interrupt: your last step was cut to deliver it",
        MessageMode::FollowUp => "a follow-up: answer it, with what you did before in mind",
    };
    format!(
        "<agent_message seq=\"{}\" from=\"{}\" sent_unix=\"{sent}\" mode=\"{}\">\nA message to you ({how}), not a tool result:\n{}\n</agent_message>",
        letter.seq,
        letter.from,
        letter.mode.as_str(),
        letter.text
    )
}
