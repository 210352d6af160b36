//! What an agent's `invoke_agent` span records of its work: what it was asked and
//! what it answered, as the GenAI conventions' messages and the plain input and output
//! trace UIs show, bounded.

use crate::events::RESULT_CHARS;
use crate::outcome::AgentOutcome;
use crate::term::bounded;

/// What an agent was asked, on its span: the GenAI conventions' messages and the plain
/// input trace UIs show, bounded. Only built when spans are exported.
pub(super) fn record_input(span: &tracing::Span, task: &str) {
    let asked = bounded(task, RESULT_CHARS);
    span.record("input.value", asked.as_str());
    span.record(
        "gen_ai.input.messages",
        serde_json::json!([{"role": "user", "parts": [{"type": "text", "content": asked}]}])
            .to_string(),
    );
}

/// What an agent answered (or why it failed), on its span, as [`record_input`].
pub(super) fn record_output(span: &tracing::Span, outcome: &AgentOutcome) {
    let answer = match &outcome.error {
        Some(error) if outcome.text.is_empty() => error.as_str(),
        _ => outcome.text.as_str(),
    };
    let answer = bounded(answer, RESULT_CHARS);
    span.record("output.value", answer.as_str());
    span.record(
        "gen_ai.output.messages",
        serde_json::json!([{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": outcome.state.as_str()}])
            .to_string(),
    );
}
