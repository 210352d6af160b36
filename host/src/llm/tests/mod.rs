//! The providers against servers on 127.0.0.1:0: both HTTP providers against the fake
//! LLM server (text, single and parallel tool calls split across many chunks, usage
//! and cost, every fault, cancellation, and the exact requests sent), the scripted
//! provider, and real provider responses replayed from `tests/corpus/providers`.
//!
//! Layout: this file (the fake server, shared with the integration tests, and what
//! the tests share), `streams` (each provider's happy paths, and the scripted one),
//! `faults` (retries, limits, redirects, malformed streams, timeouts), `recorded`
//! (the corpus of recorded responses).

#[allow(dead_code)] // the integration tests' fake LLM server; these use part of it
#[path = "../../../../tests/all/fake_llm.rs"]
mod fake_llm;
mod faults;
mod recorded;
mod streams;

use serde_json::{json, Value};

use self::fake_llm::FakeLlm;
use super::{
    connect, AssistantMessage, ChatRequest, ChatResponse, EventSink, LlmError, Message,
    ModelConfig, Requester, StreamEvent, ToolCall, ToolDefinition,
};

/// A model config for the fake server. The key comes from `CARGO_PKG_NAME`, which
/// cargo sets for every test process (value `warren`): a variable known to be set,
/// without mutating the environment of a multi-threaded test binary.
pub(super) fn model(provider: &str, server: &FakeLlm, extra: &str) -> ModelConfig {
    toml::from_str(&format!(
        "provider = \"{provider}\"\nbase_url = \"{}\"\nmodel = \"test-model\"\napi_key_env = \"CARGO_PKG_NAME\"\n\
         retry_base_ms = 5\nread_timeout_s = 2\nmax_retries = 2\n\
         price = {{ input_per_mtok = 1.0, output_per_mtok = 2.0, cached_input_per_mtok = 0.5 }}\n{extra}",
        server.base_url
    ))
    .unwrap()
}

pub(super) const KEY: &str = "warren";

/// A conversation with every message kind: system, user, an assistant turn with two
/// tool calls, and both results.
pub(super) fn conversation() -> ChatRequest {
    ChatRequest {
        system: "You are terse.".into(),
        messages: vec![
            Message::User("What is in a.md and b.md?".into()),
            Message::Assistant(AssistantMessage {
                text: "Reading both.".into(),
                tool_calls: vec![
                    ToolCall {
                        id: "call_a".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"/docs/a.md"}"#.into(),
                    },
                    ToolCall {
                        id: "call_b".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"/docs/b.md"}"#.into(),
                    },
                ],
                ..AssistantMessage::default()
            }),
            Message::ToolResult {
                call_id: "call_a".into(),
                name: "read_file".into(),
                content: "alpha".into(),
                is_error: false,
            },
            Message::ToolResult {
                call_id: "call_b".into(),
                name: "read_file".into(),
                content: "no such file".into(),
                is_error: true,
            },
        ],
        tools: vec![ToolDefinition {
            name: "read_file".into(),
            description: "Read a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}).into(),
        }],
        requester: Requester {
            profile: "main".into(),
            agent_id: "a1".into(),
        },
        answer_schema: None,
    }
}

pub(super) async fn chat(
    config: &ModelConfig,
    request: &ChatRequest,
) -> (Result<ChatResponse, LlmError>, Vec<StreamEvent>) {
    let provider = connect("test", config, &Default::default()).unwrap();
    let (sink, mut receiver) = EventSink::channel();
    let result = provider.chat(request, &sink).await;
    let mut events = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        events.push(event);
    }
    (result, events)
}

/// The error `config` fails with on [`conversation`].
pub(super) async fn chat_error(config: &ModelConfig) -> LlmError {
    chat(config, &conversation()).await.0.unwrap_err()
}

/// The text of `events`' text deltas.
pub(super) fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// Splits a string into pieces of `n` characters.
pub(super) fn pieces(text: &str, n: usize) -> Vec<String> {
    text.chars()
        .collect::<Vec<_>>()
        .chunks(n)
        .map(|c| c.iter().collect())
        .collect()
}

/// An Anthropic stream of `text` then a tool call whose input is `tool_input`.
pub(super) fn anthropic_events(text: &str, tool_input: &str) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": 900, "cache_read_input_tokens": 100, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
    ];
    for piece in pieces(text, 3) {
        events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}));
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}));
    for piece in pieces(tool_input, 2) {
        events.push(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}}));
    }
    events.push(json!({"type": "content_block_stop", "index": 1}));
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 250}}));
    events.push(json!({"type": "message_stop"}));
    events
}
