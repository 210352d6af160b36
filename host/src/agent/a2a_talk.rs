//! What a remote A2A child says to people and to its senders: the question its
//! remote task asks (`INPUT_REQUIRED`), put to a person as `ask_person`'s are, and
//! the receipts of the messages it passes on.

use serde_json::json;

use super::a2a_wire::{failed, Stop};
use crate::events::{PersonRequest, RequestKind, Verdict};
use crate::jobs::mailbox::Letter;
use crate::jobs::{JobId, Placement};
use crate::journal::{Fact, Record};
use crate::scheduler::Scheduler;

/// The longest question put before a person, in characters.
const MAX_QUESTION: usize = 4000;

/// Who asks a person when the remote task waits for input.
pub(super) struct Asker<'a> {
    pub(super) scheduler: &'a Scheduler,
    pub(super) place: &'a Placement,
    /// `approval_timeout_s` of the child's profile.
    pub(super) timeout_s: u64,
    pub(super) profile: &'a str,
}

impl Asker<'_> {
    /// Remote task `task` (the child's `number`th) of the agent whose card is at
    /// `card` asks `asked`: a person's answer, as a question of this child, or why
    /// there is none.
    pub(super) async fn ask(
        &self,
        card: &str,
        number: u32,
        task: &str,
        asked: &str,
    ) -> Result<String, Stop> {
        let (asker, place) = (self, self.place);
        let call_id = format!("{}-{number}", crate::term::bounded(task, 100));
        let key = format!("{}/a2a/{call_id}/{asked}", place.id);
        let digest = xxhash_rust::xxh3::xxh3_64(key.as_bytes());
        let question = crate::term::bounded(
            &format!("(the remote A2A agent `{}` asks) {asked}", asker.profile),
            MAX_QUESTION,
        );
        let request = PersonRequest {
            id: format!("q{:08x}", digest >> 32),
            agent: place.id.0.clone(),
            path: place.tree.path(&place.id),
            kind: RequestKind::Question,
            tool: crate::config::ASK_TOOL.into(),
            call_id,
            arguments: json!({"question": asked, "a2a_task": task, "card": card}).to_string(),
            touches: Vec::new(),
            rule: Vec::new(),
            question: Some(question),
            deadline_ms: crate::events::now_ms() + asker.timeout_s.saturating_mul(1000),
        };
        let waiter = super::person_wait::Waiter {
            place,
            scheduler: asker.scheduler,
            timeout_s: asker.timeout_s,
            profile: asker.profile,
        };
        let answer = waiter.wait(request).await;
        match answer.verdict {
            Verdict::Answer if !answer.text.trim().is_empty() => Ok(answer.text),
            _ => Err(failed(format!(
                "the remote A2A agent asked for input (\"{}\"), and {}",
                crate::term::bounded(asked, 300),
                super::person_wait::unanswered(&answer)
            ))),
        }
    }
}

/// A message as the remote agent reads it: who sent it, and its text.
pub(super) fn letter_text(letter: &Letter) -> String {
    format!("Message from {}: {}", letter.from, letter.text)
}

/// `letter` reached the remote agent with its task `number` (`how`): journaled, and
/// its sender told.
pub(super) fn delivered(place: &Placement, letter: &Letter, number: u32, how: &str) {
    let tree = &place.tree;
    tree.happened(Fact::Recorded(Record::MessageDelivered {
        agent: place.id.0.clone(),
        seq: letter.seq,
        turn: number,
    }));
    tell_sender(place, letter, &format!("was delivered: {how}."));
}

/// The remote agent refused `letter` (`why`): its sender is told.
pub(super) fn refused(place: &Placement, letter: &Letter, why: &str) {
    tracing::warn!(agent = %place.id, seq = letter.seq, why, "the remote A2A agent refused a message");
    tell_sender(place, letter, &format!("was not delivered: {why}"));
}

/// Leaves `letter`'s sender (an agent) the receipt that the message `what`.
fn tell_sender(place: &Placement, letter: &Letter, what: &str) {
    let sender = letter
        .sender
        .clone()
        .and_then(|id| place.tree.job(&JobId(id)));
    if let Some(sender) = sender {
        let receipt = format!(
            "Your message #{} to {} ({}) {what}",
            letter.seq,
            place.id,
            letter.mode.as_str()
        );
        sender.mailbox.receipt(letter.seq, receipt);
    }
}
