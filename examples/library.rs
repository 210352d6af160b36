//! Embedding warren: a configuration made in code, a model provider written in Rust,
//! a root agent that hands a task to a sub-agent, and the report read back.
//!
//! The provider here is a few rules instead of an LLM, so the example runs offline
//! and always the same way; a real one would call a model in `chat`. Everything else
//! is warren as the binary runs it: the sub-agent's profile, its tools (the built-in
//! `read_file`, a WebAssembly component in its sandbox, granted one directory), the
//! spawn and await tools, limits and the run's journal.
//!
//! Run with: `cargo run --example library` (the suite runs it too: tests/all/library.rs).

use std::sync::Arc;

use warren::{
    AssistantMessage, ChatRequest, ChatResponse, EventSink, LlmError, Message, Provider, ToolCall,
    Usage,
};
use warren::{Config, FsGrant, FsMode, Host, RunReport};

/// A model that follows rules: the root spawns a `reader`, awaits it and passes its
/// answer on; the reader reads the file it was told of and counts its lines.
struct RuleModel;

#[async_trait::async_trait]
impl Provider for RuleModel {
    fn model(&self) -> &str {
        "rules"
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let message = match request.requester.profile.as_str() {
            "reader" => reader_turn(&request.messages),
            _ => root_turn(&request.messages),
        };
        if !message.text.is_empty() {
            events.text(&message.text);
        }
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Usage::default()
        };
        Ok(ChatResponse::of(message, usage))
    }
}

/// The last tool result of `messages`, with the tool's name.
fn last_result(messages: &[Message]) -> Option<(&str, &str)> {
    match messages.last()? {
        Message::ToolResult { name, content, .. } => Some((name.as_str(), content.as_str())),
        _ => None,
    }
}

fn call(name: &str, arguments: serde_json::Value) -> AssistantMessage {
    AssistantMessage {
        tool_calls: vec![ToolCall {
            id: format!("call_{name}"),
            name: name.to_string(),
            arguments: arguments.to_string(),
        }],
        ..AssistantMessage::default()
    }
}

fn say(text: String) -> AssistantMessage {
    AssistantMessage {
        text,
        ..AssistantMessage::default()
    }
}

fn root_turn(messages: &[Message]) -> AssistantMessage {
    match last_result(messages) {
        None => call(
            "spawn_agent",
            serde_json::json!({
                "profile": "reader",
                "task": "Count the lines of /notes/plan.txt and quote its first line.",
            }),
        ),
        Some(("spawn_agent", _)) => call("await_agents", serde_json::json!({"job_ids": "*"})),
        Some((_, content)) => say(format!("The reader reports:\n{content}")),
    }
}

fn reader_turn(messages: &[Message]) -> AssistantMessage {
    match last_result(messages) {
        None => call("read_file", serde_json::json!({"path": "/notes/plan.txt"})),
        Some((_, content)) => say(format!(
            "{} lines; the first is {:?}",
            content.lines().count(),
            content.lines().next().unwrap_or_default()
        )),
    }
}

/// Runs the example in `dir` (it writes `notes/plan.txt` there, and the run's
/// journal under `.warren/runs/`) and returns the report.
pub(crate) async fn run(dir: &std::path::Path) -> anyhow::Result<RunReport> {
    std::fs::create_dir_all(dir.join("notes"))?;
    std::fs::write(
        dir.join("notes/plan.txt"),
        "Ship the journal.\nWrite the docs.\nRun the benchmarks.\n",
    )?;
    // `notes` (relative: beside the configuration) seen by the tools as `/notes`.
    let grant = FsGrant {
        host: "notes".into(),
        guest: "/notes".into(),
        mode: FsMode::ReadOnly,
    };
    let config = Config::builder(dir)
        .model("rules", "custom", "")
        .set("plugins.builtins", vec!["files"])
        .set("defaults.max_depth", 2)
        .profile(
            "reader",
            "You read files and report on them.",
            &["read_file"],
        )
        .set("profiles.reader.description", "Reads one file")
        // Granted to every profile: a child never gets more than its parent has.
        .set("defaults.capabilities.fs", vec![grant])
        .build()?;
    let host = Host::builder(config)
        .provider("rules", Arc::new(RuleModel))
        .load()
        .await?;
    let run = host.start("main", "What does the plan say?", None)?;
    Ok(run.wait().await)
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(run(dir.path()))?;
    println!("run {}: {:?}", report.run_id, report.root.state);
    println!("{}\n", report.root.text);
    for job in &report.agents {
        let parent = job
            .parent
            .as_ref()
            .map_or("-".to_string(), ToString::to_string);
        println!("{} (parent {parent}) {}: {}", job.id, job.profile, job.task);
    }
    Ok(())
}
