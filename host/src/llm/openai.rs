//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`): OpenAI
//! itself and every server speaking the same API (Ollama, vLLM, llama.cpp, LM Studio,
//! OpenRouter). Tools go as `tools`, calls come back as `tool_calls` (several per turn),
//! results go as `tool` messages. Streaming uses SSE with
//! `stream_options.include_usage`, so usage arrives in the last chunk.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::chat::{
    emit, emit_whole, AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason,
    Message, Price, StreamEvent, ToolCall, ToolDefinition, Usage,
};
use super::error::LlmError;
use super::model::ModelConfig;
use super::secrets::Secrets;
use super::transport::{api_key, json_offset, malformed, Transport};

/// A model behind an OpenAI-compatible API.
pub struct OpenAi {
    /// HTTP to `{base_url}/chat/completions`, retries and error classification.
    transport: Transport,
    /// For cost.
    price: Price,
    /// `max_tokens`, when set.
    max_tokens: Option<u32>,
    /// Whether to stream.
    stream: bool,
}

impl OpenAi {
    /// Builds the provider for model `name`; reads the API key from its variable.
    /// `secrets` are the host's configured secrets, removed from every error.
    pub fn new(name: &str, config: &ModelConfig, secrets: &Secrets) -> Result<Self, LlmError> {
        let auth: Vec<(&str, String, bool)> = api_key(name, config)?
            .map(|key| ("authorization", format!("Bearer {key}"), true))
            .into_iter()
            .collect();
        Ok(OpenAi {
            transport: Transport::new(
                "openai",
                name,
                config,
                ("https://api.openai.com/v1", "chat/completions"),
                &auth,
                secrets,
            )?,
            price: config.price,
            max_tokens: config.max_tokens,
            stream: config.stream,
        })
    }

    /// The request body, as documented for Chat Completions, serialised once (every
    /// retry sends the same bytes) and straight from the request: a parent's history
    /// can hold thousands of messages, so no `Value` tree is built and dropped per turn.
    pub fn body(&self, request: &ChatRequest) -> bytes::Bytes {
        let body = Body {
            model: &self.transport.model,
            messages: request,
            tools: &request.tools,
            max_tokens: self.max_tokens,
            streaming: self.stream.then_some(Streaming {
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

    async fn read_json(
        &self,
        response: reqwest::Response,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let body = self.transport.body(response).await?;
        let value: Value = serde_json::from_slice(&body)
            .map_err(|e| malformed("openai", json_offset(&body, &e), &e.to_string(), &body))?;
        if let Some(error) = value.get("error").filter(|e| e.is_object()) {
            return Err(LlmError::in_stream("openai", &self.transport.model, error));
        }
        let choice = &value["choices"][0];
        let mut assembly = Assembly::default();
        assembly.message(&choice["message"]);
        assembly.usage = usage(&value).unwrap_or_default();
        assembly.finish = choice["finish_reason"].as_str().map(finish_reason);
        let (message, finish, usage) = assembly.into_parts();
        emit_whole(events, &message, usage, &finish);
        Ok(ChatResponse::priced(message, finish, usage, &self.price))
    }

    pub(crate) async fn read_stream(
        &self,
        response: reqwest::Response,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let mut assembly = Assembly::default();
        // A stream that ends without `[DONE]` (Ollama and others) is complete.
        self.transport
            .read_events(response, |event| {
                self.stream_event(&mut assembly, event, events)
            })
            .await?;
        let (message, finish, usage) = assembly.into_parts();
        for call in &message.tool_calls {
            emit(events, StreamEvent::ToolCall(call.clone()));
        }
        emit(events, StreamEvent::Finish(finish.clone()));
        Ok(ChatResponse::priced(message, finish, usage, &self.price))
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
            return Err(LlmError::in_stream("openai", &self.transport.model, error));
        }
        if event.event.as_deref() == Some("error") {
            return Err(LlmError::in_stream("openai", &self.transport.model, &value));
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

/// A stream chunk of the common shape, read borrowed: text, reasoning, refusal and
/// tool-call fragments as strings. Other shapes fail to parse or are not
/// [`PlainChunk::is_plain`], and take the general path.
#[derive(serde::Deserialize)]
struct PlainChunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<PlainChoice<'a>>,
    usage: Option<serde::de::IgnoredAny>,
    x_groq: Option<serde::de::IgnoredAny>,
    error: Option<serde::de::IgnoredAny>,
}

impl PlainChunk<'_> {
    /// Whether nothing in it needs the general path (usage and errors do).
    fn is_plain(&self) -> bool {
        self.usage.is_none() && self.x_groq.is_none() && self.error.is_none()
    }
}

#[derive(serde::Deserialize)]
struct PlainChoice<'a> {
    #[serde(default, borrow)]
    delta: PlainDelta<'a>,
    #[serde(borrow)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Default, serde::Deserialize)]
struct PlainDelta<'a> {
    #[serde(borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    reasoning_content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    reasoning: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    refusal: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    tool_calls: Option<Vec<PlainCall<'a>>>,
}

#[derive(serde::Deserialize)]
struct PlainCall<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<PlainFunction<'a>>,
}

#[derive(serde::Deserialize)]
struct PlainFunction<'a> {
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<std::borrow::Cow<'a, str>>,
}

/// An assistant message put together from a whole `message` or from stream deltas,
/// as OpenAI-compatible servers really send them.
#[derive(Default)]
struct Assembly {
    text: String,
    reasoning: String,
    /// Refusal text as it arrived (empty or blank when the model did not refuse).
    refusal: String,
    /// Calls in arrival order.
    calls: Vec<ToolCall>,
    /// `index` → position in `calls`, for servers that number their fragments.
    by_index: BTreeMap<u64, usize>,
    finish: Option<FinishReason>,
    usage: Usage,
}

impl Assembly {
    /// Applies a `message` or a `delta`.
    fn message(&mut self, part: &Value) {
        match &part["content"] {
            Value::String(text) => self.text.push_str(text),
            // Content as parts (Mistral): text parts are the answer, thinking parts
            // are reasoning.
            Value::Array(parts) => {
                for piece in parts {
                    match piece["type"].as_str() {
                        Some("text") => self
                            .text
                            .push_str(piece["text"].as_str().unwrap_or_default()),
                        Some("thinking") => {
                            self.reasoning.push_str(&parts_text(&piece["thinking"]))
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        for key in ["reasoning_content", "reasoning"] {
            if let Some(reasoning) = part[key].as_str() {
                self.reasoning.push_str(reasoning);
            }
        }
        if let Some(refusal) = part["refusal"].as_str() {
            self.refusal.push_str(refusal);
        }
        for fragment in part["tool_calls"].as_array().into_iter().flatten() {
            self.tool_call(fragment);
        }
    }

    /// One tool-call fragment as JSON (arguments may be an object rather than a
    /// string).
    fn tool_call(&mut self, fragment: &Value) {
        let arguments = match &fragment["function"]["arguments"] {
            Value::String(piece) => Some(std::borrow::Cow::Borrowed(piece.as_str())),
            Value::Null => None,
            object => Some(std::borrow::Cow::Owned(object.to_string())),
        };
        self.tool_call_parts(
            fragment["index"].as_u64(),
            fragment["id"].as_str(),
            fragment["function"]["name"].as_str(),
            arguments.as_deref(),
        );
    }

    /// A plain chunk's delta: the same rules as [`Assembly::message`].
    fn plain_delta(&mut self, delta: &PlainDelta<'_>) {
        if let Some(text) = &delta.content {
            self.text.push_str(text);
        }
        for reasoning in [&delta.reasoning_content, &delta.reasoning]
            .into_iter()
            .flatten()
        {
            self.reasoning.push_str(reasoning);
        }
        if let Some(refusal) = &delta.refusal {
            self.refusal.push_str(refusal);
        }
        for fragment in delta.tool_calls.iter().flatten() {
            let function = fragment.function.as_ref();
            self.tool_call_parts(
                fragment.index,
                fragment.id.as_deref(),
                function.and_then(|f| f.name.as_deref()),
                function.and_then(|f| f.arguments.as_deref()),
            );
        }
    }

    /// One tool-call fragment, by its parts. Fragments are matched by `index` when the
    /// server numbers them; otherwise a fragment with a new `id` starts a new call and
    /// one without an id continues the last call. A whole call may come in one
    /// fragment.
    fn tool_call_parts(
        &mut self,
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) {
        let id = id.filter(|id| !id.is_empty());
        let position = match index {
            Some(index) => match self.by_index.get(&index) {
                Some(&position) => Some(position),
                None => {
                    self.by_index.insert(index, self.calls.len());
                    None
                }
            },
            None => match id {
                Some(id) if self.calls.iter().any(|c| c.id == id) => {
                    self.calls.iter().position(|c| c.id == id)
                }
                Some(_) => None,
                None => self.calls.len().checked_sub(1),
            },
        };
        let position = position.unwrap_or_else(|| {
            self.calls.push(ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[position];
        if let Some(id) = id {
            call.id = id.to_string();
        }
        // Some servers repeat the name in every fragment; others send it once.
        if let Some(name) = name {
            if call.name.is_empty() {
                call.name = name.to_string();
            } else if call.name != name {
                call.name.push_str(name);
            }
        }
        if let Some(piece) = arguments {
            call.arguments.push_str(piece);
        }
    }

    /// The message, the finish reason (inferred when none was sent: tool calls, else
    /// stop) and the usage.
    fn into_parts(mut self) -> (AssistantMessage, FinishReason, Usage) {
        for (n, call) in self.calls.iter_mut().enumerate() {
            if call.arguments.trim().is_empty() {
                call.arguments = "{}".into();
            }
            if call.id.is_empty() {
                call.id = format!("call_{n}");
            }
        }
        let finish = self.finish.unwrap_or(if self.calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        let message = AssistantMessage {
            text: self.text,
            tool_calls: self.calls,
            reasoning: self.reasoning,
            // Snowflake Cortex and some gateways put `"refusal": ""` on every delta of
            // an answer: an empty refusal is no refusal.
            refusal: Some(self.refusal).filter(|refusal| !refusal.trim().is_empty()),
            provider_blocks: Vec::new(),
        };
        (message, finish, self.usage)
    }
}

/// The text of a `thinking` value: a string, or a list of `{text}` parts.
fn parts_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or(p.as_str()))
            .collect(),
        _ => String::new(),
    }
}

/// The Chat Completions request body, borrowing from the request.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(serialize_with = "system_then_messages")]
    messages: &'a ChatRequest,
    #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "tools_wire")]
    tools: &'a [ToolDefinition],
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    /// `stream` and `stream_options`, when streaming.
    #[serde(flatten)]
    streaming: Option<Streaming>,
    /// `{type: "json_schema", json_schema: {...}}` when the answer is typed.
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
}

/// `response_format` asking for JSON matching a schema. `strict: false`: strict mode
/// accepts only a subset of JSON Schema, and warren checks the answer itself.
#[derive(Serialize)]
struct ResponseFormat<'a> {
    r#type: &'static str,
    json_schema: JsonSchemaFormat<'a>,
}

#[derive(Serialize)]
struct JsonSchemaFormat<'a> {
    name: &'static str,
    schema: &'a Value,
    strict: bool,
}

/// `"stream": true` with usage in the last chunk.
#[derive(Serialize)]
struct Streaming {
    stream: bool,
    stream_options: StreamOptions,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One message on the wire.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` when the turn was only tool calls.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "calls_wire")]
        tool_calls: &'a [ToolCall],
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(message: &'a Message) -> Self {
        match message {
            Message::User(text) => WireMessage::User { content: text },
            Message::Assistant(assistant) => WireMessage::Assistant {
                content: Some(assistant.text.as_str()).filter(|text| !text.is_empty()),
                tool_calls: &assistant.tool_calls,
            },
            Message::ToolResult {
                call_id, content, ..
            } => WireMessage::Tool {
                tool_call_id: call_id,
                content,
            },
        }
    }
}

/// `{"id"?: ..., "type": "function", "function": ...}`: a tool offered (no id) or a
/// call of one.
#[derive(Serialize)]
struct FunctionWire<'a, F> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    r#type: &'static str,
    function: F,
}

impl<'a, F> FunctionWire<'a, F> {
    fn new(id: Option<&'a str>, function: F) -> Self {
        FunctionWire {
            id,
            r#type: "function",
            function,
        }
    }
}

#[derive(Serialize)]
struct ToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

fn system_then_messages<S: Serializer>(
    request: &&ChatRequest,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    // No system message at all when there is no prompt: an empty one is not "none" to
    // every server (some reject it, some send it to the model as is).
    let system = (!request.system.trim().is_empty()).then_some(WireMessage::System {
        content: &request.system,
    });
    serializer.collect_seq(
        system
            .into_iter()
            .chain(request.messages.iter().map(WireMessage::from)),
    )
}

fn tools_wire<S: Serializer>(tools: &&[ToolDefinition], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(tools.iter().map(|tool| {
        let function = ToolFunction {
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.input_schema,
        };
        FunctionWire::new(None, function)
    }))
}

fn calls_wire<S: Serializer>(calls: &&[ToolCall], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(calls.iter().map(|call| {
        let function = CallFunction {
            name: &call.name,
            arguments: &call.arguments,
        };
        FunctionWire::new(Some(&call.id), function)
    }))
}

#[async_trait::async_trait]
impl super::chat::Provider for OpenAi {
    fn model(&self) -> &str {
        &self.transport.model
    }

    fn request_digest(&self, request: &ChatRequest) -> Option<String> {
        Some(super::transport::body_digest(&self.body(request)))
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        self.transport
            .exchange(self.body(request), |response| async move {
                if self.stream {
                    self.read_stream(response, events).await
                } else {
                    self.read_json(response, events).await
                }
            })
            .await
    }
}

/// The usage a chunk or body reports: `usage`, or where Groq puts it in streams
/// (`x_groq.usage`).
fn usage(value: &Value) -> Option<Usage> {
    let usage = [&value["usage"], &value["x_groq"]["usage"]]
        .into_iter()
        .find(|u| u.is_object())?;
    Some(Usage {
        input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
        cached_input_tokens: usage["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
        output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
    })
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        // `eos` (Together), `end_turn` (some proxies of Anthropic models): a normal end.
        "stop" | "eos" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" | "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An assistant turn of tool calls only goes back with `"content": null`, a turn
    /// without calls has no `tool_calls` key, and a request without tools, streaming
    /// or a token limit has none of those keys.
    #[test]
    fn assistant_turns_go_back_in_the_documented_shape() {
        let call = ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        let request = ChatRequest {
            system: "s".into(),
            messages: vec![
                Message::Assistant(AssistantMessage {
                    tool_calls: vec![call],
                    ..AssistantMessage::default()
                }),
                Message::Assistant(AssistantMessage {
                    text: "done".into(),
                    ..AssistantMessage::default()
                }),
            ],
            ..ChatRequest::default()
        };
        let body = Body {
            model: "m",
            messages: &request,
            tools: &request.tools,
            max_tokens: None,
            streaming: None,
            response_format: None,
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({"model": "m", "messages": [
                {"role": "system", "content": "s"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                ]},
                {"role": "assistant", "content": "done"}
            ]})
        );
    }

    /// A parent's history (spawn calls, their results) serialises into the buffer sized
    /// for it, without growing it, and the buffer is not much larger than the body.
    #[test]
    fn a_body_fits_the_buffer_sized_for_it() {
        let mut request = ChatRequest {
            system: "You coordinate research.".into(),
            messages: vec![Message::User("gather the code words".into())],
            ..ChatRequest::default()
        };
        for turn in 0..10 {
            let calls: Vec<ToolCall> = (0..100)
                .map(|k| ToolCall {
                    id: format!("call_{turn}_{k}"),
                    name: "spawn_agent".into(),
                    arguments: format!(
                        r#"{{"profile": "researcher", "task": "Find the code word in /docs/topic{k}.txt and report it."}}"#
                    ),
                })
                .collect();
            let results = calls.iter().map(|call| Message::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: r#"{"job_id": "a1b2c3", "state": "queued", "note": "\"quoted\""}"#.into(),
                is_error: false,
            });
            request.messages.push(Message::Assistant(AssistantMessage {
                tool_calls: calls.clone(),
                ..AssistantMessage::default()
            }));
            request.messages.extend(results);
        }
        let body = Body {
            model: "m",
            messages: &request,
            tools: &request.tools,
            max_tokens: Some(100),
            streaming: None,
            response_format: None,
        };
        let bytes = request.serialise(&body);
        let hint = request.json_size_hint();
        assert!(hint >= bytes.len(), "{hint} < {}", bytes.len());
        assert!(hint <= 2 * bytes.len(), "{hint} > 2 x {}", bytes.len());
    }

    /// A whole `message` with `"refusal": ""` (or blank) beside its answer is an
    /// answer; only refusal text makes a refusal.
    #[test]
    fn an_empty_refusal_is_no_refusal() {
        let refusal_of = |message: Value| {
            let mut assembly = Assembly::default();
            assembly.message(&message);
            assembly.into_parts().0.refusal
        };
        for empty in ["", " \n"] {
            let message = json!({"role": "assistant", "content": "4", "refusal": empty});
            assert_eq!(refusal_of(message), None, "{empty:?}");
        }
        let refused = json!({"role": "assistant", "content": null, "refusal": "I can't."});
        assert_eq!(refusal_of(refused).as_deref(), Some("I can't."));
    }

    /// Applies one chunk the general way (a `Value` tree), as for uncommon shapes.
    fn general(assembly: &mut Assembly, value: &Value) {
        if let Some(choice) = value["choices"].get(0) {
            assembly.message(&choice["delta"]);
            if let Some(reason) = choice["finish_reason"].as_str() {
                assembly.finish = Some(finish_reason(reason));
            }
        }
    }

    /// The borrowed reading of plain chunks assembles exactly what the general path
    /// does, on every OpenAI-compatible stream of the recorded corpus.
    #[test]
    fn plain_chunks_assemble_as_the_general_path_does_on_the_corpus() {
        let corpus =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/providers");
        let mut plain = 0;
        for entry in std::fs::read_dir(&corpus).unwrap() {
            let dir = entry.unwrap().path();
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            if !name.contains("-stream-") || name.starts_with("anthropic") {
                continue;
            }
            let body = std::fs::read_to_string(dir.join("body")).unwrap();
            let (mut fast, mut slow) = (Assembly::default(), Assembly::default());
            for line in body.lines() {
                let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                    continue;
                };
                let Ok(value) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                general(&mut slow, &value);
                match serde_json::from_str::<PlainChunk<'_>>(data) {
                    Ok(chunk) if chunk.is_plain() => {
                        plain += 1;
                        if let Some(choice) = chunk.choices.first() {
                            fast.plain_delta(&choice.delta);
                            if let Some(reason) = &choice.finish_reason {
                                fast.finish = Some(finish_reason(reason));
                            }
                        }
                    }
                    _ => general(&mut fast, &value),
                }
            }
            let (fast, slow) = (fast.into_parts(), slow.into_parts());
            assert_eq!(fast.0, slow.0, "{name}");
            assert_eq!(fast.1, slow.1, "{name}");
        }
        assert!(plain > 100, "only {plain} plain chunks in the corpus");
    }
}
