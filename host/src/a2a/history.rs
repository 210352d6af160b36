//! A task's history: its run's transcript, read back from the run's journal, as
//! A2A messages. The root agent's records are what `warren show RUN --agent ROOT`
//! prints: what it was given (the client's message, `ROLE_USER`), each model
//! response (its text, and each tool call as a `toolCall` data part, `ROLE_AGENT`),
//! each tool result (a `toolResult` data part, `ROLE_AGENT`) and each message left
//! for it (`ROLE_USER`); besides them, every request for a person of any agent of
//! the tree (`ROLE_AGENT`) and its answer (`ROLE_USER`). The sub-agents' own work
//! stays in the journal (`warren show RUN --agent ID`); their progress is what the
//! task's status shows while it works.
//!
//! Bounded: a text part is cut at [`MAX_PART`] characters, and past [`MAX_HISTORY`]
//! messages the oldest after the first go.

use std::path::Path;

use serde_json::{json, Value};

use super::person::{request_message, verdict_text};
use crate::events::Verdict;
use crate::journal::record::Record;

/// The most messages a history holds.
pub(super) const MAX_HISTORY: usize = 1000;
/// The longest text of one part, in characters.
const MAX_PART: usize = 16 * 1024;

/// Which task a history is of: its ids, and its root agent's.
pub(super) struct Of<'a> {
    pub(super) task: &'a str,
    pub(super) context: &'a str,
    pub(super) root: &'a str,
}

/// The history of task `of`, from the journal at `path`; `first` (the client's
/// first message as sent) stands for the root's `agent_spec` when given.
pub(super) fn read(path: &Path, of: &Of<'_>, first: Option<&Value>) -> anyhow::Result<Vec<Value>> {
    let mut history = Vec::new();
    crate::journal::read::each_record(path, |line| {
        let number = history.len();
        if let Some(message) = message(&line.record, of, number, first) {
            push(&mut history, message);
        }
        Ok(())
    })?;
    Ok(history)
}

/// Adds `message` to `history`, dropping the oldest after the first past
/// [`MAX_HISTORY`].
pub(super) fn push(history: &mut Vec<Value>, message: Value) {
    if history.len() >= MAX_HISTORY {
        history.remove(1);
    }
    history.push(message);
}

/// The message `record` is in task `of`'s history (the `number`th), if any.
fn message(record: &Record, of: &Of<'_>, number: usize, first: Option<&Value>) -> Option<Value> {
    let mine = record.agent() == Some(of.root);
    let (role, parts) = match record {
        Record::AgentSpec { message, .. } if mine => {
            if let Some(first) = first {
                return Some(first.clone());
            }
            ("ROLE_USER", vec![text(message)])
        }
        Record::ModelResponse {
            text: said,
            tool_calls,
            ..
        } if mine => {
            let mut parts: Vec<Value> = Some(said)
                .filter(|said| !said.trim().is_empty())
                .map(|said| text(said))
                .into_iter()
                .collect();
            parts.extend(tool_calls.iter().map(|call| {
                let arguments = serde_json::from_str::<Value>(&call.arguments)
                    .unwrap_or_else(|_| json!(bounded(&call.arguments)));
                json!({"data": {"toolCall": {"id": call.id, "name": call.name, "arguments": arguments}}})
            }));
            ("ROLE_AGENT", parts)
        }
        Record::ToolFinished {
            call_id,
            outcome,
            content,
            ..
        } if mine => (
            "ROLE_AGENT",
            vec![json!({"data": {"toolResult": {
                "callId": call_id,
                "outcome": outcome,
                "content": bounded(content),
            }}})],
        ),
        Record::MessageSent {
            from,
            mode,
            text: said,
            ..
        } if mine => (
            "ROLE_USER",
            vec![text(&format!(
                "Message from {from} ({}): {said}",
                mode.as_str()
            ))],
        ),
        Record::InputRequested(request) => {
            let mut message = request_message(request);
            message["messageId"] = json!(format!("{}-{number}", of.task));
            return Some(stamped(message, of));
        }
        Record::InputAnswered(answered) => ("ROLE_USER", vec![text(&answer_text(answered))]),
        _ => return None,
    };
    if parts.is_empty() {
        return None;
    }
    let message = json!({
        "messageId": format!("{}-{number}", of.task),
        "role": role,
        "parts": parts,
    });
    Some(stamped(message, of))
}

/// An answer as the history shows it: a reply of this task's client in the words
/// it replies with (`approve`, `always`, `deny REASON`, the answer), any other
/// (`warren approve`, the web view, a deadline) saying who gave it.
fn answer_text(answered: &crate::events::Answered) -> String {
    let answer = &answered.answer;
    let reason = answer.text.trim();
    if answer.by == "a2a" {
        return match answer.verdict {
            Verdict::Approve => "approve".into(),
            Verdict::ApproveTool => "always".into(),
            Verdict::Deny if reason.is_empty() => "deny".into(),
            Verdict::Deny => format!("deny {reason}"),
            Verdict::Answer => reason.to_string(),
        };
    }
    format!(
        "{} {} request {} of agent {}{}",
        answer.by,
        verdict_text(answer.verdict),
        answered.request,
        answered.agent,
        match reason {
            "" => String::new(),
            reason => format!(": {reason}"),
        }
    )
}

fn text(said: &str) -> Value {
    json!({"text": bounded(said)})
}

fn bounded(said: &str) -> String {
    crate::term::bounded(said, MAX_PART)
}

fn stamped(mut message: Value, of: &Of<'_>) -> Value {
    message["taskId"] = json!(of.task);
    message["contextId"] = json!(of.context);
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_keeps_the_first_message_past_its_bound() {
        let mut history = vec![json!("first")];
        for n in 0..MAX_HISTORY + 10 {
            push(&mut history, json!(n));
        }
        assert_eq!(history.len(), MAX_HISTORY);
        assert_eq!(history[0], json!("first"));
        assert_eq!(history.last(), Some(&json!(MAX_HISTORY + 9)));
    }

    #[test]
    fn the_roots_records_are_messages_and_the_others_are_not() {
        let of = Of {
            task: "t1",
            context: "c1",
            root: "root",
        };
        let response = |agent: &str| Record::ModelResponse {
            agent: agent.into(),
            turn: 1,
            request_messages: 2,
            notified: Vec::new(),
            receipts: Vec::new(),
            drained: None,
            request_digest: None,
            text: "thinking".into(),
            reasoning: String::new(),
            refusal: None,
            provider_blocks: Vec::new(),
            tool_calls: vec![crate::journal::record::RecordedCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"/docs/a"}"#.into(),
            }],
            finish: "tool_calls".into(),
            input_tokens: 1,
            cached_input_tokens: 0,
            output_tokens: 1,
            cost_usd: 0.0,
        };
        let said = message(&response("root"), &of, 3, None).unwrap();
        assert_eq!(said["role"], "ROLE_AGENT");
        assert_eq!(said["messageId"], "t1-3");
        assert_eq!(said["parts"][0]["text"], "thinking");
        assert_eq!(
            said["parts"][1]["data"]["toolCall"]["arguments"]["path"],
            "/docs/a"
        );
        assert!(message(&response("child"), &of, 3, None).is_none());
    }
}
