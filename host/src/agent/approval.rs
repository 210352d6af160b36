//! A person in the loop: a call its profile's approval rule names waits for a
//! person's yes, and `ask_person` waits for a person's answer. While it waits the
//! agent holds no concurrency slot (the scheduler lends it out, as for
//! `await_agents`); the request is journaled before the wait and its answer before
//! the call runs, so after a crash `warren resume` asks the same request again (not
//! the model), and a call approved runs once. A deadline (`approval_timeout_s`) denies
//! a request nobody answers; a run nobody watches answers by its `--approve` policy.

use std::time::Duration;

use serde_json::{json, Value};

use super::person_wait::{reason, unanswered, Waiter};
use super::runtime::Agent;
use crate::config::{approval_touches, ASK_TOOL};
use crate::events::{PersonAnswer, PersonRequest, RequestKind, Verdict};
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
