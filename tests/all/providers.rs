//! Real provider responses, recorded by public projects and stored verbatim in
//! `tests/corpus/providers` (see its SOURCES.md), through the agent loop: recordings
//! whose reading decides how an agent ends (an empty refusal, a tool call cut at
//! max_tokens). That each recording's text, tool calls, reasoning, refusal, finish
//! reason and usage are read as it holds them is a unit test of the providers
//! (`host/src/llm/tests/recorded.rs`).

use serde_json::{json, Value};
use warren::Event;
use warren::{AgentState, RunReport};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::World;

/// A recording as the fake LLM server answers it: its status, content type and body.
fn recorded_reply(name: &str) -> Reply {
    let dir = crate::support::root()
        .join("tests/corpus/providers")
        .join(name);
    let meta: toml::Table = std::fs::read_to_string(dir.join("meta.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let body = std::fs::read_to_string(dir.join("body")).unwrap();
    Reply::Full {
        status: meta["status"].as_integer().unwrap() as u16,
        headers: vec![(
            "content-type",
            meta["content_type"].as_str().unwrap().to_string(),
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
    let states: Vec<AgentState> = report
        .agents
        .iter()
        .filter_map(|job| job.outcome.as_ref().map(|outcome| outcome.state))
        .collect();
    assert!(
        states.contains(&AgentState::Refused) && states.contains(&AgentState::Truncated),
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
        config.defined_profiles().is_empty(),
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
