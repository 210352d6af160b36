//! A person in the loop: a call its profile's approval rule names waits for a
//! person's yes, and `ask_person` waits for a person's answer. While it waits the
//! agent holds no concurrency slot (the scheduler lends it out, as for
//! `await_agents`); the request is journaled before the wait and its answer before
//! the call runs, so after a crash `warren resume` asks the same request again (not
//! the model), and a call approved runs once. A deadline (`approval_timeout_s`) denies
//! a request nobody answers; a run nobody watches answers by its `--approve` policy.

use std::time::Duration;

use serde_json::{json, Value};

use super::runtime::Agent;
use crate::config::{approval_touches, ASK_TOOL};
use crate::events::{Answered, PersonAnswer, PersonRequest, RequestKind, Verdict};
use crate::jobs::Opened;
use crate::journal::{Fact, Journaling, Record};
use crate::llm::{ToolCall, ToolDefinition};

/// The longest text `ask_person` puts before a person (the question and its
/// choices), in bytes.
const MAX_QUESTION_BYTES: usize = 4096;
/// The most choices `ask_person` offers.
const MAX_CHOICES: usize = 16;

/// The text `ask_person`'s `arguments` put before a person: the question and its
/// choices, refused (naming the argument) when it is malformed or longer than
/// [`MAX_QUESTION_BYTES`], before any request is made.
fn question_text(arguments: &str) -> Result<String, String> {
    let args: Value =
        serde_json::from_str(arguments).map_err(|e| format!("the arguments are not JSON: {e}"))?;
    let question = args["question"]
        .as_str()
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or("`question` (a non-empty string) is required")?;
    let choices = match &args["choices"] {
        Value::Null => Vec::new(),
        Value::Array(list) if list.len() > MAX_CHOICES => {
            return Err(format!(
                "`choices` has {} items; at most {MAX_CHOICES}",
                list.len()
            ))
        }
        Value::Array(list) => list
            .iter()
            .map(|c| c.as_str().map(str::trim))
            .collect::<Option<Vec<_>>>()
            .ok_or("`choices` must be a list of strings")?,
        _ => return Err("`choices` must be a list of strings".into()),
    };
    let mut text = question.to_string();
    if !choices.is_empty() {
        text.push_str(&format!(" (choices: {})", choices.join(" / ")));
    }
    if text.len() > MAX_QUESTION_BYTES {
        return Err(format!(
            "the question and its choices are {} bytes; at most {MAX_QUESTION_BYTES} in all",
            text.len()
        ));
    }
    Ok(text)
}

/// `ask_person` as the model sees it, when `profile` names it.
pub(crate) fn ask_definition(profile: &crate::config::Profile) -> Option<ToolDefinition> {
    profile.tools.allows(ASK_TOOL).then(|| ToolDefinition {
        name: ASK_TOOL.into(),
        description: "Ask a person a question and wait for the answer (the person may take minutes, or not answer before the deadline). Use it only when you cannot go on without a decision or a fact only a person has.".into(),
        input_schema: std::sync::Arc::new(json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "the question, complete: the person sees nothing else of your work"},
                "choices": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_CHOICES, "description": "answers to offer, when there are a few (the question and its choices at most 4 KiB in all)"}
            },
            "required": ["question"],
            "additionalProperties": false
        })),
    })
}

impl Agent {
    /// Whether `call` may run. `None`: no approval is needed, or a person gave it;
    /// `Some(reason)`: it may not, and the model is told `reason`.
    pub(super) async fn approval(&self, call: &ToolCall, turn: u32) -> Option<String> {
        let capabilities = &self.access.profile.capabilities;
        let rule = self
            .profile
            .approval
            .rule
            .matches(&call.name, capabilities)?;
        let requests = &self.place.tree.requests;
        if requests.tool_approved(&call.name) {
            return None;
        }
        let request = self.request(call, turn, RequestKind::Approval, |request| {
            request.touches = approval_touches(&call.name, capabilities);
            request.rule = rule;
        });
        let answer = self.wait_for_person(request).await;
        match answer.verdict {
            Verdict::Approve | Verdict::ApproveTool => None,
            Verdict::Deny | Verdict::Answer => Some(denial(&answer)),
        }
    }

    /// `ask_person`: the question goes to a person and the answer comes back as the
    /// result (`Err`: bad arguments, or no answer).
    pub(super) async fn ask_person(&self, call: &ToolCall, turn: u32) -> Result<String, String> {
        let text = question_text(&call.arguments)?;
        let request = self.request(call, turn, RequestKind::Question, |request| {
            request.question = Some(text);
        });
        let answer = self.wait_for_person(request).await;
        match answer.verdict {
            Verdict::Answer if answer.by != "policy" || !answer.text.is_empty() => {
                Ok(format!("{} answered: {}", answer.by, answer.text))
            }
            _ => Err(unanswered(&answer)),
        }
    }

    /// The request `call` makes, its id the same whenever this call is asked (a
    /// resumed run asks the one it recorded).
    fn request(
        &self,
        call: &ToolCall,
        turn: u32,
        kind: RequestKind,
        fill: impl FnOnce(&mut PersonRequest),
    ) -> PersonRequest {
        let agent = &self.place.id.0;
        let key = format!("{agent}/{turn}/{}", call.id);
        let digest = xxhash_rust::xxh3::xxh3_64(key.as_bytes());
        let timeout = Duration::from_secs(self.profile.approval.timeout_s);
        let mut request = PersonRequest {
            id: format!("q{:08x}", digest >> 32),
            agent: agent.clone(),
            path: self.place.tree.path(&self.place.id),
            kind,
            tool: call.name.clone(),
            call_id: call.id.clone(),
            arguments: call.arguments.clone(),
            touches: Vec::new(),
            rule: Vec::new(),
            question: None,
            deadline_ms: crate::events::now_ms() + timeout.as_millis() as u64,
        };
        fill(&mut request);
        request
    }

    /// Asks a person `request` and waits for the answer without a slot.
    async fn wait_for_person(&self, request: PersonRequest) -> PersonAnswer {
        let waiter = Waiter {
            place: &self.place,
            scheduler: &self.runtime.scheduler,
            timeout_s: self.profile.approval.timeout_s,
            profile: &self.profile.name,
        };
        waiter.wait(request).await
    }
}

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
fn refused(why: String, by: &str) -> PersonAnswer {
    PersonAnswer {
        verdict: Verdict::Deny,
        text: why,
        by: by.into(),
    }
}

/// What the model is told of a denial.
fn denial(answer: &PersonAnswer) -> String {
    match answer.by.as_str() {
        by @ ("policy" | "deadline" | "limit" | "cancel") => format!(
            "denied ({by}): this call needs a person's approval, and it was not given: {}",
            reason(answer)
        ),
        by => format!("denied by a person ({by}): {}", reason(answer)),
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
fn reason(answer: &PersonAnswer) -> &str {
    match answer.text.trim() {
        "" => "no reason given",
        text => text,
    }
}

#[cfg(test)]
mod tests {
    use super::question_text;

    #[test]
    fn a_question_is_composed_with_its_choices_and_refused_when_malformed() {
        assert_eq!(
            question_text(r#"{"question": " Which? ", "choices": ["a", "b"]}"#).unwrap(),
            "Which? (choices: a / b)"
        );
        for (arguments, says) in [
            (r#"{"question": "  "}"#, "`question`"),
            (r#"{"question": "Q", "choices": "a"}"#, "list of strings"),
            (
                r#"{"question": "Q", "choices": ["a", 2]}"#,
                "list of strings",
            ),
            ("not json", "not JSON"),
        ] {
            let refused = question_text(arguments).unwrap_err();
            assert!(refused.contains(says), "{arguments}: {refused}");
        }
        let exactly = format!(r#"{{"question": "{}"}}"#, "q".repeat(4096));
        assert_eq!(question_text(&exactly).unwrap().len(), 4096);
    }
}
