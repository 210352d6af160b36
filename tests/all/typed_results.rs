//! Typed results (output schemas) through the real `warren` binary against the fake
//! LLM server, in both wire formats: a child's answer delivered as JSON, one
//! correction after an invalid answer, `invalid_output` after a second, an answer cut
//! at max_tokens, a server refusing `response_format`, `warren run --output-schema`
//! piped into `jq`, and schemas refused when they are not JSON Schema or too large.

use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::fake_llm::{newest, FakeLlm, Reply};
use crate::support::{text, warren, World};

/// The two wire formats.
#[derive(Clone, Copy, Debug)]
enum Wire {
    OpenAi,
    Anthropic,
}

const WIRES: [Wire; 2] = [Wire::OpenAi, Wire::Anthropic];

/// The child profile's schema, as TOML and as JSON.
const COUNT_SCHEMA_TOML: &str =
    r#"{ type = "object", properties = { count = { type = "integer" } }, required = ["count"] }"#;

fn count_schema() -> Value {
    json!({"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]})
}

/// Marks the child's requests (its system prompt).
const CHILD: &str = "COUNTER-PROMPT";

impl Wire {
    fn provider(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
        }
    }

    /// A final text answer.
    fn answer(self, text: &str) -> Reply {
        match self {
            Wire::OpenAi => Reply::answer(text, (10, 5)),
            Wire::Anthropic => Reply::json(json!({
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5}
            })),
        }
    }

    /// An answer cut at the output limit.
    fn cut(self, text: &str) -> Reply {
        match self {
            Wire::OpenAi => Reply::json(json!({
                "choices": [{"finish_reason": "length", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5}
            })),
            Wire::Anthropic => Reply::json(json!({
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens",
                "usage": {"input_tokens": 10, "output_tokens": 5}
            })),
        }
    }

    /// One tool call.
    fn call(self, name: &str, arguments: Value) -> Reply {
        match self {
            Wire::OpenAi => Reply::tool_calls(&[(name, arguments)], (10, 5)),
            Wire::Anthropic => Reply::json(json!({
                "content": [{"type": "tool_use", "id": format!("toolu_{name}"), "name": name, "input": arguments}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5}
            })),
        }
    }

    /// A typed answer the way this wire gives one: the JSON as the answer's text
    /// (OpenAI-compatible, `response_format`), or a `report_result` call (Anthropic).
    fn typed(self, value: Value) -> Reply {
        match self {
            Wire::OpenAi => self.answer(&value.to_string()),
            Wire::Anthropic => self.call("report_result", value),
        }
    }
}

/// `warren.toml`: the fake model in `wire`, a root `main` and a typed `counter`.
fn config(server: &FakeLlm, wire: Wire, extra: &str) -> String {
    format!(
        r#"
[models.fake]
provider = "{}"
base_url = "{}"
model = "fake-model"
api_key_env = "CARGO_PKG_NAME"
stream = false
max_retries = 0

[profiles.main]
system_prompt = "ROOT-PROMPT"
tools = []

[profiles.counter]
description = "Counts things"
system_prompt = "{CHILD}"
tools = []
output_schema = {COUNT_SCHEMA_TOML}
{extra}
"#,
        wire.provider(),
        server.base_url
    )
}

/// Answers the root (spawn the counter in the foreground, then say "done") and the
/// child (its replies in turn, the last repeated).
fn script(server: &FakeLlm, wire: Wire, spawn: Value, child: Vec<Reply>) {
    let child = Arc::new(std::sync::Mutex::new(child));
    server.respond_with(Arc::new(move |body: &Value| {
        if body.to_string().contains(CHILD) {
            let mut replies = child.lock().unwrap();
            return Some(if replies.len() > 1 {
                replies.remove(0)
            } else {
                clone_reply(&replies[0])
            });
        }
        let first = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().filter(|m| m["role"] == "assistant").count() == 0);
        Some(if first {
            wire.call("spawn_agent", spawn.clone())
        } else {
            wire.answer("done")
        })
    }));
}

/// A copy of a full reply (the only kind these tests repeat).
fn clone_reply(reply: &Reply) -> Reply {
    match reply {
        Reply::Full {
            status,
            headers,
            body,
        } => Reply::Full {
            status: *status,
            headers: headers.clone(),
            body: body.clone(),
        },
        _ => panic!("only full replies repeat"),
    }
}

fn foreground(profile: &str) -> Value {
    json!({"profile": profile, "task": "count the foxes", "background": false})
}

/// `warren run --json TASK` in `dir`: the report, and stderr.
fn run_json(dir: &std::path::Path) -> (Value, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "--json", "-q", "--no-journal", "go"])
        .current_dir(dir)
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&output.stdout), text(&output.stderr)));
    (report, text(&output.stderr))
}

/// The child's entry in a `--json` report.
fn child(report: &Value) -> &Value {
    report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["profile"] == "counter")
        .unwrap_or_else(|| panic!("no counter child: {report:#}"))
}

/// The requests the child made.
fn child_requests(server: &FakeLlm) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| b.to_string().contains(CHILD))
        .collect()
}

/// The root's last request, as text (it holds the spawn's result block).
fn root_last(server: &FakeLlm) -> String {
    server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .rfind(|b| !b.to_string().contains(CHILD))
        .map(|b| newest(&b))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_typed_child_answers_json_that_the_parent_and_the_report_receive() {
    for wire in WIRES {
        let server = FakeLlm::start().await;
        let world = World::new();
        std::fs::write(world.path("warren.toml"), config(&server, wire, "")).unwrap();
        script(
            &server,
            wire,
            foreground("counter"),
            vec![wire.typed(json!({"count": 3}))],
        );
        let (report, stderr) = blocking_run(&world).await;
        assert_eq!(report["state"], "ok", "{wire:?}: {report:#}\n{stderr}");
        let counter = child(&report);
        assert_eq!(counter["state"], "ok", "{wire:?}: {report:#}");
        assert_eq!(counter["output"], json!({"count": 3}), "{wire:?}");
        assert_eq!(counter["text"], r#"{"count":3}"#, "{wire:?}");
        assert_eq!(report["output"], Value::Null, "the root is not typed");
        // The parent model reads the compact JSON inside the result block.
        let block = root_last(&server);
        assert!(block.contains(r#": OK] counter"#), "{wire:?}: {block}");
        assert!(block.contains(r#"{\"count\":3}"#), "{wire:?}: {block}");
        // The child was told the schema, and asked for it the provider's way.
        let asked = &child_requests(&server)[0];
        assert!(
            asked.to_string().contains("<output_schema>"),
            "{wire:?}: {asked}"
        );
        match wire {
            Wire::OpenAi => {
                assert_eq!(asked["response_format"]["type"], "json_schema");
                assert_eq!(
                    asked["response_format"]["json_schema"]["schema"],
                    count_schema()
                );
                assert_eq!(asked["response_format"]["json_schema"]["strict"], false);
            }
            Wire::Anthropic => {
                let report_tool = asked["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["name"] == "report_result")
                    .unwrap_or_else(|| panic!("no report_result tool: {asked}"));
                assert_eq!(report_tool["input_schema"], count_schema());
                assert!(asked.get("response_format").is_none());
            }
        }
        // The root's own requests are untyped.
        let root = server
            .requests()
            .into_iter()
            .map(|r| r.body)
            .find(|b| !b.to_string().contains(CHILD))
            .unwrap();
        assert!(root.get("response_format").is_none(), "{root}");
        assert!(!root.to_string().contains("report_result"), "{root}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_answer_is_corrected_once_then_ends_invalid_output() {
    for wire in WIRES {
        // Wrong, then right: one re-ask carrying the validation error.
        let server = FakeLlm::start().await;
        let world = World::new();
        std::fs::write(world.path("warren.toml"), config(&server, wire, "")).unwrap();
        script(
            &server,
            wire,
            foreground("counter"),
            vec![
                wire.typed(json!({"count": "three"})),
                wire.typed(json!({"count": 3})),
            ],
        );
        let (report, stderr) = blocking_run(&world).await;
        let counter = child(&report);
        assert_eq!(counter["state"], "ok", "{wire:?}: {report:#}\n{stderr}");
        assert_eq!(counter["output"], json!({"count": 3}));
        assert_eq!(counter["turns"], 2, "{wire:?}");
        let requests = child_requests(&server);
        assert_eq!(requests.len(), 2, "{wire:?}");
        let reask = newest(&requests[1]);
        assert!(
            reask.contains("does not match the output schema") && reask.contains("at /count"),
            "{wire:?}: the re-ask carries the errors: {reask}"
        );

        // Not JSON, then the wrong type: ends invalid_output with both the errors
        // and the raw answer, and the parent gets an ERROR block.
        let server = FakeLlm::start().await;
        std::fs::write(world.path("warren.toml"), config(&server, wire, "")).unwrap();
        script(
            &server,
            wire,
            foreground("counter"),
            vec![
                wire.answer("I counted three foxes."),
                wire.typed(json!({"count": "three"})),
            ],
        );
        let (report, stderr) = blocking_run(&world).await;
        let counter = child(&report);
        assert_eq!(
            counter["state"], "invalid_output",
            "{wire:?}: {report:#}\n{stderr}"
        );
        assert_eq!(counter["output"], Value::Null);
        let error = counter["error"].as_str().unwrap();
        assert!(error.contains("at /count"), "{wire:?}: {error}");
        assert!(
            counter["text"].as_str().unwrap().contains("three"),
            "the raw answer: {counter}"
        );
        let requests = child_requests(&server);
        assert_eq!(requests.len(), 2, "asked once more, not twice: {wire:?}");
        assert!(
            newest(&requests[1]).contains("not JSON"),
            "{wire:?}: {}",
            newest(&requests[1])
        );
        let block = root_last(&server);
        assert!(
            block.contains(": ERROR] counter") && block.contains("invalid output"),
            "{wire:?}: {block}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_cut_at_max_tokens_stays_truncated() {
    for wire in WIRES {
        let server = FakeLlm::start().await;
        let world = World::new();
        std::fs::write(world.path("warren.toml"), config(&server, wire, "")).unwrap();
        script(
            &server,
            wire,
            foreground("counter"),
            vec![wire.cut(r#"{"count": "#)],
        );
        let (report, _) = blocking_run(&world).await;
        let counter = child(&report);
        assert_eq!(counter["state"], "truncated", "{wire:?}: {report:#}");
        assert_eq!(child_requests(&server).len(), 1, "no re-ask: {wire:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_refusing_response_format_gets_the_schema_in_the_prompt_only() {
    let server = FakeLlm::start().await;
    let world = World::new();
    let wire = Wire::OpenAi;
    std::fs::write(world.path("warren.toml"), config(&server, wire, "")).unwrap();
    server.respond_with(Arc::new(move |body: &Value| {
        if !body.to_string().contains(CHILD) {
            let first = body["messages"]
                .as_array()
                .is_some_and(|m| !m.iter().any(|m| m["role"] == "assistant"));
            return Some(if first {
                wire.call("spawn_agent", foreground("counter"))
            } else {
                wire.answer("done")
            });
        }
        Some(if body.get("response_format").is_some() {
            Reply::status(
                400,
                r#"{"error":{"message":"Unrecognized request argument supplied: response_format"}}"#,
            )
        } else {
            wire.answer(r#"{"count": 4}"#)
        })
    }));
    let (report, stderr) = blocking_run(&world).await;
    let counter = child(&report);
    assert_eq!(counter["state"], "ok", "{report:#}\n{stderr}");
    assert_eq!(counter["output"], json!({"count": 4}));
    let requests = child_requests(&server);
    assert_eq!(requests.len(), 2, "sent once more without it");
    assert!(requests[1].get("response_format").is_none());
    assert!(requests[1].to_string().contains("<output_schema>"));
}

#[tokio::test(flavor = "multi_thread")]
async fn warren_run_output_schema_prints_json_for_jq() {
    let jq = Command::new("sh")
        .args(["-c", "command -v jq"])
        .output()
        .unwrap();
    assert!(
        jq.status.success(),
        "jq is needed for this test: scripts/install-deps installs it (apt-get install jq)"
    );
    for wire in WIRES {
        let server = FakeLlm::start().await;
        let world = World::new();
        std::fs::write(world.path("warren.toml"), config(&server, wire, "")).unwrap();
        std::fs::write(
            world.path("schema.json"),
            serde_json::to_string_pretty(&json!({
                "type": "object",
                "properties": {"title": {"type": "string"}, "foxes": {"type": "integer"}},
                "required": ["title", "foxes"]
            }))
            .unwrap(),
        )
        .unwrap();
        server.push(wire.typed(json!({"title": "Foxes", "foxes": 7})));
        let dir = world.dir.path().to_path_buf();
        let piped = tokio::task::spawn_blocking(move || {
            Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "{:?} run --no-journal -q --output-schema schema.json 'count' | jq -r '.title, .foxes'",
                    env!("CARGO_BIN_EXE_warren")
                ))
                .current_dir(dir)
                .env_remove("WARREN_CONFIG")
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(piped.status.success(), "{wire:?}: {}", text(&piped.stderr));
        assert_eq!(text(&piped.stdout), "Foxes\n7\n", "{wire:?}");
        let asked = &server.requests()[0].body;
        assert!(asked.to_string().contains("\"foxes\""), "{wire:?}: {asked}");

        // An invalid root answer prints nothing on stdout, and fails.
        server.push(wire.answer("seven foxes"));
        server.push(wire.answer("still seven foxes"));
        let output = warren(
            &world,
            &[
                "run",
                "--no-journal",
                "-q",
                "--output-schema",
                "schema.json",
                "count",
            ],
        );
        assert!(!output.status.success());
        assert_eq!(text(&output.stdout), "", "{wire:?}");
        assert!(
            text(&output.stderr).contains("ended invalid_output"),
            "{wire:?}: {}",
            text(&output.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_schemas_are_refused_naming_where_they_are() {
    let server = FakeLlm::start().await;
    let world = World::new();
    let wire = Wire::OpenAi;
    let load = |extra: &str| {
        std::fs::write(world.path("warren.toml"), config(&server, wire, extra)).unwrap();
        let output = warren(&world, &["agents"]);
        (output.status.code(), text(&output.stderr))
    };
    // Not JSON Schema.
    let (code, stderr) =
        load("[profiles.bad]\ntools = []\noutput_schema = { type = \"objekt\" }\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("profiles.bad.output_schema") && stderr.contains("not a valid JSON Schema"),
        "{stderr}"
    );
    // Too deep, from a file.
    let mut deep = json!({"type": "string"});
    for _ in 0..40 {
        deep = json!({"type": "array", "items": deep});
    }
    std::fs::write(world.path("deep.json"), deep.to_string()).unwrap();
    let (code, stderr) = load("[profiles.bad]\ntools = []\noutput_schema_file = \"deep.json\"\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("profiles.bad.output_schema_file")
            && stderr.contains("MAX_OUTPUT_SCHEMA_DEPTH"),
        "{stderr}"
    );
    // Too large.
    let large = json!({"type": "object", "description": "x".repeat(70 * 1024)});
    std::fs::write(world.path("large.json"), large.to_string()).unwrap();
    let (code, stderr) = load("[profiles.bad]\ntools = []\noutput_schema_file = \"large.json\"\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("MAX_OUTPUT_SCHEMA_BYTES"), "{stderr}");
    // Both at once.
    std::fs::write(world.path("ok.json"), count_schema().to_string()).unwrap();
    let (code, stderr) = load(&format!(
        "[profiles.bad]\ntools = []\noutput_schema = {COUNT_SCHEMA_TOML}\noutput_schema_file = \"ok.json\"\n"
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not both"), "{stderr}");
    // An agent file's.
    std::fs::write(world.path("warren.toml"), config(&server, wire, "")).unwrap();
    let agents = world.path(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("typed.md"),
        "---\nname: typed\ndescription: d\noutput_schema:\n  type: objekt\n---\nPrompt.\n",
    )
    .unwrap();
    let output = warren(&world, &["agents"]);
    let all = text(&output.stdout) + &text(&output.stderr);
    assert!(
        all.contains("output_schema: not a valid JSON Schema"),
        "{all}"
    );
    std::fs::remove_file(agents.join("typed.md")).unwrap();
    // --output-schema.
    std::fs::write(world.path("bad.json"), "{\"type\": 7}").unwrap();
    let output = warren(&world, &["run", "--output-schema", "bad.json", "go"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("--output-schema bad.json: not a valid JSON Schema"),
        "{}",
        text(&output.stderr)
    );
    let output = warren(&world, &["run", "--output-schema", "ok.json.missing", "go"]);
    assert_eq!(output.status.code(), Some(2));

    // spawn_agent: a bad schema argument, and one that differs from the profile's.
    for (spawn, says) in [
        (
            json!({"task": "t", "output_schema": {"type": "objekt"}, "background": false}),
            "`output_schema`: not a valid JSON Schema",
        ),
        (
            json!({"task": "t", "profile": "counter", "background": false,
                   "output_schema": {"type": "object", "required": ["total"]}}),
            "profile `counter` fixes its output schema",
        ),
    ] {
        let server = FakeLlm::start().await;
        std::fs::write(world.path("warren.toml"), config(&server, wire, "")).unwrap();
        script(&server, wire, spawn, vec![wire.answer("unused")]);
        let (report, _) = blocking_run(&world).await;
        assert_eq!(
            report["agents"].as_array().unwrap().len(),
            1,
            "no child: {report:#}"
        );
        let result = root_last(&server);
        assert!(result.contains(says), "{result}");
        if says.contains("fixes") {
            assert!(
                result.contains("total") && result.contains("count"),
                "names both: {result}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spawn_may_type_an_untyped_profiles_answer() {
    let server = FakeLlm::start().await;
    let world = World::new();
    let wire = Wire::Anthropic;
    std::fs::write(
        world.path("warren.toml"),
        config(
            &server,
            wire,
            &format!("[profiles.plain]\nsystem_prompt = \"{CHILD} plain\"\ntools = []\n"),
        ),
    )
    .unwrap();
    script(
        &server,
        wire,
        json!({"task": "list", "profile": "plain", "background": false,
               "output_schema": {"type": "array", "items": {"type": "string"}}}),
        vec![wire.call("report_result", json!({"result": ["a", "b"]}))],
    );
    let (report, stderr) = blocking_run(&world).await;
    let plain = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["profile"] == "plain")
        .unwrap();
    assert_eq!(plain["output"], json!(["a", "b"]), "{report:#}\n{stderr}");
    // A schema that is not an object's is wrapped for the report tool.
    let asked = &child_requests(&server)[0];
    let tool = asked["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "report_result")
        .unwrap();
    assert_eq!(
        tool["input_schema"]["properties"]["result"]["type"],
        "array"
    );
}

/// [`run_json`] off the async runtime (the fake server runs on it).
async fn blocking_run(world: &World) -> (Value, String) {
    let dir = world.dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || run_json(&dir))
        .await
        .unwrap()
}

#[test]
fn a_python_bullmq_producer_reads_a_field_of_a_typed_result() {
    use crate::queue::{python_bullmq, world, Redis, Worker};
    let (python, fixture) = python_bullmq();
    let redis = Redis::start();
    let script = r#"
[[turns]]
profile = "researcher"
when = "count the foxes"
text = '{"count": 2, "note": "two foxes"}'
[[turns]]
profile = "researcher"
when = "count the owls"
text = "I saw some owls."
[[turns]]
profile = "researcher"
when = "does not match the output schema"
text = "Some owls, I said."
"#;
    let dir = world("", script);
    let _worker = Worker::start(dir.path(), &redis, "w1", 1);
    // The producer sends its own schema with the job, and reads `output.count`.
    let produce = |task: &str, schema: &Value| -> (String, String) {
        let data = json!({"task": task, "profile": "researcher", "output_schema": schema});
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{python:?} {:?} {:?} warren {:?} 1 | {python:?} -c \"import json, sys; r = json.load(sys.stdin); print(r['state'], r['result']['state'] if r['result'] else r['failed']); print(r['result']['output']['count'] if r['result'] and r['result'].get('output') else r['result'])\"",
                fixture.join("producer.py"),
                redis.url(),
                data.to_string(),
            ))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
        let stdout = text(&output.stdout);
        let (head, field) = stdout
            .trim()
            .split_once('\n')
            .unwrap_or((stdout.trim(), ""));
        (head.to_string(), field.to_string())
    };
    let (state, count) = produce("count the foxes", &count_schema());
    assert_eq!(state, "completed ok");
    assert_eq!(count, "2");
    // Prose where JSON was asked for, twice: the job completes with the state.
    let (state, _) = produce("count the owls", &count_schema());
    assert_eq!(state, "completed invalid_output");
    // A schema that is not one fails the job at once, naming the field.
    let (state, _) = produce("count the foxes", &json!({"type": "objekt"}));
    assert!(
        state.starts_with("failed") && state.contains("`output_schema`: not a valid JSON Schema"),
        "{state}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_client_gets_structured_content() {
    // Served under a profile with no schema, then under one that fixes a schema (the
    // spawn tools then declare an outputSchema, which the SDK checks every result of
    // theirs against).
    for (wire, declared) in WIRES.into_iter().flat_map(|w| [(w, false), (w, true)]) {
        let server = FakeLlm::start().await;
        let world = World::new();
        let main = if declared {
            "[profiles.main]\ntools = [\"spawn\"]\noutput_schema = { type = \"object\" }"
        } else {
            "[profiles.main]\ntools = [\"spawn\"]"
        };
        // The SDK starts the server with a minimal environment: no key variable.
        let text = config(&server, wire, "")
            .replace(
                "[profiles.main]\nsystem_prompt = \"ROOT-PROMPT\"\ntools = []",
                main,
            )
            .replace("api_key_env = \"CARGO_PKG_NAME\"\n", "");
        std::fs::write(world.path("warren.toml"), text).unwrap();
        let counts = Arc::new(std::sync::atomic::AtomicU64::new(5));
        server.respond_with(Arc::new(move |_body: &Value| {
            let count = counts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Some(wire.typed(json!({"count": count})))
        }));
        let report = crate::mcp::client(&world, None, "structured").await;
        let results = report["foreground"]["results"]
            .as_array()
            .unwrap_or_else(|| panic!("{wire:?}: no structuredContent: {report:#}"));
        assert_eq!(results.len(), 1);
        assert_eq!(results[0]["state"], "ok");
        assert_eq!(results[0]["output"], json!({"count": 5}), "{wire:?}");
        assert!(report["foreground_text"]
            .as_str()
            .unwrap()
            .contains(r#"{"count":5}"#));
        assert_eq!(
            report["awaited"]["results"][0]["output"],
            json!({"count": 6})
        );
        if declared {
            let schema = &report["spawn_schema"];
            assert_eq!(schema["required"], json!(["results"]), "{report:#}");
            // A background spawn's result lists its job, not yet typed.
            let started = &report["started"]["results"][0];
            assert!(started["id"].is_string(), "{report:#}");
            assert_eq!(started["output"], Value::Null);
        } else {
            assert_eq!(report["spawn_schema"], Value::Null, "{report:#}");
            assert_eq!(
                report["started"],
                Value::Null,
                "a background spawn has no result yet"
            );
        }
    }
}
