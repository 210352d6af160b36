//! The library as a program embedding warren uses it: a configuration made in code,
//! a model provider and a sub-agent backend supplied in code, errors by kind. The
//! example program (`examples/library.rs`) is compiled in here and run.

use std::sync::{Arc, Mutex};

use warren::{AgentOutcome, AgentState, Config, ConfigError, Error, Host};
use warren::{Backend, ChildSpec, JobHandle};

#[allow(dead_code)] // its `main` is the example binary's
#[path = "../../examples/library.rs"]
mod example;

#[tokio::test]
async fn the_embedding_example_runs_a_tree_on_its_own_provider_and_a_config_made_in_code() {
    let dir = tempfile::tempdir().unwrap();
    let report = example::run(dir.path()).await.unwrap();
    assert_eq!(report.root.state, AgentState::Ok, "{report:#?}");
    // The reader read the granted file through the sandboxed files plugin, and its
    // answer came back to the root through the spawn and await tools.
    assert!(
        report
            .root
            .text
            .contains("3 lines; the first is \"Ship the journal.\""),
        "{}",
        report.root.text
    );
    let profiles: Vec<&str> = report.agents.iter().map(|j| j.profile.as_str()).collect();
    assert_eq!(profiles, ["main", "reader"]);
    // Journaled beside the configuration's directory, as a warren.toml there would be.
    let journal = dir
        .path()
        .join(".warren/runs")
        .join(&report.run_id)
        .join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains("\"type\":\"run_finished\""), "{text}");
}

/// A configuration made in code with model `rules` as `provider = "custom"`.
fn custom_config(dir: &std::path::Path) -> Config {
    Config::builder(dir)
        .model("rules", "custom", "")
        .set("plugins.builtins", false)
        .set("defaults.max_depth", 2)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_custom_model_needs_a_supplied_provider_and_a_supplied_one_needs_its_model() {
    let dir = tempfile::tempdir().unwrap();
    let error = match Host::load(custom_config(dir.path())).await {
        Err(error) => error,
        Ok(_) => panic!("a custom model loaded with no provider"),
    };
    assert!(
        matches!(error, Error::Model(_)) && error.is_config(),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("model `rules`") && message.contains("HostBuilder::provider"),
        "{message}"
    );
    let error = match Host::builder(custom_config(dir.path()))
        .provider("rules", Arc::new(Echo))
        .provider("other", Arc::new(Echo))
        .load()
        .await
    {
        Err(error) => error,
        Ok(_) => panic!("a provider for an undefined model was taken"),
    };
    assert!(
        matches!(&error, Error::Config(ConfigError::UnknownModel { name, .. }) if name == "other"),
        "{error:?}"
    );
}

#[tokio::test]
async fn errors_come_typed_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::builder(custom_config(dir.path()))
        .provider("rules", Arc::new(Echo))
        .load()
        .await
        .unwrap();
    let error = host.start("nobody", "task", None).err().unwrap();
    assert!(
        matches!(&error, Error::Config(ConfigError::UnknownProfile { name, .. }) if name == "nobody"),
        "{error:?}"
    );
    let error = host.resume("no-such-run", false).err().unwrap();
    assert!(matches!(error, Error::Journal(_)), "{error:?}");
    assert!(!error.is_config());
    let redis = Config::builder(dir.path())
        .model("rules", "custom", "")
        .set("queue.redis", "redis://127.0.0.1:1")
        .build()
        .unwrap();
    let error = match Host::builder(redis)
        .provider("rules", Arc::new(Echo))
        .backend(Arc::new(Elsewhere::default()))
        .load()
        .await
    {
        Err(error) => error,
        Ok(_) => panic!("a backend beside [queue] redis was taken"),
    };
    assert!(matches!(error, Error::Queue(_)), "{error:?}");
}

#[tokio::test]
async fn a_supplied_backend_runs_every_sub_agent() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = Arc::new(Elsewhere::default());
    let host = Host::builder(custom_config(dir.path()))
        .provider("rules", Arc::new(Echo))
        .backend(elsewhere.clone())
        .load()
        .await
        .unwrap();
    let report = host.start("main", "SPAWN", None).unwrap().wait().await;
    assert_eq!(report.root.state, AgentState::Ok, "{report:#?}");
    // The child's spec reached the backend, narrowed; its outcome reached the root.
    assert_eq!(
        *elsewhere.tasks.lock().unwrap(),
        ["count the stars".to_string()]
    );
    assert!(
        report.root.text.contains("ran elsewhere: count the stars"),
        "{}",
        report.root.text
    );
}

/// Runs each child "elsewhere": answers with its task, and remembers it.
#[derive(Default)]
struct Elsewhere {
    tasks: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl Backend for Elsewhere {
    async fn run(&self, job: &JobHandle, spec: ChildSpec) -> AgentOutcome {
        job.start();
        self.tasks.lock().unwrap().push(spec.task().to_string());
        // What a backend ships: the job data a worker runs.
        let data = serde_json::to_value(&spec).unwrap();
        assert_eq!(data["task"], spec.task(), "{data}");
        assert_eq!(data["profile"], spec.profile(), "{data}");
        assert!(data["limits"]["max_turns"].is_u64(), "{data}");
        AgentOutcome {
            state: AgentState::Ok,
            text: format!("ran elsewhere: {}", spec.task()),
            output: None,
            error: None,
            turns: 0,
            usage: warren::Usage::default(),
            cost_usd: 0.0,
            duration: std::time::Duration::ZERO,
        }
    }
}

/// The root spawns one child on task "SPAWN", awaits it, then answers with what it
/// got; a child answers at once.
struct Echo;

#[async_trait::async_trait]
impl warren::Provider for Echo {
    fn model(&self) -> &str {
        "echo"
    }

    async fn chat(
        &self,
        request: &warren::ChatRequest,
        _events: &warren::EventSink,
    ) -> Result<warren::ChatResponse, warren::LlmError> {
        use warren::{AssistantMessage, ChatResponse, Message, ToolCall};
        let call = |name: &str, arguments: serde_json::Value| AssistantMessage {
            tool_calls: vec![ToolCall {
                id: format!("call_{name}"),
                name: name.into(),
                arguments: arguments.to_string(),
            }],
            ..AssistantMessage::default()
        };
        let message = match request.messages.last() {
            Some(Message::User(task)) if task.contains("SPAWN") => call(
                "spawn_agent",
                serde_json::json!({"profile": "main", "task": "count the stars"}),
            ),
            Some(Message::ToolResult { name, .. }) if name == "spawn_agent" => {
                call("await_agents", serde_json::json!({"job_ids": "*"}))
            }
            Some(Message::ToolResult { content, .. }) => AssistantMessage {
                text: format!("got: {content}"),
                ..AssistantMessage::default()
            },
            _ => AssistantMessage {
                text: "done".into(),
                ..AssistantMessage::default()
            },
        };
        Ok(ChatResponse::of(message, Default::default()))
    }
}
