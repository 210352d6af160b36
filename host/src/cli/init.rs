//! `warren init [DIR]`: a starter project that runs at once — `warren.toml` with a
//! model found on this machine (an OpenAI or Anthropic key in the environment, an
//! Ollama server on localhost, else an offline scripted model), a `main`, a
//! `researcher` and an `analyst` (which computes with `run_python`/`run_js`) profile
//! that may only read the project (plus a private scratch directory), an example
//! agent file and an `AGENTS.md`. Existing files are never
//! overwritten.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which model the starter project uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StarterProvider {
    /// OpenAI (OPENAI_API_KEY).
    Openai,
    /// Anthropic (ANTHROPIC_API_KEY).
    Anthropic,
    /// An Ollama server on localhost:11434 (OpenAI-compatible API).
    Ollama,
    /// An offline scripted model: works with no key and no network.
    Scripted,
}

/// Where Ollama listens by default.
const OLLAMA: &str = "127.0.0.1:11434";

/// What `init` did.
pub(crate) struct Initialised {
    /// Files written.
    pub written: Vec<PathBuf>,
    /// Files that existed and were kept.
    pub kept: Vec<PathBuf>,
    /// The provider chosen, and why.
    pub provider: (StarterProvider, String),
}

/// Writes the starter project into `dir` (created if missing).
pub(crate) async fn init(
    dir: &Path,
    provider: Option<StarterProvider>,
) -> anyhow::Result<Initialised> {
    std::fs::create_dir_all(dir.join("agents"))?;
    let (provider, why, ollama_model) = match provider {
        Some(p) => (p, "as asked (--provider)".to_string(), ollama_model().await),
        None => detect().await,
    };
    let mut files: Vec<(&str, String)> = vec![
        ("warren.toml", config(provider, ollama_model.as_deref())),
        ("AGENTS.md", AGENTS_MD.into()),
        ("agents/reviewer.md", REVIEWER_MD.into()),
    ];
    if provider == StarterProvider::Scripted {
        files.push(("script.toml", SCRIPT.into()));
    }
    let mut done = Initialised {
        written: Vec::new(),
        kept: Vec::new(),
        provider: (provider, why),
    };
    for (name, text) in files {
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                std::io::Write::write_all(&mut file, text.as_bytes())?;
                done.written.push(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => done.kept.push(path),
            Err(e) => {
                return Err(anyhow::Error::from(e).context(format!("writing {}", path.display())))
            }
        }
    }
    Ok(done)
}

/// The model to use: an API key in the environment, else a local Ollama, else the
/// offline script.
async fn detect() -> (StarterProvider, String, Option<String>) {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    if set("OPENAI_API_KEY") {
        return (
            StarterProvider::Openai,
            "OPENAI_API_KEY is set".into(),
            None,
        );
    }
    if set("ANTHROPIC_API_KEY") {
        return (
            StarterProvider::Anthropic,
            "ANTHROPIC_API_KEY is set".into(),
            None,
        );
    }
    if let Some(model) = ollama_model().await {
        return (
            StarterProvider::Ollama,
            format!("an Ollama server answers on {OLLAMA}"),
            Some(model),
        );
    }
    (
        StarterProvider::Scripted,
        "no OPENAI_API_KEY, no ANTHROPIC_API_KEY and no Ollama on localhost: an offline scripted model, so `warren run` works at once".into(),
        None,
    )
}

/// The first model a local Ollama server lists (`llama3.2` when it lists none).
async fn ollama_model() -> Option<String> {
    let connect = tokio::net::TcpStream::connect(OLLAMA);
    tokio::time::timeout(Duration::from_millis(300), connect)
        .await
        .ok()?
        .ok()?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let tags: serde_json::Value = match client.get(format!("http://{OLLAMA}/api/tags")).send().await
    {
        Ok(response) => response
            .bytes()
            .await
            .ok()
            .and_then(|body| serde_json::from_slice(&body).ok())
            .unwrap_or_default(),
        Err(_) => serde_json::Value::Null,
    };
    Some(
        tags["models"][0]["name"]
            .as_str()
            .unwrap_or("llama3.2")
            .to_string(),
    )
}

/// The `[models.default]` table of a model behind a hosted API: its provider, model,
/// key variable and prices per million tokens (input, output, cached input).
fn hosted(
    provider: &str,
    model: &str,
    key: &str,
    (input, output, cached): (&str, &str, &str),
) -> String {
    format!(
        r#"[models.default]
provider = "{provider}"
model = "{model}"
api_key_env = "{key}"
price = {{ input_per_mtok = {input}, output_per_mtok = {output}, cached_input_per_mtok = {cached} }}
"#
    )
}

fn config(provider: StarterProvider, ollama_model: Option<&str>) -> String {
    let model = match provider {
        StarterProvider::Openai => hosted(
            "openai",
            "gpt-4o-mini",
            "OPENAI_API_KEY",
            ("0.15", "0.60", "0.075"),
        ),
        StarterProvider::Anthropic => hosted(
            "anthropic",
            "claude-sonnet-4-5",
            "ANTHROPIC_API_KEY",
            ("3.0", "15.0", "0.30"),
        ),
        StarterProvider::Ollama => format!(
            r#"[models.default]
provider = "openai"                       # Ollama speaks the OpenAI-compatible API
base_url = "http://localhost:11434/v1"
model = "{}"                              # any model `ollama list` shows
"#,
            ollama_model.unwrap_or("llama3.2")
        ),
        StarterProvider::Scripted => r#"[models.default]
provider = "scripted"                     # replays script.toml: offline, no key
script = "script.toml"
# A real model instead (then delete the two lines above):
# provider = "openai"
# model = "gpt-4o-mini"                   # with OPENAI_API_KEY set
"#
        .to_string(),
    };
    format!(
        r#"# warren.toml — written by `warren init`. Reference: docs/configuration.md in warren's repository.
# Every tool runs in a WebAssembly sandbox that can touch only what a profile grants.

{model}
[model_aliases]                             # names agent files use for models
sonnet = "default"
opus = "default"
haiku = "default"

[defaults]
max_turns = 10
timeout_s = 120
max_concurrent = 3                          # sub-agents running at once
max_depth = 1                               # the root's children get no spawn tools
budget_usd = 0.50                           # for the whole tree of agents

[profiles.main]
description = "Coordinator: answers, or hands scoped reading tasks to researchers"
system_prompt = "You coordinate. The project is at /project (read-only). Delegate reading to researchers when it helps, then answer."
tools = ["Read", "Glob", "Grep", "LS"]
[profiles.main.capabilities]
fs = [{{ host = ".", guest = "/project", mode = "ro" }}]
scratch = true                              # a private writable /scratch, removed afterwards

[profiles.researcher]
description = "Reads the project and reports findings with file names"
system_prompt = "You research one question in /project (read-only). Cite the files you used."
tools = ["Read", "Glob", "Grep", "LS"]
max_turns = 8
[profiles.researcher.capabilities]
fs = [{{ host = ".", guest = "/project", mode = "ro" }}]
scratch = true

[profiles.analyst]
description = "Computes: totals, statistics, parsing and checks, in Python or JavaScript run in the sandbox"
system_prompt = "You answer with computation. Use run_python (or run_js) to read data under /project (read-only) and compute; write results to /scratch. Report the figures and how you got them."
tools = ["run_python", "run_js", "Read", "LS"]   # the code tools only ever by name
max_turns = 8
[profiles.analyst.capabilities]
fs = [{{ host = ".", guest = "/project", mode = "ro" }}]
scratch = true                              # the code sees /project and /scratch, nothing else
"#
    )
}

const AGENTS_MD: &str = "# About this project\n\nEvery agent's system prompt starts with this file. Say here what the project is,\nwhere things are, and how you want agents to work.\n";

const REVIEWER_MD: &str = r#"---
name: reviewer
description: Reviews files in the project for mistakes and unclear writing. Use after edits.
tools: Read, Grep, Glob
model: inherit
maxTurns: 6
---
You review files under /project. Report each finding as `file:line: what is wrong`,
most important first. You cannot change files; say what should change.
"#;

/// The offline model's turns of the starter project (its `script.toml`).
const SCRIPT: &str = include_str!("../../templates/init/script.toml");
