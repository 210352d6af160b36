//! Waiting for a person: a request is journaled, opened on the run's requests and
//! waited for without a slot (the scheduler lends it out), until an answer, the
//! deadline or a cancellation; its answer is journaled before it is acted on. An
//! agent's approvals and `ask_person` wait here (`approval`), and so does a
//! remote A2A child's question (`a2a_child`).

use std::time::Duration;

use crate::events::{Answered, PersonAnswer, PersonRequest, Verdict};
use crate::jobs::Opened;
use crate::journal::{Fact, Journaling, Record};

/// An agent that waits for a person: its job, the scheduler that lends its slot
/// out meanwhile, and its profile's deadline.
pub(super) struct Waiter<'a> {
    pub(super) place: &'a crate::jobs::Placement,
    pub(super) scheduler: &'a crate::scheduler::Scheduler,
    /// `approval_timeout_s` of its profile.
    pub(super) timeout_s: u64,
    /// Its profile's name.
    pub(super) profile: &'a str,
}

impl Waiter<'_> {
    /// Asks a person `request` and waits for the answer without a slot: journaled
    /// first (a resumed run's recorded request is asked again as it was, and one
    /// recorded answered is answered so), its answer journaled before it is acted on.
    pub(super) async fn wait(&self, request: PersonRequest) -> PersonAnswer {
        let tree = &self.place.tree;
        let recorded = tree.mode.recorded_request(&request.id);
        let (request, journaling) = match recorded {
            Some((_, Some(answer))) => return answer,
            Some((asked, None)) => (asked, Journaling::Not),
            None => (request, Journaling::Durably),
        };
        let (id, timeout_s) = (request.id.clone(), self.timeout_s);
        let deadline = request.deadline_ms;
        tracing::info!(agent = %self.place.id, request = %id, tool = %request.tool, "waiting for a person");
        // On disk and announced first: whoever is asked has the event to show.
        tree.happened_as(
            Fact::Recorded(Record::InputRequested(request.clone())),
            journaling,
        )
        .await;
        let opened = tree.requests.open(request);
        let answer = match opened {
            Opened::Answered(answer) => answer,
            Opened::Full(why) => refused(why, "limit"),
            Opened::Waiting(answer) => {
                let _open = Closing(&tree.requests, &id);
                let left = deadline.saturating_sub(crate::events::now_ms());
                let wait = async {
                    tokio::select! {
                        answer = answer => answer.ok(),
                        () = tokio::time::sleep(Duration::from_millis(left)) => None,
                    }
                };
                let cancel = self.place.cancel.clone();
                let waited = self.scheduler.aside(self.place, async {
                    tokio::select! {
                        answer = wait => Some(answer),
                        () = cancel.cancelled() => None,
                    }
                });
                match waited.await {
                    // Cancelled: the agent ends; nothing is decided.
                    None => return refused("the agent was cancelled while it waited".into(), "cancel"),
                    Some(Some(answer)) => answer,
                    Some(None) => refused(
                        format!("nobody answered within {timeout_s} s (approval_timeout_s of profile `{}`)", self.profile),
                        "deadline",
                    ),
                }
            }
        };
        tracing::info!(agent = %self.place.id, request = %id, verdict = ?answer.verdict, by = %answer.by, "a person's answer");
        let record = Record::InputAnswered(Answered {
            agent: self.place.id.0.clone(),
            request: id,
            answer: answer.clone(),
        });
        tree.happened_as(Fact::Recorded(record), Journaling::Durably)
            .await;
        answer
    }
}

/// Closes its request when the wait ends, however it ends.
struct Closing<'a>(&'a crate::jobs::requests::Requests, &'a str);

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        self.0.close(self.1);
    }
}

/// A denial by `by` for `why`.
pub(super) fn refused(why: String, by: &str) -> PersonAnswer {
    PersonAnswer {
        verdict: Verdict::Deny,
        text: why,
        by: by.into(),
    }
}

/// What the model is told of a question nobody answered, in [`denial`]'s words.
pub(super) fn unanswered(answer: &PersonAnswer) -> String {
    match answer.by.as_str() {
        by @ ("policy" | "deadline" | "limit" | "cancel") => format!(
            "no answer ({by}): this question needs a person, and none answered: {}",
            reason(answer)
        ),
        by => format!("declined by a person ({by}): {}", reason(answer)),
    }
}

/// A denial's reason as the person or the limit gave it.
pub(super) fn reason(answer: &PersonAnswer) -> &str {
    match answer.text.trim() {
        "" => "no reason given",
        text => text,
    }
}
