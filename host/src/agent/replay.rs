//! A resumed run's model turns: the journal record of a response, and a recorded
//! response turned back into the model's answer, so a turn the journal holds is not
//! asked again.

use crate::journal::resume::RecordedResponse;
use crate::journal::{Record, RecordedCall};
use crate::llm::{AssistantMessage, ChatRequest, FinishReason, ToolCall};

/// The journal record of turn `turn`'s `response` to `request`.
pub(super) fn record_response(
    agent: &crate::jobs::JobId,
    turn: u32,
    request: &ChatRequest,
    response: &crate::llm::ChatResponse,
) -> Record {
    let message = &response.message;
    Record::ModelResponse {
        agent: agent.0.clone(),
        turn,
        request_messages: request.messages.len(),
        request_digest: response.request_digest.clone(),
        text: message.text.clone(),
        reasoning: message.reasoning.clone(),
        refusal: message.refusal.clone(),
        provider_blocks: message.provider_blocks.clone(),
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| RecordedCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })
            .collect(),
        finish: match &response.finish {
            FinishReason::Stop => "stop".into(),
            FinishReason::ToolCalls => "tool_calls".into(),
            FinishReason::Length => "length".into(),
            FinishReason::ContentFilter => "content_filter".into(),
            FinishReason::Other(other) => other.clone(),
        },
        input_tokens: response.usage.input_tokens,
        cached_input_tokens: response.usage.cached_input_tokens,
        output_tokens: response.usage.output_tokens,
        cost_usd: response.cost_usd,
    }
}

/// A recorded response as the model's answer again (a resumed run asks nothing it
/// has an answer to).
pub(super) fn replayed_response(recorded: &RecordedResponse) -> crate::llm::ChatResponse {
    crate::llm::ChatResponse {
        message: AssistantMessage {
            text: recorded.text.clone(),
            tool_calls: recorded
                .tool_calls
                .iter()
                .map(|call| ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                })
                .collect(),
            reasoning: recorded.reasoning.clone(),
            refusal: recorded.refusal.clone(),
            provider_blocks: recorded.provider_blocks.clone(),
        },
        finish: match recorded.finish.as_str() {
            "stop" => FinishReason::Stop,
            "tool_calls" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_string()),
        },
        usage: recorded.usage,
        cost_usd: recorded.cost_usd,
        request_digest: recorded.request_digest.clone(),
    }
}
