//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`): OpenAI
//! itself and every server speaking the same API (Ollama, vLLM, llama.cpp, LM Studio,
//! OpenRouter). Tools go as `tools`, calls come back as `tool_calls` (several per turn),
//! results go as `tool` messages. Streaming uses SSE with
//! `stream_options.include_usage`, so usage arrives in the last chunk.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::sse::SseParser;
use super::transport::{api_key, excerpt, json_offset, malformed, Transport};
use super::{
    emit, emit_whole, AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason,
    LlmError, Message, ModelConfig, Price, StreamEvent, ToolCall, Usage,
};

/// A model behind an OpenAI-compatible API.
pub struct OpenAi {
    /// HTTP, retries and error classification.
    transport: Transport,
    /// `{base_url}/chat/completions`.
    url: String,
    /// For cost.
    price: Price,
    /// `max_tokens`, when set.
    max_tokens: Option<u32>,
    /// Whether to stream.
    stream: bool,
}

impl OpenAi {
    /// Builds the provider for model `name`; reads the API key from its variable.
    pub fn new(name: &str, config: &ModelConfig) -> Result<Self, LlmError> {
        let base = config
            .base_url
            .as_deref()
            .unwrap_or("https://api.openai.com/v1")
            .trim_end_matches('/');
        let auth: Vec<(&str, String, bool)> = api_key(name, config, "OPENAI_API_KEY")?
            .map(|key| ("authorization", format!("Bearer {key}"), true))
            .into_iter()
            .collect();
        Ok(OpenAi {
            transport: Transport::new("openai", config, &auth)?,
            url: format!("{base}/chat/completions"),
            price: config.price,
            max_tokens: config.max_tokens,
            stream: config.stream,
        })
    }

    /// The request body, as documented for Chat Completions.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let mut messages = vec![json!({ "role": "system", "content": request.system })];
        for message in &request.messages {
            messages.push(match message {
                Message::User(text) => json!({ "role": "user", "content": text }),
                Message::Assistant(assistant) => {
                    let mut value = json!({
                        "role": "assistant",
                        "content": if assistant.text.is_empty() { Value::Null } else { json!(assistant.text) },
                    });
                    if !assistant.tool_calls.is_empty() {
                        value["tool_calls"] = assistant
                            .tool_calls
                            .iter()
                            .map(|call| json!({ "id": call.id, "type": "function", "function": { "name": call.name, "arguments": call.arguments } }))
                            .collect();
                    }
                    value
                }
                Message::ToolResult { call_id, content, .. } => {
                    json!({ "role": "tool", "tool_call_id": call_id, "content": content })
                }
            });
        }
        let mut body = json!({ "model": self.transport.model, "messages": messages });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| json!({ "type": "function", "function": { "name": tool.name, "description": tool.description, "parameters": tool.input_schema } }))
                .collect();
        }
        if let Some(max) = self.max_tokens {
            body["max_tokens"] = json!(max);
        }
        if self.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({ "include_usage": true });
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
            .map_err(|e| malformed("openai", json_offset(&body, &e), &e.to_string(), &body))?;
        let choice = &value["choices"][0];
        let text = choice["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let tool_calls: Vec<ToolCall> = choice["message"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|call| ToolCall {
                id: call["id"].as_str().unwrap_or_default().to_string(),
                name: call["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                arguments: call["function"]["arguments"]
                    .as_str()
                    .unwrap_or("{}")
                    .to_string(),
            })
            .collect();
        let usage = usage(&value["usage"]);
        let finish = finish_reason(choice["finish_reason"].as_str().unwrap_or("stop"));
        let message = AssistantMessage { text, tool_calls };
        emit_whole(events, &message, usage, &finish);
        Ok(ChatResponse::priced(message, finish, usage, &self.price))
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let mut parser = SseParser::default();
        let mut text = String::new();
        // Tool calls arrive as fragments keyed by `index`: id and name first, then
        // pieces of the arguments.
        let mut calls: BTreeMap<u64, ToolCall> = BTreeMap::new();
        let mut finish = None;
        let mut usage_seen = Usage::default();
        let mut done = false;
        while let Some(chunk) = self
            .transport
            .chunk(&mut response, parser.position())
            .await?
        {
            for event in parser.push(&chunk) {
                if event.data == "[DONE]" {
                    done = true;
                    continue;
                }
                let value: Value = serde_json::from_str(&event.data).map_err(|e| {
                    malformed(
                        "openai",
                        event.offset,
                        &format!("bad JSON in stream ({e})"),
                        event.data.as_bytes(),
                    )
                })?;
                if let Some(error) = value.get("error") {
                    return Err(LlmError::Server {
                        provider: "openai",
                        status: 0,
                        retries: 0,
                        excerpt: excerpt(&error.to_string()),
                    });
                }
                if value["usage"].is_object() {
                    usage_seen = usage(&value["usage"]);
                    emit(events, StreamEvent::Usage(usage_seen));
                }
                let Some(choice) = value["choices"].get(0) else {
                    continue;
                };
                let delta = &choice["delta"];
                if let Some(piece) = delta["content"].as_str().filter(|p| !p.is_empty()) {
                    text.push_str(piece);
                    emit(events, StreamEvent::TextDelta(piece.to_string()));
                }
                for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
                    let index = fragment["index"].as_u64().unwrap_or(0);
                    let call = calls.entry(index).or_insert_with(|| ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    });
                    if let Some(id) = fragment["id"].as_str() {
                        call.id = id.to_string();
                    }
                    if let Some(name) = fragment["function"]["name"].as_str() {
                        call.name.push_str(name);
                    }
                    if let Some(arguments) = fragment["function"]["arguments"].as_str() {
                        call.arguments.push_str(arguments);
                    }
                }
                if let Some(reason) = choice["finish_reason"].as_str() {
                    finish = Some(finish_reason(reason));
                }
            }
        }
        if let Some((offset, rest)) = parser.unfinished() {
            return Err(malformed(
                "openai",
                offset,
                "the stream ended inside an event",
                rest.as_bytes(),
            ));
        }
        let Some(finish) = finish.filter(|_| done) else {
            return Err(malformed(
                "openai",
                parser.position(),
                "the stream ended before its final chunk ([DONE])",
                b"",
            ));
        };
        let tool_calls: Vec<ToolCall> = calls.into_values().collect();
        for call in &tool_calls {
            emit(events, StreamEvent::ToolCall(call.clone()));
        }
        emit(events, StreamEvent::Finish(finish.clone()));
        Ok(ChatResponse::priced(
            AssistantMessage { text, tool_calls },
            finish,
            usage_seen,
            &self.price,
        ))
    }
}

#[async_trait::async_trait]
impl super::Provider for OpenAi {
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

fn usage(value: &Value) -> Usage {
    Usage {
        input_tokens: value["prompt_tokens"].as_u64().unwrap_or(0),
        cached_input_tokens: value["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
        output_tokens: value["completion_tokens"].as_u64().unwrap_or(0),
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}
