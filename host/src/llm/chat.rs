//! What every provider speaks: a [`ChatRequest`] of [`Message`]s and tools in, a
//! [`ChatResponse`] with [`Usage`] and cost out, [`StreamEvent`]s as it streams, and
//! the [`Provider`] trait itself.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::error::LlmError;

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDefinition {
    /// Unique name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments object: parsed once (when its plugin loads) and
    /// shared by every agent offered the tool.
    pub input_schema: Arc<serde_json::Value>,
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id, echoed in the result message.
    pub id: String,
    /// Which tool.
    pub name: String,
    /// The arguments, a JSON text (as assembled from the stream; may be invalid).
    pub arguments: String,
}

/// What the assistant said in one turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AssistantMessage {
    /// Text, possibly empty.
    pub text: String,
    /// Tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// Reasoning the model showed (`reasoning_content`, `reasoning`, Anthropic
    /// thinking): kept out of the answer, never sent back as text.
    pub reasoning: String,
    /// A refusal the model gave instead of an answer (OpenAI's `refusal`).
    pub refusal: Option<String>,
    /// Content blocks to send back unchanged in the next request (Anthropic
    /// `thinking` with its signature, `redacted_thinking`), which the API requires
    /// when tools are used with extended thinking.
    pub provider_blocks: Vec<serde_json::Value>,
}

/// One message of a conversation (the system prompt is separate). As JSON (a
/// conversation carried to a worker): `{"user": TEXT}`, `{"assistant": {...}}`,
/// `{"tool_result": {...}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    /// From the user (or the host speaking for it).
    User(String),
    /// A previous assistant turn.
    Assistant(AssistantMessage),
    /// The result of a tool call.
    ToolResult {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The result or error text.
        content: String,
        /// Whether the call failed.
        is_error: bool,
    },
}

/// Who is asking, so a scripted model can answer per agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requester {
    /// The agent's profile.
    pub profile: String,
    /// The agent's id.
    pub agent_id: String,
}

/// One request to a model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Vec<ToolDefinition>,
    /// Who asks.
    pub requester: Requester,
    /// The JSON Schema the answer must match, for a provider with a structured-output
    /// parameter (OpenAI-compatible: `response_format`); `None` for the others, which
    /// get it as a reporting tool (see [`Provider::answers_by_tool`]).
    pub answer_schema: Option<std::sync::Arc<serde_json::Value>>,
}

impl ChatRequest {
    /// About how many bytes the request's JSON takes: its texts plus a little per
    /// message and per tool (thinking blocks are not counted). A body is serialised
    /// into a buffer this size, so a parent's long history is not copied again at every
    /// doubling of a buffer that started small (see the `request_bodies` bench).
    pub(crate) fn json_size_hint(&self) -> usize {
        let message = |message: &Message| match message {
            Message::User(text) => text.len(),
            Message::Assistant(turn) => {
                turn.text.len()
                    + turn.reasoning.len()
                    + turn
                        .tool_calls
                        .iter()
                        .map(|call| call.id.len() + call.name.len() + call.arguments.len() + 96)
                        .sum::<usize>()
            }
            Message::ToolResult {
                call_id, content, ..
            } => call_id.len() + content.len(),
        } + 64;
        self.system.len()
            + self.messages.iter().map(message).sum::<usize>()
            + self.tools.len() * 512
            + 256
    }

    /// `body` (a provider's request shape, borrowing this request) as JSON bytes.
    pub(crate) fn serialise(&self, body: &impl serde::Serialize) -> bytes::Bytes {
        let mut bytes = Vec::with_capacity(self.json_size_hint());
        serde_json::to_writer(&mut bytes, body)
            .expect("a request of strings and JSON values serialises");
        bytes.into()
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants tool results.
    ToolCalls,
    /// It hit the output token limit.
    Length,
    /// The provider filtered the content.
    ContentFilter,
    /// Anything else the provider reported.
    Other(String),
}

/// Tokens of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Of those, tokens read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    /// Saturating: the counts come from the server, and a hostile or broken one must
    /// not be able to overflow them (found by the `anthropic_stream` fuzz target).
    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            cached_input_tokens: self
                .cached_input_tokens
                .saturating_add(other.cached_input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
        }
    }
}

impl Usage {
    /// Input and output tokens together (saturating).
    pub(crate) fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// Prices in US dollars per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(crate) struct Price {
    /// Uncached prompt tokens.
    pub input_per_mtok: f64,
    /// Generated tokens.
    pub output_per_mtok: f64,
    /// Prompt tokens read from cache (default: the input price).
    pub cached_input_per_mtok: Option<f64>,
}

impl Price {
    /// What `usage` costs.
    pub(crate) fn cost(&self, usage: Usage) -> f64 {
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let uncached = usage.input_tokens - cached;
        (uncached as f64 * self.input_per_mtok
            + cached as f64 * self.cached_input_per_mtok.unwrap_or(self.input_per_mtok)
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1e6
    }
}

/// Something that happened while the answer streamed, as the built-in providers
/// report it (the agent watches the text; the suite and the fuzz targets check the
/// rest against the assembled response).
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A piece of text.
    TextDelta(String),
    /// A tool call, complete (arguments assembled from every fragment).
    ToolCall(ToolCall),
    /// Token counts, as reported.
    Usage(Usage),
    /// Why the model stopped.
    Finish(FinishReason),
}

/// Where a streamed answer goes as it is read: a function called on the reading task
/// (no channel or task between the stream and its watcher), or nowhere. A provider
/// given in code passes its text as it arrives ([`EventSink::text`]); its tool calls,
/// usage and finish reason are its [`ChatResponse`]'s.
pub struct EventSink(Option<Box<dyn Fn(StreamEvent) + Send + Sync>>);

impl EventSink {
    /// Discards every event.
    pub(crate) fn none() -> Self {
        EventSink(None)
    }

    /// Calls `watch` with every event; it must not block.
    pub(crate) fn new(watch: impl Fn(StreamEvent) + Send + Sync + 'static) -> Self {
        EventSink(Some(Box::new(watch)))
    }

    /// Passes a piece of the answer's text, as it streamed, to whoever watches (the
    /// run's `text_delta` events).
    pub fn text(&self, piece: &str) {
        if let Some(watch) = &self.0 {
            watch(StreamEvent::TextDelta(piece.to_string()));
        }
    }

    /// Sends every event to the returned receiver.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn channel() -> (Self, tokio::sync::mpsc::UnboundedReceiver<StreamEvent>) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        // A receiver that went away only means nobody is watching.
        let sink = EventSink::new(move |event| {
            let _ = sender.send(event);
        });
        (sink, receiver)
    }
}

pub(crate) fn emit(sink: &EventSink, event: StreamEvent) {
    if let Some(watch) = &sink.0 {
        watch(event);
    }
}

/// Reports a response that arrived whole (not streamed) as the events a stream would
/// have produced, so watchers see the same sequence either way.
pub(crate) fn emit_whole(
    sink: &EventSink,
    message: &AssistantMessage,
    usage: Usage,
    finish: &FinishReason,
) {
    if !message.text.is_empty() {
        emit(sink, StreamEvent::TextDelta(message.text.clone()));
    }
    for call in &message.tool_calls {
        emit(sink, StreamEvent::ToolCall(call.clone()));
    }
    emit(sink, StreamEvent::Usage(usage));
    emit(sink, StreamEvent::Finish(finish.clone()));
}

/// The final answer of one call.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatResponse {
    /// What the assistant said.
    pub message: AssistantMessage,
    /// Why it stopped.
    pub finish: FinishReason,
    /// Tokens used.
    pub usage: Usage,
    /// What the call cost, from the model's configured price.
    pub cost_usd: f64,
    /// A digest of the exact request body sent (XXH3-128, hex), so a journal can tell
    /// whether a later request is the same; `None` when nothing was sent (a replayed
    /// response).
    pub request_digest: Option<String>,
}

impl ChatResponse {
    /// A free response to `message` (a provider written in code): it stopped for
    /// tool results if it made tool calls, else it finished its answer.
    pub fn of(message: AssistantMessage, usage: Usage) -> Self {
        let finish = match message.tool_calls.is_empty() {
            true => FinishReason::Stop,
            false => FinishReason::ToolCalls,
        };
        ChatResponse::priced(message, finish, usage, &Price::default())
    }

    /// A response with its cost computed from `price`.
    pub(crate) fn priced(
        message: AssistantMessage,
        finish: FinishReason,
        usage: Usage,
        price: &Price,
    ) -> Self {
        ChatResponse {
            message,
            finish,
            usage,
            cost_usd: price.cost(usage),
            request_digest: None,
        }
    }
}

/// A model behind an API.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// The model name sent to the API (for traces and reports).
    fn model(&self) -> &str;

    /// Who serves the model, as OpenTelemetry's `gen_ai.provider.name` names it
    /// (`openai` for any server speaking OpenAI's API, `anthropic`); a provider given
    /// in code that says nothing is `_OTHER`, as the conventions ask.
    fn provider_name(&self) -> &str {
        "_OTHER"
    }

    /// Whether a typed answer is asked for as the arguments of a reporting tool (a
    /// provider with no structured-output parameter) rather than through
    /// [`ChatRequest::answer_schema`].
    fn answers_by_tool(&self) -> bool {
        false
    }

    /// The digest of the body [`Provider::chat`] would send for `request` (what a
    /// journal records), without sending it; `None` for a provider that sends none.
    fn request_digest(&self, _request: &ChatRequest) -> Option<String> {
        None
    }

    /// Sends `request`; streams events to `events` and returns the final message.
    /// Dropping the future aborts the HTTP request.
    async fn chat(
        &self,
        request: &ChatRequest,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError>;
}
