//! The Anthropic provider's request shape and stream reading.

use super::*;

/// The body as the Messages API documents it, for a history with every shape the
/// serialiser handles: thinking blocks sent back first and unchanged, an empty
/// text left out, tool inputs as objects (with whitespace around them too) and
/// malformed or non-object arguments kept as `_raw`, consecutive tool results in
/// one user message and a result after a user's text in a message of its own.
#[test]
fn the_history_goes_in_the_documented_shape() {
    let config: ModelConfig =
        toml::from_str("provider = \"anthropic\"\nmodel = \"m\"\nstream = false").unwrap();
    let provider = Anthropic::new("test", &config, &Secrets::default()).unwrap();
    let call = |id: &str, arguments: &str| ToolCall {
        id: id.into(),
        name: "read_file".into(),
        arguments: arguments.into(),
    };
    let result = |id: &str, content: &str, is_error| Message::ToolResult {
        call_id: id.into(),
        name: "read_file".into(),
        content: content.into(),
        is_error,
    };
    let thinking = json!({"type": "thinking", "thinking": "hm", "signature": "sig"});
    let request = ChatRequest {
        system: "S".into(),
        messages: vec![
            Message::User("go".into()),
            Message::Assistant(AssistantMessage {
                provider_blocks: vec![thinking.clone()],
                tool_calls: vec![
                    call("a", r#"{"path":"/x"}"#),
                    call("b", r#"{"path":"#),
                    call("c", "[1]"),
                    call("d", " {\"n\": 2} "),
                ],
                ..AssistantMessage::default()
            }),
            result("a", "x", false),
            result("b", "bad", true),
            Message::User("and?".into()),
            result("c", "c", false),
            Message::Assistant(AssistantMessage {
                text: "done".into(),
                ..AssistantMessage::default()
            }),
        ],
        ..ChatRequest::default()
    };
    let body: Value = serde_json::from_slice(&provider.request_body(&request)).unwrap();
    let results = |blocks: Value| json!({"role": "user", "content": blocks});
    assert_eq!(
        body,
        json!({
            "model": "m",
            "max_tokens": 4096,
            "system": "S",
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    thinking,
                    {"type": "tool_use", "id": "a", "name": "read_file", "input": {"path": "/x"}},
                    {"type": "tool_use", "id": "b", "name": "read_file", "input": {"_raw": "{\"path\":"}},
                    {"type": "tool_use", "id": "c", "name": "read_file", "input": {"_raw": "[1]"}},
                    {"type": "tool_use", "id": "d", "name": "read_file", "input": {"n": 2}}
                ]},
                results(json!([
                    {"type": "tool_result", "tool_use_id": "a", "content": "x", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "b", "content": "bad", "is_error": true}
                ])),
                {"role": "user", "content": "and?"},
                results(json!([
                    {"type": "tool_result", "tool_use_id": "c", "content": "c", "is_error": false}
                ])),
                {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
            ]
        })
    );
}
