//! Anthropic Messages (`POST {base_url}/messages`): the system prompt is a top-level
//! field, tools carry `input_schema`, calls are `tool_use` blocks and results go back
//! as `tool_result` blocks in a user message. Streaming events: `message_start`
//! (input usage), `content_block_start` / `content_block_delta` (`text_delta`,
//! `input_json_delta`) / `content_block_stop`, `message_delta` (stop reason, output
//! usage), `message_stop`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::sse::SseParser;
use super::transport::{api_key, excerpt, json_offset, malformed, Transport};
use super::{
    emit, emit_whole, AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason,
    LlmError, Message, ModelConfig, Price, StreamEvent, ToolCall, Usage,
};

/// The API version header this code speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` when the config sets none (the API requires one).
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A model behind the Anthropic Messages API.
pub struct Anthropic {
    /// HTTP, retries and error classification.
    transport: Transport,
    /// `{base_url}/messages`.
    url: String,
    /// For cost.
    price: Price,
    /// Output limit per call.
    max_tokens: u32,
    /// Whether to stream.
    stream: bool,
}

/// One content block being assembled from a stream.
enum Block {
    Text,
    ToolUse(ToolCall),
}

impl Anthropic {
    /// Builds the provider for model `name`; reads the API key from its variable.
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, LlmError> {
        let base = config
            .base_url
            .as_deref()
            .unwrap_or("https://api.anthropic.com/v1")
            .trim_end_matches('/');
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_string(), false)];
        headers.extend(
            api_key(name, config, "ANTHROPIC_API_KEY")?.map(|key| ("x-api-key", key, true)),
        );
        Ok(Anthropic {
            transport: Transport::new("anthropic", config, &headers)?,
            url: format!("{base}/messages"),
            price: config.price,
            max_tokens: config.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            stream: config.stream,
        })
    }

    /// The request body, as documented for Messages.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let mut messages: Vec<Value> = Vec::new();
        for message in &request.messages {
            match message {
                Message::User(text) => messages.push(json!({ "role": "user", "content": text })),
                Message::Assistant(assistant) => {
                    let mut content = Vec::new();
                    if !assistant.text.is_empty() {
                        content.push(json!({ "type": "text", "text": assistant.text }));
                    }
                    for call in &assistant.tool_calls {
                        // The API wants the input as an object; a malformed one from
                        // the model is passed as a string field so nothing is lost.
                        let input = serde_json::from_str::<Value>(&call.arguments)
                            .ok()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({ "_raw": call.arguments }));
                        content.push(json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": input }));
                    }
                    messages.push(json!({ "role": "assistant", "content": content }));
                }
                Message::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => {
                    let block = json!({ "type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error });
                    // Consecutive results share one user message, as the API requires.
                    match messages.last_mut() {
                        Some(last)
                            if last["role"] == "user"
                                && last["content"][0]["type"] == "tool_result" =>
                        {
                            last["content"]
                                .as_array_mut()
                                .expect("content is a list")
                                .push(block);
                        }
                        _ => messages.push(json!({ "role": "user", "content": [block] })),
                    }
                }
            }
        }
        let mut body = json!({
            "model": self.transport.model,
            "max_tokens": self.max_tokens,
            "system": request.system,
            "messages": messages,
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| json!({ "name": tool.name, "description": tool.description, "input_schema": tool.input_schema }))
                .collect();
        }
        if self.stream {
            body["stream"] = json!(true);
        }
        body
    }

    async fn read_json(
        &self,
        response: reqwest::Response,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let body = self.transport.body(response).await?;
        let value: Value = serde_json::from_slice(&body)
            .map_err(|e| malformed("anthropic", json_offset(&body, &e), &e.to_string(), &body))?;
        let mut message = AssistantMessage::default();
        for block in value["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("text") => message
                    .text
                    .push_str(block["text"].as_str().unwrap_or_default()),
                Some("tool_use") => message.tool_calls.push(ToolCall {
                    id: block["id"].as_str().unwrap_or_default().to_string(),
                    name: block["name"].as_str().unwrap_or_default().to_string(),
                    arguments: block["input"].to_string(),
                }),
                _ => {}
            }
        }
        let mut usage = Usage::default();
        add_usage(&mut usage, &value["usage"]);
        let finish = stop_reason(value["stop_reason"].as_str().unwrap_or("end_turn"));
        emit_whole(events, &message, usage, &finish);
        Ok(ChatResponse::priced(message, finish, usage, &self.price))
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let mut parser = SseParser::default();
        let mut message = AssistantMessage::default();
        let mut blocks: BTreeMap<u64, Block> = BTreeMap::new();
        let mut usage = Usage::default();
        let mut finish = None;
        let mut stopped = false;
        while let Some(chunk) = self
            .transport
            .chunk(&mut response, parser.position())
            .await?
        {
            for event in parser.push(&chunk) {
                let bad =
                    |what: &str| malformed("anthropic", event.offset, what, event.data.as_bytes());
                let value: Value = serde_json::from_str(&event.data)
                    .map_err(|e| bad(&format!("bad JSON in stream ({e})")))?;
                let kind = value["type"]
                    .as_str()
                    .or(event.event.as_deref())
                    .unwrap_or_default()
                    .to_string();
                match kind.as_str() {
                    "message_start" => {
                        add_usage(&mut usage, &value["message"]["usage"]);
                        emit(events, StreamEvent::Usage(usage));
                    }
                    "content_block_start" => {
                        let index = value["index"].as_u64().unwrap_or(0);
                        let block = &value["content_block"];
                        let started = if block["type"] == "tool_use" {
                            Block::ToolUse(ToolCall {
                                id: block["id"].as_str().unwrap_or_default().to_string(),
                                name: block["name"].as_str().unwrap_or_default().to_string(),
                                arguments: String::new(),
                            })
                        } else {
                            Block::Text
                        };
                        blocks.insert(index, started);
                    }
                    "content_block_delta" => {
                        let index = value["index"].as_u64().unwrap_or(0);
                        let delta = &value["delta"];
                        match (delta["type"].as_str(), blocks.get_mut(&index)) {
                            (Some("text_delta"), _) => {
                                let piece = delta["text"].as_str().unwrap_or_default();
                                message.text.push_str(piece);
                                emit(events, StreamEvent::TextDelta(piece.to_string()));
                            }
                            (Some("input_json_delta"), Some(Block::ToolUse(call))) => {
                                call.arguments
                                    .push_str(delta["partial_json"].as_str().unwrap_or_default());
                            }
                            (Some("input_json_delta"), _) => {
                                return Err(bad(
                                    "input_json_delta for a block that is not tool_use",
                                ))
                            }
                            _ => {}
                        }
                    }
                    "content_block_stop" => {
                        let index = value["index"].as_u64().unwrap_or(0);
                        if let Some(Block::ToolUse(mut call)) = blocks.remove(&index) {
                            if call.arguments.is_empty() {
                                call.arguments = "{}".into();
                            }
                            emit(events, StreamEvent::ToolCall(call.clone()));
                            message.tool_calls.push(call);
                        }
                    }
                    "message_delta" => {
                        if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                            finish = Some(stop_reason(reason));
                        }
                        if let Some(output) = value["usage"]["output_tokens"].as_u64() {
                            usage.output_tokens = output;
                        }
                        emit(events, StreamEvent::Usage(usage));
                    }
                    "message_stop" => stopped = true,
                    "error" => {
                        return Err(LlmError::Server {
                            provider: "anthropic",
                            status: 0,
                            retries: 0,
                            excerpt: excerpt(&value["error"].to_string()),
                        })
                    }
                    _ => {}
                }
            }
        }
        if let Some((offset, rest)) = parser.unfinished() {
            return Err(malformed(
                "anthropic",
                offset,
                "the stream ended inside an event",
                rest.as_bytes(),
            ));
        }
        if !stopped {
            return Err(malformed(
                "anthropic",
                parser.position(),
                "the stream ended before message_stop",
                b"",
            ));
        }
        let finish = finish.unwrap_or(FinishReason::Stop);
        emit(events, StreamEvent::Finish(finish.clone()));
        Ok(ChatResponse::priced(message, finish, usage, &self.price))
    }
}

#[async_trait::async_trait]
impl super::Provider for Anthropic {
    fn model(&self) -> &str {
        &self.transport.model
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let response = self
            .transport
            .post_json(&self.url, &self.body(request))
            .await?;
        if self.stream {
            self.read_stream(response, events).await
        } else {
            self.read_json(response, events).await
        }
    }
}

/// Adds a `usage` object: input tokens are uncached + cache reads + cache writes.
fn add_usage(usage: &mut Usage, value: &Value) {
    let read = value["cache_read_input_tokens"].as_u64().unwrap_or(0);
    let written = value["cache_creation_input_tokens"].as_u64().unwrap_or(0);
    usage.input_tokens += value["input_tokens"].as_u64().unwrap_or(0) + read + written;
    usage.cached_input_tokens += read;
    usage.output_tokens += value["output_tokens"].as_u64().unwrap_or(0);
}

fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}
