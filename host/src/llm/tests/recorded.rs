//! Real provider responses, recorded by public projects and stored verbatim in
//! `tests/corpus/providers` (see its SOURCES.md): each body is served as recorded
//! (status, content type, bytes) by a server on 127.0.0.1:0, and the provider must
//! assemble the text, tool calls (ids, names, arguments), reasoning, refusal, finish
//! reason and usage the recording holds — or the typed error it shows. (Recordings
//! whose reading decides how an agent ends run through the agent loop in
//! `tests/all/providers.rs`.)

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::llm::anthropic::Anthropic;
use crate::llm::http::HttpApi as _;
use crate::llm::{
    connect, ChatRequest, EventSink, FinishReason, LlmError, Message, ModelConfig, ToolCall, Usage,
};

/// Serves `body` once with `status` and `content_type` on 127.0.0.1:0; returns the
/// base URL.
async fn serve_once(status: u16, content_type: String, body: Vec<u8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut request = Vec::new();
        let mut buffer = [0u8; 8192];
        loop {
            let n = socket.read(&mut buffer).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            request.extend_from_slice(&buffer[..n]);
            if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
        }
        let head = format!(
            "HTTP/1.1 {status} Recorded\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(&body).await;
        let _ = socket.shutdown().await;
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// One recording: its directory and what its meta.toml says.
struct Recording {
    dir: PathBuf,
    name: String,
    meta: toml::Table,
    expected: Value,
}

fn recordings() -> Vec<Recording> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/providers");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| Recording {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            meta: std::fs::read_to_string(dir.join("meta.toml"))
                .unwrap()
                .parse()
                .unwrap(),
            expected: serde_json::from_str(
                &std::fs::read_to_string(dir.join("expected.json")).unwrap(),
            )
            .unwrap(),
            dir,
        })
        .collect()
}

fn finish_matches(finish: &FinishReason, expected: &str) -> bool {
    match expected {
        "stop" | "end_turn" | "stop_sequence" | "eos" => *finish == FinishReason::Stop,
        "tool_calls" | "tool_use" | "function_call" => *finish == FinishReason::ToolCalls,
        "length" | "max_tokens" => *finish == FinishReason::Length,
        "content_filter" | "refusal" => *finish == FinishReason::ContentFilter,
        other => *finish == FinishReason::Other(other.to_string()),
    }
}

/// Replays one recording; an `Err` says what differs.
async fn replay(recording: &Recording) -> Result<(), String> {
    let meta = &recording.meta;
    let provider = match meta["api"].as_str().unwrap() {
        "openai" => "openai",
        "anthropic" => "anthropic",
        other => return Err(format!("api {other} is not one warren speaks")),
    };
    let status = meta["status"].as_integer().unwrap() as u16;
    let stream = meta["stream"].as_bool().unwrap();
    let body = std::fs::read(recording.dir.join("body")).unwrap();
    let base_url = serve_once(
        status,
        meta["content_type"].as_str().unwrap().to_string(),
        body,
    )
    .await;
    let config: ModelConfig = toml::from_str(&format!(
        "provider = \"{provider}\"\nbase_url = \"{base_url}\"\nmodel = \"recorded\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = {stream}\nmax_retries = 0\n"
    ))
    .unwrap();
    let model =
        connect(&recording.name, &config, &Default::default()).map_err(|e| e.to_string())?;
    let request = ChatRequest {
        system: "You are helpful.".into(),
        messages: vec![Message::User("Hello".into())],
        ..ChatRequest::default()
    };
    let result = model.chat(&request, &EventSink::none()).await;
    let expected = &recording.expected;
    if !expected["error"].is_null() || status != 200 {
        return match result {
            Ok(response) => Err(format!("expected an error, got {response:?}")),
            Err(error) => error_fits(&error, status, expected),
        };
    }
    let response = result.map_err(|e| format!("failed: {e}"))?;
    let message = &response.message;
    let mut differences = Vec::new();
    if message.text != expected["text"].as_str().unwrap_or_default() {
        differences.push(format!("text {:?} != {:?}", message.text, expected["text"]));
    }
    differences.extend(call_differences(&message.tool_calls, expected));
    if let Some(finish) = expected["finish_reason"].as_str() {
        if !finish_matches(&response.finish, finish) {
            differences.push(format!("finish {:?} != {finish}", response.finish));
        }
    }
    differences.extend(usage_differences(&response.usage, provider, expected));
    if let Some(reasoning) = expected["reasoning"].as_str() {
        if message.reasoning.trim() != reasoning.trim() {
            differences.push(format!(
                "reasoning {:?} != {reasoning:?}",
                message.reasoning
            ));
        }
    } else if !message.reasoning.is_empty() {
        differences.push(format!("unexpected reasoning {:?}", message.reasoning));
    }
    // No `refusal` key means the model did not refuse (an empty `"refusal": ""` on
    // every delta is how some servers say so).
    let refusal = expected.get("refusal").and_then(Value::as_str);
    if message.refusal.as_deref() != refusal {
        differences.push(format!("refusal {:?} != {refusal:?}", message.refusal));
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(differences.join("; "))
    }
}

/// Whether `error`, read from a recording of HTTP `status` whose expected result is
/// `expected`, is typed as the recording's error is.
fn error_fits(error: &LlmError, status: u16, expected: &Value) -> Result<(), String> {
    let text = error.to_string();
    if matches!(error, LlmError::Malformed { .. }) || text.contains("HTTP 0") {
        return Err(format!("untyped error: {text}"));
    }
    let wanted = expected["error"]["type"].as_str().unwrap_or_default();
    let fits = match error {
        LlmError::Auth { .. } => status == 401 || status == 403 || wanted.contains("auth"),
        LlmError::RateLimited { .. } => status == 429 || wanted.contains("rate"),
        LlmError::UnknownModel { .. } => status == 404 || text.contains("model"),
        LlmError::ContextTooLong { .. } => {
            text.to_lowercase().contains("context") || text.contains("too long")
        }
        LlmError::Server { .. } => {
            status >= 500
                || wanted.contains("overloaded")
                || wanted.contains("server")
                || wanted.contains("api_error")
        }
        LlmError::BadRequest { .. } => {
            (400..500).contains(&status) || wanted.contains("invalid") || status == 200
        }
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(format!("error of the wrong kind: {error:?}"))
    }
}

/// How the tool calls read from a recording differ from those it holds.
fn call_differences(tool_calls: &[ToolCall], expected: &Value) -> Vec<String> {
    let mut differences = Vec::new();
    let calls = expected["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if calls.len() != tool_calls.len() {
        differences.push(format!(
            "{} tool calls != {}",
            tool_calls.len(),
            calls.len()
        ));
    }
    for (call, want) in tool_calls.iter().zip(&calls) {
        if let Some(id) = want["id"].as_str().filter(|id| !id.is_empty()) {
            if call.id != id {
                differences.push(format!("id {} != {id}", call.id));
            }
        }
        if call.name != want["name"].as_str().unwrap_or_default() {
            differences.push(format!("name {} != {}", call.name, want["name"]));
        }
        match want.get("arguments_raw").and_then(Value::as_str) {
            Some(raw) if want["arguments"].is_null() => {
                if call.arguments != raw {
                    differences.push(format!("raw arguments {:?} != {raw:?}", call.arguments));
                }
            }
            _ => {
                let parsed: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
                if parsed != want["arguments"] {
                    differences.push(format!("arguments {parsed} != {}", want["arguments"]));
                }
            }
        }
    }
    differences
}

/// How the usage read from a recording of `provider` differs from what it holds.
fn usage_differences(got: &Usage, provider: &str, expected: &Value) -> Vec<String> {
    let mut differences = Vec::new();
    let usage = &expected["usage"];
    // warren counts cached prompt tokens in `input_tokens` (Anthropic reports them
    // apart); the recording holds the provider's own figures.
    let mut usage = usage.clone();
    if provider == "anthropic" {
        if let (Some(input), Some(cached)) = (
            usage["input_tokens"].as_u64(),
            usage["cached_input_tokens"].as_u64(),
        ) {
            usage["input_tokens"] = (input + cached).into();
        }
    }
    for (key, got) in [
        ("input_tokens", got.input_tokens),
        ("output_tokens", got.output_tokens),
        ("cached_input_tokens", got.cached_input_tokens),
    ] {
        if let Some(want) = usage[key].as_u64() {
            if got != want {
                differences.push(format!("{key} {got} != {want}"));
            }
        }
    }
    differences
}

#[tokio::test]
async fn recorded_provider_responses_replay_to_what_they_hold() {
    let recordings = recordings();
    assert!(recordings.len() >= 40, "{} recordings", recordings.len());
    let mut failures = Vec::new();
    let mut families = std::collections::BTreeSet::new();
    let mut replayed = 0;
    for recording in &recordings {
        let api = recording.meta["api"].as_str().unwrap();
        if api != "openai" && api != "anthropic" {
            // The old completions API (vLLM recordings): not one warren speaks.
            continue;
        }
        families.insert(recording.meta["family"].as_str().unwrap().to_string());
        replayed += 1;
        if let Err(difference) = replay(recording).await {
            failures.push(format!("{}: {difference}", recording.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {replayed} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for family in [
        "openai",
        "anthropic",
        "ollama",
        "llamacpp",
        "lmstudio",
        "openrouter",
        "groq",
        "deepseek",
        "mistral",
        "together",
        "gemini",
    ] {
        assert!(families.contains(family), "no {family} recording replayed");
    }
}

/// Anthropic thinking blocks (with their signatures) come back unchanged, first in the
/// assistant turn, in the next request: the API requires it when tools are used with
/// extended thinking.
#[tokio::test]
async fn anthropic_thinking_blocks_are_sent_back_unchanged() {
    let recording = recordings()
        .into_iter()
        .find(|r| r.name == "anthropic-stream-thinking-pydantic-ai")
        .unwrap();
    let body = std::fs::read(recording.dir.join("body")).unwrap();
    let base_url = serve_once(200, "text/event-stream".into(), body).await;
    let config: ModelConfig = toml::from_str(&format!(
        "provider = \"anthropic\"\nbase_url = \"{base_url}\"\nmodel = \"recorded\"\napi_key_env = \"CARGO_PKG_NAME\"\nmax_retries = 0\n"
    ))
    .unwrap();
    let provider = Anthropic::new("recorded", &config, &Default::default()).unwrap();
    let model = connect("recorded", &config, &Default::default()).unwrap();
    let request = ChatRequest {
        messages: vec![Message::User("Hello".into())],
        ..ChatRequest::default()
    };
    let response = model.chat(&request, &EventSink::none()).await.unwrap();
    let thinking = &response.message.provider_blocks;
    assert_eq!(thinking.len(), 1, "{:?}", response.message);
    assert_eq!(thinking[0]["type"], "thinking");
    assert!(!thinking[0]["signature"].as_str().unwrap().is_empty());
    assert_eq!(
        thinking[0]["thinking"].as_str().unwrap(),
        response.message.reasoning
    );
    let next = ChatRequest {
        messages: vec![
            Message::User("Hello".into()),
            Message::Assistant(response.message.clone()),
            Message::User("And then?".into()),
        ],
        ..ChatRequest::default()
    };
    let body: Value = serde_json::from_slice(&provider.request_body(&next)).unwrap();
    assert_eq!(&body["messages"][1]["content"][0], &thinking[0]);
}
