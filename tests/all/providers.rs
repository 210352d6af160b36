//! Real provider responses, recorded by public projects and stored verbatim in
//! `tests/corpus/providers` (see its SOURCES.md): each body is served as recorded
//! (status, content type, bytes) by a local HTTP server, and the provider must
//! assemble the text, tool calls (ids, names, arguments), reasoning, refusal, finish
//! reason and usage the recording holds — or the typed error it shows. Recordings
//! whose reading decides how an agent ends (an empty refusal, a tool call cut at
//! max_tokens) also run through the agent loop.

use std::path::PathBuf;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warren::Event;
use warren::{connect, ChatRequest, FinishReason, LlmError, Message, ModelConfig};
use warren::{AgentState, RunReport};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::World;

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
    let corpus = crate::support::root().join("tests/corpus/providers");
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
    let result = model.chat(&request, &warren::EventSink::none()).await;
    let expected = &recording.expected;
    if !expected["error"].is_null() || status != 200 {
        let error = match result {
            Ok(response) => return Err(format!("expected an error, got {response:?}")),
            Err(error) => error,
        };
        let text = error.to_string();
        if matches!(error, LlmError::Malformed { .. }) || text.contains("HTTP 0") {
            return Err(format!("untyped error: {text}"));
        }
        let wanted = expected["error"]["type"].as_str().unwrap_or_default();
        let fits = match &error {
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
        return if fits {
            Ok(())
        } else {
            Err(format!("error of the wrong kind: {error:?}"))
        };
    }
    let response = result.map_err(|e| format!("failed: {e}"))?;
    let message = &response.message;
    let mut differences = Vec::new();
    if message.text != expected["text"].as_str().unwrap_or_default() {
        differences.push(format!("text {:?} != {:?}", message.text, expected["text"]));
    }
    let calls = expected["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if calls.len() != message.tool_calls.len() {
        differences.push(format!(
            "{} tool calls != {}",
            message.tool_calls.len(),
            calls.len()
        ));
    }
    for (call, want) in message.tool_calls.iter().zip(&calls) {
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
    if let Some(finish) = expected["finish_reason"].as_str() {
        if !finish_matches(&response.finish, finish) {
            differences.push(format!("finish {:?} != {finish}", response.finish));
        }
    }
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
        ("input_tokens", response.usage.input_tokens),
        ("output_tokens", response.usage.output_tokens),
        ("cached_input_tokens", response.usage.cached_input_tokens),
    ] {
        if let Some(want) = usage[key].as_u64() {
            if got != want {
                differences.push(format!("{key} {got} != {want}"));
            }
        }
    }
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

/// A recording as the fake LLM server answers it: its status, content type and body.
fn recorded_reply(name: &str) -> Reply {
    let recording = recordings().into_iter().find(|r| r.name == name).unwrap();
    let body = std::fs::read_to_string(recording.dir.join("body")).unwrap();
    Reply::Full {
        status: recording.meta["status"].as_integer().unwrap() as u16,
        headers: vec![(
            "content-type",
            recording.meta["content_type"].as_str().unwrap().to_string(),
        )],
        body,
    }
}

/// Runs `main` (no tools offered) on a streaming `provider` model at `server`, and
/// returns the report with every event of the run.
async fn run_streamed(server: &FakeLlm, provider: &str) -> (RunReport, Vec<Event>) {
    let world = World::new();
    let config = world.config(&format!(
        "[models.recorded]\nprovider = \"{provider}\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\nmax_retries = 0\n\
         [profiles.main]\ntools = []\n",
        server.base_url
    ));
    let host = warren::Host::load(warren::Config::load(&config).unwrap())
        .await
        .unwrap();
    let run = host.start("main", "What is 2 + 2?", None).unwrap();
    let mut stream = run.events();
    let report = run.wait().await;
    let events = std::iter::from_fn(|| stream.try_next())
        .map(|record| record.event)
        .collect();
    (report, events)
}

/// Snowflake Cortex sends `"refusal": ""` on every delta of an ordinary answer: the
/// agent ends `ok` with that answer, not `refused`.
#[tokio::test]
async fn an_answer_with_empty_refusals_is_an_answer() {
    let server = FakeLlm::start().await;
    server.push(recorded_reply("snowflake-stream-empty-refusal-pydantic-ai"));
    let (report, _) = run_streamed(&server, "openai").await;
    assert_eq!(report.root.state, AgentState::Ok, "{:?}", report.root);
    assert_eq!(report.root.text, "4");
    assert_eq!(report.root.error, None);
}

/// A turn cut at max_tokens in the middle of a tool call's arguments (Anthropic
/// `max_tokens` as recorded, OpenAI `length`) runs none of its calls: the agent ends
/// `truncated`, the error names the cut call, and nothing reaches the tool.
#[tokio::test]
async fn a_turn_cut_at_max_tokens_runs_none_of_its_calls() {
    let cut_openai = Reply::openai_stream(vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"/docs/a.md\"}"}},
            {"index": 1, "id": "call_2", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\": \"/out/taxes.txt\", \"content\": \"# Tax gu"}}
        ]}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
    ]);
    for (provider, reply, cut) in [
        (
            "anthropic",
            recorded_reply("anthropic-stream-max-tokens-partial-tool-sdk"),
            "make_file",
        ),
        ("openai", cut_openai, "write_file"),
    ] {
        let server = FakeLlm::start().await;
        server.push(reply);
        let (report, events) = run_streamed(&server, provider).await;
        let calls: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::ToolCallStarted { .. }))
            .collect();
        assert!(calls.is_empty(), "{provider}: {calls:?}");
        assert_eq!(server.requests().len(), 1, "{provider}: no second turn");
        assert_eq!(
            report.root.state,
            AgentState::Truncated,
            "{provider}: {:?}",
            report.root
        );
        let error = report.root.error.as_deref().unwrap();
        assert!(
            error.contains(&format!("`{cut}`"))
                && error.contains("max_tokens in [models.recorded]"),
            "{provider}: {error}"
        );
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
    let provider = warren::Anthropic::new("recorded", &config, &Default::default()).unwrap();
    let model = connect("recorded", &config, &Default::default()).unwrap();
    let request = ChatRequest {
        messages: vec![Message::User("Hello".into())],
        ..ChatRequest::default()
    };
    let response = model
        .chat(&request, &warren::EventSink::none())
        .await
        .unwrap();
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
    let body: Value = serde_json::from_slice(&provider.body(&next)).unwrap();
    assert_eq!(&body["messages"][1]["content"][0], &thinking[0]);
}

/// A finish reason that loses the answer is not success: `length` with no tool call
/// ends the agent `truncated`, a refusal or content filter ends it `refused`, and the
/// parent's result block, the run's JSON and the table say so.
#[tokio::test]
async fn truncated_and_refused_answers_end_in_their_own_states() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let answer = |finish: &str, message: Value| {
        Reply::json(json!({
            "choices": [{"finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}
        }))
    };
    server.route(
        "ROOT",
        Reply::json(json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "spawn_agent", "arguments": "{\"profile\":\"worker\",\"task\":\"CUT\",\"background\":false}"}},
                {"id": "c2", "type": "function", "function": {"name": "spawn_agent", "arguments": "{\"profile\":\"worker\",\"task\":\"REFUSE\",\"background\":false}"}}
            ]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}
        })),
    );
    server.route(
        "CUT",
        answer(
            "length",
            json!({"role": "assistant", "content": "The first half of"}),
        ),
    );
    server.route(
        "REFUSE",
        answer(
            "stop",
            json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}),
        ),
    );
    server.route(
        "refused",
        answer(
            "length",
            json!({"role": "assistant", "content": "Both failed and"}),
        ),
    );
    let config = world.config(&format!(
        "[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n\
         [profiles.main]\ntools = []\n[profiles.worker]\ntools = []\n",
        server.base_url
    ));
    let host = warren::Host::load(warren::Config::load(&config).unwrap())
        .await
        .unwrap();
    let report = host.start("main", "ROOT", None).unwrap().wait().await;
    assert_eq!(
        report.root.state,
        AgentState::Truncated,
        "{:?}",
        report.root
    );
    assert!(report
        .root
        .error
        .as_deref()
        .unwrap()
        .contains("truncated at max_tokens"));
    let results: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains("refused"))
        .flat_map(|r| r.body["messages"].as_array().unwrap().clone())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert!(
        results
            .iter()
            .any(|r| r.contains(": ERROR] worker · truncated at max_tokens")),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| r.contains(": ERROR] worker · refused: I can't help with that.")),
        "{results:?}"
    );
    let states: Vec<&str> = report
        .agents
        .iter()
        .filter_map(|job| job.outcome.as_ref().map(|outcome| outcome.state.as_str()))
        .collect();
    assert!(
        states.contains(&"refused") && states.contains(&"truncated"),
        "{states:?}"
    );
}

/// Spawn calls as other sub-agent systems shape them: no `profile` (the parent's own,
/// even with no `[profiles]` at all), a `description` label, `tools` as a comma
/// string, `max_turns` raised up to the profile's ceiling, and a built-in prompt for a
/// sub-agent whose profile has none.
#[tokio::test]
async fn spawn_calls_shaped_like_other_systems_work() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let call = |id: &str, name: &str, args: Value| {
        Reply::json(json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}
            ]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}
        }))
    };
    let done = |text: &str| {
        Reply::json(json!({
            "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}
        }))
    };
    server.route(
        "ROOT",
        call("s1", "spawn_agent", json!({
            "task": "COUNT the notes", "description": "Count notes", "tools": "list_dir, read_file",
            "max_turns": 5, "background": false
        })),
    );
    // The child needs four turns: more than max_turns = 3, within the spawn's 5.
    server.route("COUNT", call("l1", "list_dir", json!({"path": "/docs"})));
    server.route("notes.md", call("l2", "list_dir", json!({"path": "/docs"})));
    server.push(call("l3", "read_file", json!({"path": "/docs/notes.md"})));
    server.push(done("three lines"));
    server.push(done("root: three lines"));
    let config = world.config(&format!(
        "[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n\
         [defaults]\nmax_turns = 3\nmax_turns_ceiling = 10\nmax_depth = 1\n[defaults.capabilities]\nfs = [{{ host = \"docs\", guest = \"/docs\" }}]\n",
        server.base_url
    ));
    let config = warren::Config::load(&config).unwrap();
    assert!(
        config.profiles.is_empty(),
        "no [profiles]: main is implicit"
    );
    let host = warren::Host::load(config).await.unwrap();
    let report = host.start("main", "ROOT", None).unwrap().wait().await;
    assert_eq!(report.root.state, AgentState::Ok, "{:?}", report.root);
    let requests = server.requests();
    let spawn = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "spawn_agent")
        .unwrap()["function"]["parameters"]
        .clone();
    assert!(
        spawn["properties"]["profile"].get("enum").is_none(),
        "{spawn}"
    );
    assert_eq!(spawn["required"], json!(["task"]));
    let child: Vec<_> = requests
        .iter()
        .filter(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .is_some_and(|c| c.contains("COUNT"))
        })
        .collect();
    assert_eq!(
        child.len(),
        4,
        "four child turns within the raised max_turns"
    );
    assert!(child[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .starts_with("You are a sub-agent"));
    let offered: Vec<&str> = child[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["list_dir", "read_file"]);
    let result = requests.last().unwrap().body.to_string();
    assert!(
        result.contains(": OK] main (Count notes) · 4 turns"),
        "{result}"
    );
}
