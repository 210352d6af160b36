//! The OpenAI-compatible provider's request shape and stream reading.

use super::*;
use crate::llm::chat::{AssistantMessage, Message, ToolCall};
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
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/providers");
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
