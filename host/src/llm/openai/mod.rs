//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`): OpenAI
//! itself and every server speaking the same API (Ollama, vLLM, llama.cpp, LM Studio,
//! OpenRouter). Tools go as `tools`, calls come back as `tool_calls` (several per turn),
//! results go as `tool` messages. Streaming uses SSE with
//! `stream_options.include_usage`, so usage arrives in the last chunk.

use serde_json::Value;

use super::chat::{emit, emit_whole, ChatRequest, ChatResponse, EventSink, StreamEvent};
use super::error::LlmError;
use super::http::{Http, HttpApi};
use super::model::ModelConfig;
use super::secrets::Secrets;
use super::transport::{api_key, malformed};
use request::{Body, JsonSchemaFormat, ResponseFormat, StreamOptions, Streaming};
use response::{finish_reason, usage, Assembly, PlainChunk};

mod request;
mod response;

/// A model behind an OpenAI-compatible API.
pub(crate) struct OpenAi {
    /// HTTP to `{base_url}/chat/completions`, the price and whether to stream.
    http: Http,
    /// `max_tokens`, when set.
    max_tokens: Option<u32>,
}

impl OpenAi {
    /// Builds the provider for model `name`; reads the API key from its variable.
    /// `secrets` are the host's configured secrets, removed from every error.
    pub(crate) fn new(
        name: &str,
        config: &ModelConfig,
        secrets: &Secrets,
    ) -> Result<Self, LlmError> {
        let auth: Vec<(&str, String, bool)> = api_key(name, config)?
            .map(|key| ("authorization", format!("Bearer {key}"), true))
            .into_iter()
            .collect();
        Ok(OpenAi {
            http: Http::new(
                "openai",
                name,
                config,
                ("https://api.openai.com/v1", "chat/completions"),
                &auth,
                secrets,
            )?,
            max_tokens: config.max_tokens,
        })
    }

    /// Applies one SSE event (`[DONE]` only marks the end, which the body's end
    /// marks as well).
    fn stream_event(
        &self,
        assembly: &mut Assembly,
        event: &super::sse::SseEvent,
        events: &EventSink,
    ) -> Result<(), LlmError> {
        if event.data.trim() == "[DONE]" || event.data.trim().is_empty() {
            return Ok(());
        }
        // Most chunks have the plain shape: read it borrowed, without building a
        // `Value` tree. Anything else (usage, errors, content parts, arguments as
        // objects) takes the general path below.
        if let Ok(chunk) = serde_json::from_str::<PlainChunk<'_>>(&event.data) {
            if chunk.is_plain() && event.event.as_deref() != Some("error") {
                if let Some(choice) = chunk.choices.first() {
                    let before = assembly.text.len();
                    assembly.plain_delta(&choice.delta);
                    if assembly.text.len() > before {
                        emit(
                            events,
                            StreamEvent::TextDelta(assembly.text[before..].to_string()),
                        );
                    }
                    if let Some(reason) = &choice.finish_reason {
                        assembly.finish = Some(finish_reason(reason));
                    }
                }
                return Ok(());
            }
        }
        let value: Value = serde_json::from_str(&event.data).map_err(|e| {
            malformed(
                "openai",
                event.offset,
                &format!("bad JSON in stream ({e})"),
                event.data.as_bytes(),
            )
        })?;
        if let Some(error) = value.get("error").filter(|e| e.is_object()) {
            return Err(self.http.error(error));
        }
        if event.event.as_deref() == Some("error") {
            return Err(self.http.error(&value));
        }
        if let Some(seen) = usage(&value) {
            assembly.usage = seen;
            emit(events, StreamEvent::Usage(seen));
        }
        let Some(choice) = value["choices"].get(0) else {
            return Ok(());
        };
        let before = assembly.text.len();
        assembly.message(&choice["delta"]);
        if assembly.text.len() > before {
            emit(
                events,
                StreamEvent::TextDelta(assembly.text[before..].to_string()),
            );
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            assembly.finish = Some(finish_reason(reason));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl HttpApi for OpenAi {
    fn http(&self) -> &Http {
        &self.http
    }

    /// Chat Completions' body, usage asked for when streamed.
    fn request_body(&self, request: &ChatRequest) -> bytes::Bytes {
        let body = Body {
            model: self.http.model(),
            messages: request,
            tools: &request.tools,
            max_tokens: self.max_tokens,
            streaming: self.http.stream.then_some(Streaming {
                stream: true,
                stream_options: StreamOptions {
                    include_usage: true,
                },
            }),
            response_format: request
                .answer_schema
                .as_deref()
                .map(|schema| ResponseFormat {
                    r#type: "json_schema",
                    json_schema: JsonSchemaFormat {
                        name: "result",
                        schema,
                        strict: false,
                    },
                }),
        };
        request.serialise(&body)
    }

    fn error_in(answer: &Value) -> Option<&Value> {
        answer.get("error").filter(|error| error.is_object())
    }

    fn read_json(&self, value: &Value, events: &EventSink) -> Result<ChatResponse, LlmError> {
        let choice = &value["choices"][0];
        let mut assembly = Assembly::default();
        assembly.message(&choice["message"]);
        assembly.usage = usage(value).unwrap_or_default();
        assembly.finish = choice["finish_reason"].as_str().map(finish_reason);
        let (message, finish, usage) = assembly.into_parts();
        emit_whole(events, &message, usage, &finish);
        Ok(self.http.priced(message, finish, usage))
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let mut assembly = Assembly::default();
        // A stream that ends without `[DONE]` (Ollama and others) is complete.
        self.http
            .transport
            .read_events(response, |event| {
                self.stream_event(&mut assembly, event, events)
            })
            .await?;
        let (message, finish, usage) = assembly.into_parts();
        for call in &message.tool_calls {
            emit(events, StreamEvent::ToolCall(call.clone()));
        }
        emit(events, StreamEvent::Finish(finish.clone()));
        Ok(self.http.priced(message, finish, usage))
    }
}

#[cfg(test)]
mod tests;
