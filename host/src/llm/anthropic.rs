//! Anthropic Messages (`POST {base_url}/messages`): the system prompt is a top-level
//! field, tools carry `input_schema`, calls are `tool_use` blocks and results go back
//! as `tool_result` blocks in a user message. Streaming events: `message_start`
//! (input usage), `content_block_start` / `content_block_delta` (`text_delta`,
//! `input_json_delta`) / `content_block_stop`, `message_delta` (stop reason, output
//! usage), `message_stop`.

use std::collections::BTreeMap;

use serde::ser::Serializer;
use serde::Serialize;
use serde_json::{json, Value};

use super::chat::{
    emit, emit_whole, AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason,
    Message, StreamEvent, ToolCall, ToolDefinition, Usage,
};
use super::error::LlmError;
use super::http::{Http, HttpApi};
use super::model::ModelConfig;
use super::secrets::Secrets;
use super::transport::{api_key, malformed};

/// The API version header this code speaks.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` when the config sets none (the API requires one).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A model behind the Anthropic Messages API.
pub(crate) struct Anthropic {
    /// HTTP to `{base_url}/messages`, the price and whether to stream.
    http: Http,
    /// Output limit per call.
    max_tokens: u32,
}

/// One content block being assembled from a stream.
enum Block {
    /// Text: its deltas are the answer.
    Text,
    /// A tool call being assembled.
    ToolUse(ToolCall),
    /// `thinking` (with its signature) or `redacted_thinking`: kept whole, to be sent
    /// back unchanged.
    Thinking(Value),
    /// Anything else (`server_tool_use`, `web_search_tool_result`, blocks from later
    /// API versions): carried by the server, not run here; skipped.
    Other,
}

impl Anthropic {
    /// Builds the provider for model `name`; reads the API key from its variable.
    /// `secrets` are the host's configured secrets, removed from every error.
    pub(crate) fn new(
        name: &str,
        config: &ModelConfig,
        secrets: &Secrets,
    ) -> Result<Self, LlmError> {
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_string(), false)];
        headers.extend(api_key(name, config)?.map(|key| ("x-api-key", key, true)));
        Ok(Anthropic {
            http: Http::new(
                "anthropic",
                name,
                config,
                ("https://api.anthropic.com/v1", "messages"),
                &headers,
                secrets,
            )?,
            max_tokens: config.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        })
    }

    fn stream_event(
        &self,
        state: &mut StreamState,
        event: &super::sse::SseEvent,
        events: &EventSink,
    ) -> Result<(), LlmError> {
        let bad = |what: &str| malformed("anthropic", event.offset, what, event.data.as_bytes());
        if event.data.trim().is_empty() {
            return Ok(());
        }
        let value: Value = serde_json::from_str(&event.data)
            .map_err(|e| bad(&format!("bad JSON in stream ({e})")))?;
        let kind = value["type"]
            .as_str()
            .or(event.event.as_deref())
            .unwrap_or_default()
            .to_string();
        let index = value["index"].as_u64().unwrap_or(0);
        match kind.as_str() {
            "message_start" => {
                add_usage(&mut state.usage, &value["message"]["usage"]);
                emit(events, StreamEvent::Usage(state.usage));
            }
            "content_block_start" => state.block_start(index, &value["content_block"], events),
            "content_block_delta" => state.block_delta(index, &value["delta"], events),
            "content_block_stop" => state.block_stop(index, events),
            "message_delta" => state.message_delta(&value, events),
            "message_stop" => state.stopped = true,
            "error" => return Err(self.http.error(&value["error"])),
            _ => {}
        }
        Ok(())
    }
}

/// What a stream has produced so far.
#[derive(Default)]
struct StreamState {
    message: AssistantMessage,
    /// Open content blocks by index.
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    finish: Option<FinishReason>,
    /// `message_stop` arrived.
    stopped: bool,
}

impl StreamState {
    /// `content_block_start`: a text, tool-use or thinking block opens at `index`.
    fn block_start(&mut self, index: u64, block: &Value, events: &EventSink) {
        let started = match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default();
                if !text.is_empty() {
                    self.message.text.push_str(text);
                    emit(events, StreamEvent::TextDelta(text.to_string()));
                }
                Block::Text
            }
            Some("tool_use") => Block::ToolUse(ToolCall {
                id: block["id"].as_str().unwrap_or_default().to_string(),
                name: block["name"].as_str().unwrap_or_default().to_string(),
                arguments: String::new(),
            }),
            Some("thinking" | "redacted_thinking") => Block::Thinking(block.clone()),
            _ => Block::Other,
        };
        self.blocks.insert(index, started);
    }

    /// `content_block_delta`: more of the block at `index`.
    fn block_delta(&mut self, index: u64, delta: &Value, events: &EventSink) {
        match (delta["type"].as_str(), self.blocks.get_mut(&index)) {
            (Some("text_delta"), _) => {
                let piece = delta["text"].as_str().unwrap_or_default();
                self.message.text.push_str(piece);
                emit(events, StreamEvent::TextDelta(piece.to_string()));
            }
            (Some("input_json_delta"), Some(Block::ToolUse(call))) => {
                call.arguments
                    .push_str(delta["partial_json"].as_str().unwrap_or_default());
            }
            (Some("thinking_delta"), Some(Block::Thinking(block))) => {
                let piece = delta["thinking"].as_str().unwrap_or_default();
                self.message.reasoning.push_str(piece);
                let thinking = format!("{}{piece}", block["thinking"].as_str().unwrap_or_default());
                block["thinking"] = json!(thinking);
            }
            (Some("signature_delta"), Some(Block::Thinking(block))) => {
                let signature = format!(
                    "{}{}",
                    block["signature"].as_str().unwrap_or_default(),
                    delta["signature"].as_str().unwrap_or_default()
                );
                block["signature"] = json!(signature);
            }
            // Deltas of blocks warren does not run (a server tool's input)
            // or of a later API version.
            _ => {}
        }
    }

    /// `content_block_stop`: a finished tool call is emitted, a thinking block kept.
    fn block_stop(&mut self, index: u64, events: &EventSink) {
        match self.blocks.remove(&index) {
            Some(Block::ToolUse(mut call)) => {
                if call.arguments.trim().is_empty() {
                    call.arguments = "{}".into();
                }
                emit(events, StreamEvent::ToolCall(call.clone()));
                self.message.tool_calls.push(call);
            }
            Some(Block::Thinking(block)) => self.message.provider_blocks.push(block),
            _ => {}
        }
    }

    /// `message_delta`: the stop reason and the final usage.
    fn message_delta(&mut self, value: &Value, events: &EventSink) {
        if let Some(reason) = value["delta"]["stop_reason"].as_str() {
            self.finish = Some(stop_reason(reason));
        }
        let delta_usage = &value["usage"];
        if delta_usage["input_tokens"].is_u64() {
            // A final input count replaces the one message_start gave.
            self.usage = Usage {
                output_tokens: self.usage.output_tokens,
                ..Usage::default()
            };
            add_usage(
                &mut self.usage,
                &json!({
                    "input_tokens": delta_usage["input_tokens"],
                    "cache_read_input_tokens": delta_usage["cache_read_input_tokens"],
                    "cache_creation_input_tokens": delta_usage["cache_creation_input_tokens"],
                }),
            );
        }
        if let Some(output) = delta_usage["output_tokens"].as_u64() {
            self.usage.output_tokens = output;
        }
        emit(events, StreamEvent::Usage(self.usage));
    }
}

/// Whether a system prompt is empty: then the request has none.
fn is_blank(text: &&str) -> bool {
    text.trim().is_empty()
}

/// The Messages request body, borrowing from the request.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "is_blank")]
    system: &'a str,
    #[serde(serialize_with = "messages_wire")]
    messages: &'a [Message],
    #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "tools_wire")]
    tools: &'a [ToolDefinition],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// One message on the wire: a user's text, an assistant turn's blocks, or a run of
/// consecutive tool results, which share one user message as the API requires.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    User {
        #[serde(serialize_with = "user_content")]
        content: UserContent<'a>,
    },
    Assistant {
        #[serde(serialize_with = "assistant_content")]
        content: &'a AssistantMessage,
    },
}

/// What a user message carries.
enum UserContent<'a> {
    Text(&'a str),
    /// Tool results (each a [`Message::ToolResult`]).
    Results(&'a [Message]),
}

/// One content block on the wire.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: ToolInput<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        is_error: bool,
    },
}

/// A call's input: the API wants an object, so arguments that are not one (malformed
/// JSON from the model) go as a string field, so nothing is lost.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolInput<'a> {
    Object(&'a serde_json::value::RawValue),
    Raw {
        #[serde(rename = "_raw")]
        raw: &'a str,
    },
}

impl<'a> ToolInput<'a> {
    fn of(arguments: &'a str) -> Self {
        match serde_json::from_str::<&serde_json::value::RawValue>(arguments) {
            Ok(raw) if raw.get().trim_start().starts_with('{') => ToolInput::Object(raw),
            _ => ToolInput::Raw { raw: arguments },
        }
    }
}

fn messages_wire<S: Serializer>(messages: &&[Message], serializer: S) -> Result<S::Ok, S::Error> {
    let result = |message: &Message| matches!(message, Message::ToolResult { .. });
    let runs = messages.chunk_by(|a, b| result(a) && result(b));
    serializer.collect_seq(runs.map(|run| match &run[0] {
        Message::User(text) => WireMessage::User {
            content: UserContent::Text(text),
        },
        Message::Assistant(assistant) => WireMessage::Assistant { content: assistant },
        Message::ToolResult { .. } => WireMessage::User {
            content: UserContent::Results(run),
        },
    }))
}

fn user_content<S: Serializer>(
    content: &UserContent<'_>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match content {
        UserContent::Text(text) => serializer.serialize_str(text),
        UserContent::Results(results) => {
            serializer.collect_seq(results.iter().filter_map(|message| match message {
                Message::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => Some(WireBlock::ToolResult {
                    tool_use_id: call_id,
                    content,
                    is_error: *is_error,
                }),
                _ => None,
            }))
        }
    }
}

/// Thinking blocks first and unchanged (the API requires them back when tools are
/// used with extended thinking), then the text, then the tool calls.
fn assistant_content<S: Serializer>(
    assistant: &&AssistantMessage,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    #[serde(untagged)]
    enum Item<'a> {
        Kept(&'a Value),
        Block(WireBlock<'a>),
    }
    let text = (!assistant.text.is_empty()).then(|| {
        Item::Block(WireBlock::Text {
            text: &assistant.text,
        })
    });
    let calls = assistant.tool_calls.iter().map(|call| {
        Item::Block(WireBlock::ToolUse {
            id: &call.id,
            name: &call.name,
            input: ToolInput::of(&call.arguments),
        })
    });
    serializer.collect_seq(
        assistant
            .provider_blocks
            .iter()
            .map(Item::Kept)
            .chain(text)
            .chain(calls),
    )
}

fn tools_wire<S: Serializer>(tools: &&[ToolDefinition], serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Tool<'a> {
        name: &'a str,
        description: &'a str,
        input_schema: &'a Value,
    }
    serializer.collect_seq(tools.iter().map(|tool| Tool {
        name: &tool.name,
        description: &tool.description,
        input_schema: &tool.input_schema,
    }))
}

#[async_trait::async_trait]
impl HttpApi for Anthropic {
    fn http(&self) -> &Http {
        &self.http
    }

    /// Messages' body; a tool call's input is checked, not parsed into a `Value`.
    fn request_body(&self, request: &ChatRequest) -> bytes::Bytes {
        let body = Body {
            model: self.http.model(),
            max_tokens: self.max_tokens,
            system: &request.system,
            messages: &request.messages,
            tools: &request.tools,
            stream: self.http.stream,
        };
        request.serialise(&body)
    }

    fn error_in(answer: &Value) -> Option<&Value> {
        (answer["type"] == "error").then(|| &answer["error"])
    }

    /// Messages has no structured-output parameter: a typed answer is a tool call.
    fn typed_by_tool(&self) -> bool {
        true
    }

    fn read_json(&self, value: &Value, events: &EventSink) -> Result<ChatResponse, LlmError> {
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
                Some("thinking") => {
                    message
                        .reasoning
                        .push_str(block["thinking"].as_str().unwrap_or_default());
                    message.provider_blocks.push(block.clone());
                }
                Some("redacted_thinking") => message.provider_blocks.push(block.clone()),
                _ => {}
            }
        }
        let mut usage = Usage::default();
        add_usage(&mut usage, &value["usage"]);
        let finish = stop_reason(value["stop_reason"].as_str().unwrap_or("end_turn"));
        emit_whole(events, &message, usage, &finish);
        Ok(self.http.priced(message, finish, usage))
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let mut state = StreamState::default();
        let read = self
            .http
            .transport
            .read_events(response, |event| {
                self.stream_event(&mut state, event, events)
            })
            .await?;
        let StreamState {
            mut message,
            blocks,
            usage,
            finish,
            stopped,
        } = state;
        // Complete when message_stop came, or when message_delta carried the stop
        // reason and the body then ended cleanly.
        let Some(finish) = finish.or_else(|| stopped.then_some(FinishReason::Stop)) else {
            return Err(LlmError::Truncated {
                provider: "anthropic",
                offset: read,
                detail: "the stream ended before message_delta gave the stop reason".into(),
                retries: 0,
            });
        };
        // A tool call cut by max_tokens is kept with what arrived of its input.
        for (_, block) in blocks {
            if let Block::ToolUse(call) = block {
                emit(events, StreamEvent::ToolCall(call.clone()));
                message.tool_calls.push(call);
            }
        }
        emit(events, StreamEvent::Finish(finish.clone()));
        Ok(self.http.priced(message, finish, usage))
    }
}

/// Adds a `usage` object: input tokens are uncached + cache reads + cache writes.
/// The counts are the server's: absurd ones saturate rather than overflow.
fn add_usage(usage: &mut Usage, value: &Value) {
    let count = |key: &str| value[key].as_u64().unwrap_or(0);
    let read = count("cache_read_input_tokens");
    usage.input_tokens = usage
        .input_tokens
        .saturating_add(count("input_tokens"))
        .saturating_add(read)
        .saturating_add(count("cache_creation_input_tokens"));
    usage.cached_input_tokens = usage.cached_input_tokens.saturating_add(read);
    usage.output_tokens = usage.output_tokens.saturating_add(count("output_tokens"));
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

#[cfg(test)]
mod tests;
