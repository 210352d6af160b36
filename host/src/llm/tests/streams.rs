//! Each HTTP provider's happy paths, streamed and not, with the exact requests sent;
//! then the scripted provider.

use serde_json::{json, Value};

use super::fake_llm::{FakeLlm, Reply};
use super::{anthropic_events, chat, conversation, model, pieces, text_of, KEY};
use crate::llm::{
    connect, ChatRequest, EventSink, FinishReason, LlmError, Message, ModelConfig, Requester,
    StreamEvent, ToolCall, Usage,
};

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
        .filter_map(|e| match e {
            StreamEvent::ToolCall(c) => Some(c.clone()),
            _ => None,
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

    let provider = connect("offline", &config, &Default::default()).unwrap();
    provider
        .chat(&ask("main", "go"), &EventSink::none())
        .await
        .unwrap();
    let error = provider
        .chat(&ask("main", "again"), &EventSink::none())
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
