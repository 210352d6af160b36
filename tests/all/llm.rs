//! Both HTTP providers against the fake LLM server: text, single and parallel tool
//! calls split across many chunks, usage and cost, every fault, cancellation, and the
//! exact requests sent. Then the scripted provider.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use warren::{
    AssistantMessage, ChatRequest, FinishReason, LlmError, Message, ModelConfig, Requester,
    StreamEvent, ToolCall, ToolDefinition, Usage,
};

use crate::fake_llm::{FakeLlm, Reply};

/// A model config for the fake server. The key comes from `CARGO_PKG_NAME`, which
/// cargo sets for every test process (value `warren`): a variable known to be set,
/// without mutating the environment of a multi-threaded test binary.
fn model(provider: &str, server: &FakeLlm, extra: &str) -> ModelConfig {
    toml::from_str(&format!(
        "provider = \"{provider}\"\nbase_url = \"{}\"\nmodel = \"test-model\"\napi_key_env = \"CARGO_PKG_NAME\"\n\
         retry_base_ms = 5\nread_timeout_s = 2\nmax_retries = 2\n\
         price = {{ input_per_mtok = 1.0, output_per_mtok = 2.0, cached_input_per_mtok = 0.5 }}\n{extra}",
        server.base_url
    ))
    .unwrap()
}

const KEY: &str = "warren";

/// A conversation with every message kind: system, user, an assistant turn with two
/// tool calls, and both results.
fn conversation() -> ChatRequest {
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

async fn chat(
    config: &ModelConfig,
    request: &ChatRequest,
) -> (Result<warren::ChatResponse, LlmError>, Vec<StreamEvent>) {
    let provider = warren::connect("test", config, &Default::default()).unwrap();
    let (sink, mut receiver) = warren::EventSink::channel();
    let result = provider.chat(request, &sink).await;
    let mut events = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        events.push(event);
    }
    (result, events)
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| {
            if let StreamEvent::TextDelta(t) = e {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect()
}

/// Splits a string into pieces of `n` characters.
fn pieces(text: &str, n: usize) -> Vec<String> {
    text.chars()
        .collect::<Vec<_>>()
        .chunks(n)
        .map(|c| c.iter().collect())
        .collect()
}

#[tokio::test]
async fn openai_streams_text_with_usage_and_cost_and_sends_the_documented_request() {
    let server = FakeLlm::start().await;
    server.push(Reply::openai_stream(vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "a is "}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "alpha."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "prompt_tokens_details": {"cached_tokens": 400}}}),
    ]));
    let config = model(
        "openai",
        &server,
        "headers = { \"HTTP-Referer\" = \"https://example.org/app\" }",
    );
    let (result, events) = chat(&config, &conversation()).await;
    let response = result.unwrap();
    assert_eq!(response.message.text, "a is alpha.");
    assert_eq!(text_of(&events), "a is alpha.");
    assert_eq!(response.finish, FinishReason::Stop);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 1000,
            cached_input_tokens: 400,
            output_tokens: 500
        }
    );
    // 600 uncached × $1 + 400 cached × $0.5 + 500 output × $2, per million.
    assert!(
        (response.cost_usd - 0.0018).abs() < 1e-12,
        "{}",
        response.cost_usd
    );
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Finish(FinishReason::Stop))
    );

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(request.headers["http-referer"], "https://example.org/app");
    assert_eq!(
        request.body,
        json!({
            "model": "test-model",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "What is in a.md and b.md?"},
                {"role": "assistant", "content": "Reading both.", "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"/docs/a.md\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"/docs/b.md\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "alpha"},
                {"role": "tool", "tool_call_id": "call_b", "content": "no such file"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Read a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
            }}]
        })
    );
}

#[tokio::test]
async fn openai_parallel_tool_calls_assemble_from_fragments() {
    let server = FakeLlm::start().await;
    let first = r#"{"path":"/docs/a.md"}"#;
    let second = r#"{"path":"/docs/b.md","limit":10}"#;
    let mut chunks = vec![
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "read_", "arguments": ""}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"name": "file"}}]}}]}),
    ];
    // Interleave one-character fragments of both calls' arguments.
    let (a, b) = (pieces(first, 1), pieces(second, 1));
    for i in 0..a.len().max(b.len()) {
        for (index, parts) in [(0, &a), (1, &b)] {
            if let Some(part) = parts.get(i) {
                chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": part}}]}}]}));
            }
        }
    }
    chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
    chunks.push(json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 20}}));
    server.push(Reply::openai_stream(chunks));
    let (result, events) = chat(&model("openai", &server, ""), &conversation()).await;
    let response = result.unwrap();
    assert_eq!(response.finish, FinishReason::ToolCalls);
    let expected = vec![
        ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: first.into(),
        },
        ToolCall {
            id: "call_2".into(),
            name: "read_file".into(),
            arguments: second.into(),
        },
    ];
    assert_eq!(response.message.tool_calls, expected);
    let streamed: Vec<ToolCall> = events
        .iter()
        .filter_map(|e| {
            if let StreamEvent::ToolCall(c) = e {
                Some(c.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(streamed, expected);
}

#[tokio::test]
async fn openai_without_streaming_and_its_finish_reasons() {
    let server = FakeLlm::start().await;
    server.push(Reply::json(json!({
        "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "cut sh",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4}
    })));
    server.push(Reply::json(json!({
        "choices": [{"index": 0, "finish_reason": "content_filter", "message": {"role": "assistant", "content": null}}]
    })));
    let config = model("openai", &server, "stream = false\nmax_tokens = 64");
    let response = chat(&config, &conversation()).await.0.unwrap();
    assert_eq!(response.message.text, "cut sh");
    assert_eq!(response.message.tool_calls[0].name, "read_file");
    assert_eq!(response.finish, FinishReason::Length);
    assert_eq!(response.usage.output_tokens, 4);
    let response = chat(&config, &conversation()).await.0.unwrap();
    assert_eq!(response.finish, FinishReason::ContentFilter);
    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 64);
    assert!(body.get("stream").is_none() && body.get("stream_options").is_none());
}

fn anthropic_events(text: &str, tool_input: &str) -> Vec<Value> {
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

#[tokio::test]
async fn anthropic_streams_text_and_tool_use_and_sends_the_documented_request() {
    let server = FakeLlm::start().await;
    let input = r#"{"path":"/docs/c.md"}"#;
    server.push(Reply::anthropic_stream(anthropic_events(
        "Let me check c.md too.",
        input,
    )));
    let (result, events) = chat(
        &model("anthropic", &server, "max_tokens = 1000"),
        &conversation(),
    )
    .await;
    let response = result.unwrap();
    assert_eq!(response.message.text, "Let me check c.md too.");
    assert_eq!(text_of(&events), "Let me check c.md too.");
    assert_eq!(
        response.message.tool_calls,
        vec![ToolCall {
            id: "toolu_1".into(),
            name: "read_file".into(),
            arguments: input.into()
        }]
    );
    assert_eq!(response.finish, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 1000,
            cached_input_tokens: 100,
            output_tokens: 250
        }
    );
    assert!(
        (response.cost_usd - (900.0 + 50.0 + 500.0) / 1e6).abs() < 1e-12,
        "{}",
        response.cost_usd
    );

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.headers["x-api-key"], KEY);
    assert_eq!(request.headers["anthropic-version"], "2023-06-01");
    assert!(!request.headers.contains_key("authorization"));
    assert_eq!(
        request.body,
        json!({
            "model": "test-model",
            "max_tokens": 1000,
            "stream": true,
            "system": "You are terse.",
            "messages": [
                {"role": "user", "content": "What is in a.md and b.md?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "call_a", "name": "read_file", "input": {"path": "/docs/a.md"}},
                    {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "/docs/b.md"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_a", "content": "alpha", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "call_b", "content": "no such file", "is_error": true}
                ]}
            ],
            "tools": [{"name": "read_file", "description": "Read a file.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
        })
    );
}

#[tokio::test]
async fn anthropic_without_streaming() {
    let server = FakeLlm::start().await;
    server.push(Reply::json(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "Done."}, {"type": "tool_use", "id": "t1", "name": "list_dir", "input": {"path": "/"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })));
    let response = chat(
        &model("anthropic", &server, "stream = false"),
        &conversation(),
    )
    .await
    .0
    .unwrap();
    assert_eq!(response.message.text, "Done.");
    assert_eq!(response.message.tool_calls[0].arguments, r#"{"path":"/"}"#);
    assert_eq!(response.finish, FinishReason::Stop);
    assert_eq!(
        server.requests()[0].body["max_tokens"],
        4096,
        "the default max_tokens"
    );
}

#[tokio::test]
async fn server_errors_are_retried_then_succeed() {
    let server = FakeLlm::start().await;
    server.push(Reply::status(500, r#"{"error":"boom"}"#));
    server.push(Reply::status(503, r#"{"error":"overloaded"}"#));
    server.push(Reply::json(
        json!({"choices": [{"finish_reason": "stop", "message": {"content": "fine"}}]}),
    ));
    let response = chat(&model("openai", &server, "stream = false"), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "fine");
    assert_eq!(server.requests().len(), 3);
}

/// A non-streamed answer is read whole whether it comes in one piece or in several.
#[tokio::test]
async fn a_whole_answer_in_pieces_is_read_whole() {
    let body =
        json!({"choices": [{"finish_reason": "stop", "message": {"content": "in three pieces"}}],
                      "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
        .to_string();
    let (a, rest) = body.split_at(10);
    let (b, c) = rest.split_at(20);
    for pieces in [vec![body.as_str()], vec![a, b, c]] {
        let server = FakeLlm::start().await;
        server.push(Reply::Stream {
            pieces: pieces.iter().map(|p| p.to_string()).collect(),
            delay: Duration::from_millis(20),
        });
        let response = chat(&model("openai", &server, "stream = false"), &conversation())
            .await
            .0
            .unwrap();
        assert_eq!(response.message.text, "in three pieces");
        assert_eq!(
            (response.usage.input_tokens, response.usage.output_tokens),
            (7, 3)
        );
    }
}

/// A response longer than `max_response_mib` is cut off at the limit with a
/// `malformed_response` error and not retried, whether it is one JSON body, a stream of events
/// or one line that never ends; one under the limit is read. An out-of-range limit
/// is a configuration error naming the field.
#[tokio::test]
async fn a_response_longer_than_the_limit_is_not_read() {
    const MIB: usize = 1024 * 1024;
    let answer = json!({"choices": [{"finish_reason": "stop", "message": {"content": "x".repeat(MIB + MIB / 2)}}]})
        .to_string();
    let event = format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": "y".repeat(1000)}}]})
    );
    let events = vec![event.as_str(); (MIB + MIB / 2) / event.len()];
    let endless_line = format!("data: {}", "z".repeat(MIB + MIB / 2));
    // (config, pieces, whether the whole is an answer to read under a 2 MiB limit)
    let cases: [(&str, Vec<&str>, bool); 3] = [
        ("stream = false", vec![&answer[..MIB], &answer[MIB..]], true),
        ("stream = true", events, true),
        (
            "stream = true",
            vec![&endless_line[..MIB], &endless_line[MIB..]],
            false,
        ),
    ];
    for (stream, pieces, readable) in cases {
        for limit in [1, 2].into_iter().filter(|&limit| limit == 1 || readable) {
            let server = FakeLlm::start().await;
            for _ in 0..2 {
                server.push(Reply::raw_stream(&pieces));
            }
            let extra = format!("{stream}\nmax_response_mib = {limit}");
            match chat(&model("openai", &server, &extra), &conversation())
                .await
                .0
            {
                Ok(response) if limit == 2 => {
                    let text = response.message.text;
                    assert!(text.len() > MIB, "{stream}: {} bytes", text.len());
                }
                Err(LlmError::Malformed { offset, detail, .. }) if limit == 1 => {
                    assert_eq!(offset, MIB, "{stream}");
                    assert!(detail.contains("max_response_mib (1 MiB)"), "{detail}");
                }
                other => panic!("{stream}, limit {limit}: {other:?}"),
            }
            assert_eq!(server.requests().len(), 1, "{stream}: not retried");
        }
    }
    for limit in [0, 4097] {
        let config = toml::from_str::<ModelConfig>(&format!(
            "provider = \"openai\"\nmodel = \"m\"\nmax_response_mib = {limit}\n"
        ))
        .unwrap();
        let error = warren::connect("big", &config, &Default::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("model `big`: max_response_mib must be between 1 and 4096"),
            "{error}"
        );
    }
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let server = FakeLlm::start().await;
    server.push(Reply::retry_after(1));
    server.push(Reply::json(
        json!({"choices": [{"finish_reason": "stop", "message": {"content": "waited"}}]}),
    ));
    let started = Instant::now();
    let response = chat(&model("openai", &server, "stream = false"), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "waited");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "waited only {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn persistent_rate_limiting_and_server_errors_give_up_with_typed_errors() {
    let server = FakeLlm::start().await;
    for _ in 0..3 {
        server.push(Reply::status(429, r#"{"error":"rate limited"}"#));
    }
    let error = chat(&model("openai", &server, "stream = false"), &conversation())
        .await
        .0
        .unwrap_err();
    assert!(
        matches!(error, LlmError::RateLimited { retries: 2, .. }),
        "{error}"
    );
    assert_eq!(
        server.requests().len(),
        3,
        "one try and max_retries = 2 retries"
    );
    for _ in 0..3 {
        server.push(Reply::status(502, "bad gateway page"));
    }
    let error = chat(&model("anthropic", &server, ""), &conversation())
        .await
        .0
        .unwrap_err();
    assert!(
        matches!(
            error,
            LlmError::Server {
                status: 502,
                retries: 2,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("bad gateway page"), "{error}");
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_show_the_key() {
    type Expect = fn(&LlmError) -> bool;
    let cases: [(u16, &str, Expect); 5] = [
        (401, r#"{"error":{"message":"invalid x-api-key"}}"#, |e| {
            matches!(e, LlmError::Auth { status: 401, .. })
        }),
        (403, r#"{"error":"forbidden"}"#, |e| {
            matches!(e, LlmError::Auth { status: 403, .. })
        }),
        (
            404,
            r#"{"error":{"message":"The model `test-model` does not exist"}}"#,
            |e| matches!(e, LlmError::UnknownModel { .. }),
        ),
        (
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#,
            |e| matches!(e, LlmError::ContextTooLong { .. }),
        ),
        (422, r#"{"error":"bad field"}"#, |e| {
            matches!(e, LlmError::BadRequest { status: 422, .. })
        }),
    ];
    for (status, body, expected) in cases {
        let server = FakeLlm::start().await;
        server.push(Reply::status(status, body));
        let error = chat(&model("openai", &server, ""), &conversation())
            .await
            .0
            .unwrap_err();
        assert!(expected(&error), "{status}: {error}");
        assert_eq!(server.requests().len(), 1, "{status} is not retried");
        assert!(!format!("{error} {error:?}").contains("Bearer"), "{error}");
    }
}

/// A redirect to another origin is never followed: the request carries the API key
/// (Anthropic's `x-api-key` is not among the headers an HTTP client drops when a
/// redirect changes host) and the whole conversation. The error names where the
/// server pointed, without the query, and says what to change. A 307 or 308 within
/// the same origin (a trailing-slash fix) is followed with the same body and key; a
/// 302 there is not, since the client would resend the call as a GET without a body.
#[tokio::test]
async fn redirects_are_refused_and_nothing_reaches_the_other_address() {
    let elsewhere = FakeLlm::start().await;
    for (provider, status) in [("anthropic", 307), ("openai", 308), ("openai", 302)] {
        let server = FakeLlm::start().await;
        server.push(Reply::Full {
            status,
            headers: vec![(
                "location",
                format!("{}/messages?token=s3cret#part", elsewhere.base_url),
            )],
            body: String::new(),
        });
        let error = chat(&model(provider, &server, ""), &conversation())
            .await
            .0
            .unwrap_err();
        assert!(
            matches!(&error, LlmError::Redirected { status: s, .. } if *s == status),
            "{provider} {status}: {error}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&format!("`{}/messages`", elsewhere.base_url))
                && text.contains("base_url"),
            "{text}"
        );
        assert!(!text.contains("s3cret") && !text.contains(KEY), "{text}");
        // The target ends in Anthropic's own path (`messages`), so the remedy names
        // the base URL to set; for OpenAI (`chat/completions`) it cannot.
        let remedy = format!("set base_url to `{}`", elsewhere.base_url);
        assert_eq!(text.contains(&remedy), provider == "anthropic", "{text}");
        assert_eq!(server.requests().len(), 1, "a redirect is not retried");
        assert_eq!(error.kind(), "redirected");
    }
    assert!(
        elsewhere.requests().is_empty(),
        "the redirect target got {:?}",
        elsewhere.requests()
    );
    let server = FakeLlm::start().await;
    server.push(Reply::status(301, ""));
    let error = chat(&model("openai", &server, ""), &conversation())
        .await
        .0
        .unwrap_err();
    assert!(error.to_string().contains("no Location header"), "{error}");

    let server = FakeLlm::start().await;
    let moved = |status| Reply::Full {
        status,
        headers: vec![("location", "/v1/chat/completions?moved".into())],
        body: String::new(),
    };
    server.push(moved(307));
    server.push(Reply::answer("followed", (1, 1)));
    let config = model("openai", &server, "stream = false");
    let response = chat(&config, &conversation()).await.0.unwrap();
    assert_eq!(response.message.text, "followed");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body, requests[0].body);
    assert_eq!(
        requests[1].headers["authorization"],
        format!("Bearer {KEY}")
    );
    server.push(moved(302));
    let error = chat(&config, &conversation()).await.0.unwrap_err();
    assert!(
        matches!(error, LlmError::Redirected { status: 302, .. }),
        "{error}"
    );
    assert_eq!(server.requests().len(), 3, "the 302 is not followed");
}

#[tokio::test]
async fn malformed_and_truncated_streams_report_the_position() {
    let server = FakeLlm::start().await;
    let first = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    server.push(Reply::raw_stream(&[first, "data: {not json}\n\n"]));
    let (result, events) = chat(&model("openai", &server, ""), &conversation()).await;
    let error = result.unwrap_err();
    let LlmError::Malformed { offset, detail, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(*offset, first.len());
    assert!(detail.contains("{not json}"), "{detail}");
    assert_eq!(
        text_of(&events),
        "Hi",
        "what streamed before the fault was delivered"
    );

    server.push(Reply::raw_stream(&[
        first,
        "data: {\"choices\":[{\"delta\":{\"content\":\"cu",
    ]));
    let error = chat(&model("openai", &server, ""), &conversation())
        .await
        .0
        .unwrap_err();
    // The body ended cleanly in the middle of a JSON value: malformed, at the event.
    assert!(
        matches!(&error, LlmError::Malformed { offset, .. } if *offset == first.len()),
        "{error}"
    );
    assert!(error.to_string().contains("bad JSON in stream"), "{error}");

    // A body that ends cleanly without `[DONE]` or a finish reason (Ollama and others)
    // is complete; the finish reason is inferred.
    server.push(Reply::raw_stream(&[first]));
    let response = chat(&model("openai", &server, ""), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "Hi");
    assert_eq!(response.finish, FinishReason::Stop);

    // A body the transport cuts (no final chunk) is a typed truncation, retried.
    server.push(Reply::Cut(vec![first.to_string()]));
    server.push(Reply::raw_stream(&[first, "data: [DONE]\n\n"]));
    let response = chat(&model("openai", &server, ""), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "Hi");
    for _ in 0..3 {
        server.push(Reply::Cut(vec![first.to_string()]));
    }
    let error = chat(&model("openai", &server, ""), &conversation())
        .await
        .0
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::Truncated { offset, .. } if *offset == first.len()),
        "{error}"
    );

    let events = anthropic_events("partial", "{}");
    let cut: Vec<String> = events[..4]
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    let cut: Vec<&str> = cut.iter().map(String::as_str).collect();
    // Truncated, so retried (twice): every attempt ends the same way.
    for _ in 0..3 {
        server.push(Reply::raw_stream(&cut));
    }
    let error = chat(&model("anthropic", &server, ""), &conversation())
        .await
        .0
        .unwrap_err();
    assert!(
        matches!(error, LlmError::Truncated { .. })
            && error.to_string().contains("before message_delta"),
        "{error}"
    );
}

/// What real streams do that the corpus has no recording of: an error event inside a
/// 200 stream (Anthropic `overloaded_error`, an OpenAI-compatible rate limit), retried
/// with backoff and typed when it persists; arguments sent as an object.
#[tokio::test]
async fn errors_inside_a_stream_are_typed_and_retried() {
    let server = FakeLlm::start().await;
    let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    server.push(Reply::raw_stream(&[overloaded]));
    server.push(Reply::anthropic_stream(anthropic_events(
        "after the retry",
        "",
    )));
    let response = chat(&model("anthropic", &server, ""), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "after the retry");
    for _ in 0..3 {
        server.push(Reply::raw_stream(&[overloaded]));
    }
    let error = chat(&model("anthropic", &server, ""), &conversation())
        .await
        .0
        .unwrap_err();
    assert!(
        matches!(error, LlmError::Server { status: 529, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("overloaded_error: Overloaded")
            && !error.to_string().contains("HTTP 0"),
        "{error}"
    );

    let limited = "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}\n\n";
    for _ in 0..3 {
        server.push(Reply::raw_stream(&[limited]));
    }
    let error = chat(&model("openai", &server, ""), &conversation())
        .await
        .0
        .unwrap_err();
    assert!(matches!(error, LlmError::RateLimited { .. }), "{error}");

    let whole = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"/a\"}}}]},\"finish_reason\":\"tool_calls\"}]}\r\n\r\n";
    server.push(Reply::raw_stream(&[whole]));
    let response = chat(&model("openai", &server, ""), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.tool_calls[0].arguments, r#"{"path":"/a"}"#);
    assert_eq!(response.finish, FinishReason::ToolCalls);
}

#[tokio::test]
async fn a_hung_request_times_out_and_is_retried() {
    let server = FakeLlm::start().await;
    server.push(Reply::Hang);
    server.push(Reply::json(
        json!({"choices": [{"finish_reason": "stop", "message": {"content": "second try"}}]}),
    ));
    let mut config = model("openai", &server, "stream = false");
    config.read_timeout_s = 0.3;
    let response = chat(&config, &conversation()).await.0.unwrap();
    assert_eq!(response.message.text, "second try");
}

#[tokio::test]
async fn dropping_the_call_aborts_a_hung_request_at_once() {
    let server = FakeLlm::start().await;
    server.push(Reply::Hang);
    let mut config = model("openai", &server, "");
    config.read_timeout_s = 600.0;
    let provider = warren::connect("test", &config, &Default::default()).unwrap();
    let task = tokio::spawn(async move {
        provider
            .chat(&conversation(), &warren::EventSink::none())
            .await
    });
    while server.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task.abort();
    let aborted = Instant::now();
    while !server.hang_dropped.load(Ordering::SeqCst) {
        assert!(
            aborted.elapsed() < Duration::from_secs(5),
            "the server never saw the connection close"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_named_key_variable_must_exist() {
    let server = FakeLlm::start().await;
    let mut config = model("openai", &server, "");
    config.api_key_env = Some("WARREN_TEST_SURELY_UNSET_KEY".into());
    let error = warren::connect("gpt", &config, &Default::default())
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "model `gpt`: api_key_env names WARREN_TEST_SURELY_UNSET_KEY, which is not set"
    );
}

#[tokio::test]
async fn scripted_model_replays_turns_per_profile() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[turns]]
profile = "main"
text = "Spawning."
tool_calls = [{ name = "spawn_agent", arguments = { task = "read a.md", profile = "researcher" } }]

[[turns]]
profile = "researcher"
when = "b.md"
text = "b is beta."
usage = { input_tokens = 7, output_tokens = 3 }

[[turns]]
profile = "researcher"
text = "a is alpha."
"#,
    )
    .unwrap();
    let config: ModelConfig =
        toml::from_str(&format!("provider = \"scripted\"\nscript = {:?}\nprice = {{ input_per_mtok = 1.0, output_per_mtok = 1.0 }}", script))
            .unwrap();
    let ask = |profile: &str, text: &str| ChatRequest {
        messages: vec![Message::User(text.into())],
        requester: Requester {
            profile: profile.into(),
            agent_id: "x".into(),
        },
        ..ChatRequest::default()
    };
    let (result, events) = chat(&config, &ask("researcher", "please read a.md")).await;
    assert_eq!(result.unwrap().message.text, "a is alpha.");
    assert_eq!(text_of(&events), "a is alpha.");
    let response = chat(&config, &ask("main", "go")).await.0.unwrap();
    assert_eq!(response.finish, FinishReason::ToolCalls);
    assert_eq!(response.message.tool_calls[0].name, "spawn_agent");
    let arguments: Value = serde_json::from_str(&response.message.tool_calls[0].arguments).unwrap();
    assert_eq!(
        arguments,
        json!({"task": "read a.md", "profile": "researcher"})
    );
    // Each chat builds a fresh provider, so the script starts over: the matcher picks
    // the `when` turn for b.md.
    let response = chat(&config, &ask("researcher", "now b.md"))
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "b is beta.");
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 7,
            cached_input_tokens: 0,
            output_tokens: 3
        }
    );
    assert!((response.cost_usd - 10.0 / 1e6).abs() < 1e-12);

    let provider = warren::connect("offline", &config, &Default::default()).unwrap();
    provider
        .chat(&ask("main", "go"), &warren::EventSink::none())
        .await
        .unwrap();
    let error = provider
        .chat(&ask("main", "again"), &warren::EventSink::none())
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::ScriptExhausted { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("no turn left for profile `main`"),
        "{error}"
    );
}
