//! Output schemas given by a spawning model that make checking an answer explode
//! (issue 44), through the `warren` binary on the fake model: forty `$defs` each
//! referring twice to the next (2.6 KB, 2^40 branches) are refused at spawn naming
//! the argument and the limit; a schema recursing into the answer, with an answer
//! nested forty deep, is not checked past its step budget and the child ends
//! `invalid_output`. Before, either pinned a core for ever and `timeout_s` never
//! ended the run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_llm::{model_table, FakeLlm, Reply};
use crate::support::{text, World};

/// Marks the child's requests (its system prompt).
const CHILD: &str = "CHILD-PROMPT";
/// Longest a run may take here: the fixed warren answers in seconds.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// Forty `$defs`, each referring twice to the next, the last a string.
fn doubling(levels: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for level in 0..levels {
        let next = format!("#/$defs/d{}", level + 1);
        defs.insert(
            format!("d{level}"),
            json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert(format!("d{levels}"), json!({"type": "string"}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

/// A project on `server`: `main` spawns, `plain` answers.
fn project(world: &World, server: &FakeLlm) {
    std::fs::write(
        world.path("warren.toml"),
        format!(
            r#"
{models}
[profiles.main]
system_prompt = "ROOT-PROMPT"
tools = []

[profiles.plain]
description = "Answers"
system_prompt = "{CHILD}"
tools = []
"#,
            models = model_table(&server.base_url)
        ),
    )
    .unwrap();
}

/// The root spawns `plain` in the foreground with `schema` and a 20 s `timeout_s`,
/// then answers `done`; the child always answers `answer`.
fn script(server: &FakeLlm, schema: Value, answer: String) {
    server.respond_with(Arc::new(move |body: &Value| {
        if body.to_string().contains(CHILD) {
            return Some(Reply::answer(&answer, (10, 5)));
        }
        let first = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().all(|m| m["role"] != "assistant"));
        Some(if first {
            Reply::tool_calls(
                &[(
                    "spawn_agent",
                    json!({"profile": "plain", "task": "answer", "background": false,
                           "timeout_s": 20, "output_schema": schema}),
                )],
                (10, 5),
            )
        } else {
            Reply::answer("done", (10, 5))
        })
    }));
}

/// `warren run --json go` in `world`, killed if it runs past [`RUN_LIMIT`]: the
/// report, or a panic saying it did not end.
async fn run(world: &World) -> Value {
    let dir = world.dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(["run", "--json", "-q", "--no-journal", "go"])
            .current_dir(dir)
            .env_remove("WARREN_CONFIG")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > RUN_LIMIT {
                let _ = child.kill();
                let output = child.wait_with_output().unwrap();
                panic!(
                    "the run did not end within {RUN_LIMIT:?}: {}",
                    text(&output.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let output = child.wait_with_output().unwrap();
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&output.stdout), text(&output.stderr)))
    })
    .await
    .unwrap()
}

/// The newest message of the root's last request (the spawn's result).
fn spawn_result(server: &FakeLlm) -> String {
    server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .rfind(|b| !b.to_string().contains(CHILD))
        .and_then(|b| b["messages"].as_array()?.last().cloned())
        .map(|m| m.to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_branching_two_to_the_fortieth_is_refused_at_spawn() {
    let server = FakeLlm::start().await;
    let world = World::new();
    project(&world, &server);
    let schema = doubling(40);
    assert!(
        schema.to_string().len() < 2700,
        "{}",
        schema.to_string().len()
    );
    script(&server, schema, "{}".into());
    let report = run(&world).await;
    assert_eq!(report["agents"].as_array().unwrap().len(), 1, "{report:#}");
    let result = spawn_result(&server);
    assert!(
        result.contains("`output_schema`") && result.contains("MAX_OUTPUT_SCHEMA_BRANCHES"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_too_costly_to_check_ends_invalid_output() {
    let server = FakeLlm::start().await;
    let world = World::new();
    project(&world, &server);
    let schema = json!({"anyOf": [
        {"type": "array", "items": {"$ref": "#"}},
        {"type": "array", "items": {"$ref": "#"}, "minItems": 1}
    ]});
    let mut answer = json!([1]);
    for _ in 0..40 {
        answer = json!([answer]);
    }
    script(&server, schema, answer.to_string());
    let report = run(&world).await;
    let child = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["profile"] == "plain")
        .unwrap_or_else(|| panic!("no child: {report:#}"))
        .clone();
    assert_eq!(child["state"], "invalid_output", "{child:#}");
    assert!(
        child["error"]
            .as_str()
            .is_some_and(|e| e.contains("MAX_SCHEMA_CHECK_STEPS")),
        "{child:#}"
    );
}
