//! `warren doctor`: checks a project the way a run would use it — the configuration,
//! the plugins, every profile's tools and agent files, each model (one tiny request),
//! and the Redis queue when one is configured — and prints one line per check with what
//! to do about a failure.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Config, ConfigError, ProfileNote};
use crate::llm::{ChatRequest, LlmError, Message, ProviderKind};
use crate::plugin::ToolRegistry;
use crate::sandbox::Sandbox;
use crate::term::outln;

/// How long one model check may take before it counts as failed.
const MODEL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs every check, printing a line each; returns how many failed.
pub(crate) async fn run(config_path: &Path) -> anyhow::Result<usize> {
    let mut report = Report::default();
    let config = match Config::load(config_path) {
        Ok(config) => {
            report.ok(format!(
                "config {}: {} profile(s), {} model(s)",
                config_path.display(),
                config.profiles.len().max(1),
                config.models.len()
            ))?;
            config
        }
        Err(error) => {
            let remedy = match error {
                ConfigError::NotFound { .. } => {
                    "doctor checks the config that --config names (default: warren.toml in this directory)"
                }
                _ => "fix the file at the line named (every key is listed in the configuration reference, docs/configuration.md)",
            };
            report.fail(format!("config: {error}"), remedy)?;
            return Ok(report.failed);
        }
    };
    let sandbox = match Sandbox::new() {
        Ok(sandbox) => Arc::new(sandbox),
        Err(error) => {
            report.fail(
                format!("sandbox: {error:#}"),
                "the wasmtime engine could not start on this machine",
            )?;
            return Ok(report.failed);
        }
    };
    match ToolRegistry::for_config(sandbox, &config).await {
        Ok(registry) => {
            let builtin = registry.plugins().iter().filter(|p| p.builtin).count();
            report.ok(format!(
                "plugins: {} built-in, {} from files, {} tools",
                builtin,
                registry.plugins().len() - builtin,
                registry.tool_names().count()
            ))?;
            check_profiles(&config, &registry, &mut report)?;
        }
        Err(error) => report.fail(
            format!("plugins: {error:#}"),
            "rebuild or remove the plugin named (warren plugin inspect FILE shows what it offers)",
        )?,
    }
    for skipped in &config.agent_files.skipped {
        report.fail(
            format!(
                "agent file {}:{}: {}",
                skipped.path.display(),
                skipped.line,
                skipped.reason
            ),
            "fix the file or move it out of agents/ (warren agents lists every file)",
        )?;
    }
    let secrets = config.secrets();
    for (name, model) in &config.models {
        check_model(name, model, &secrets, &mut report).await?;
    }
    if config.models.is_empty() {
        report.fail(
            "models: none configured".into(),
            "add a [models.NAME] table (warren init writes one for OpenAI, Anthropic, Ollama or an offline script)",
        )?;
    }
    if config.queue.redis.is_some() {
        check_queue(&config, &mut report).await?;
    }
    report.summary()?;
    Ok(report.failed)
}

/// Checks that the configured Redis queue answers within 10 seconds.
async fn check_queue(config: &Config, report: &mut Report) -> anyhow::Result<()> {
    let shown = config.queue.redacted_url();
    match tokio::time::timeout(
        Duration::from_secs(10),
        crate::queue::client::RemoteQueue::connect(&config.queue),
    )
    .await
    {
        Ok(Ok(_)) => report.ok(format!(
            "queue: Redis at {shown} reachable (queue `{}`)",
            config.queue.name
        ))?,
        Ok(Err(error)) => report.fail(
            format!("queue: {error:#}"),
            "start redis-server there, or fix [queue] redis / --redis",
        )?,
        Err(_) => report.fail(
            format!("queue: Redis at {shown} did not answer in 10 s"),
            "check the address and the network",
        )?,
    }
    Ok(())
}

fn check_profiles(
    config: &Config,
    registry: &ToolRegistry,
    report: &mut Report,
) -> anyhow::Result<()> {
    for profile in config.all_profiles() {
        if let Some(remote) = &profile.remote {
            let token = match &remote.token_env {
                Some(variable) if std::env::var_os(variable).is_some() => {
                    format!("; its token from {variable} (set)")
                }
                Some(variable) => format!("; its token from {variable}, which is NOT set"),
                None => String::new(),
            };
            report.warn(format!(
                "profile {}: a remote A2A agent (card {}), UNSANDBOXED: its tools, files and network are its own{token}",
                profile.name, remote.card_url
            ))?;
            continue;
        }
        if let Err(error) = registry.check_profile(&profile, &config.plugin_limits) {
            report.fail(
                format!("profile {}: {error:#}", profile.name),
                "narrow its `tools`",
            )?;
            continue;
        }
        let tools = registry.tools_for(&profile).count();
        let warnings: Vec<String> = profile
            .notes
            .iter()
            .filter(|n| n.warns() || matches!(n, ProfileNote::Lenient(_)))
            .map(ToString::to_string)
            .collect();
        if profile.model.is_none() {
            report.fail(
                format!("profile {}: no model", profile.name),
                "add `model = \"NAME\"` to it or [defaults] model",
            )?;
        } else if warnings.is_empty() {
            report.ok(format!(
                "profile {}: {tools} tools, model {}",
                profile.name,
                profile.model.as_deref().unwrap_or("-")
            ))?;
        } else {
            report.warn(format!(
                "profile {}: {tools} tools; {}",
                profile.name,
                warnings.join("; ")
            ))?;
        }
    }
    Ok(())
}

async fn check_model(
    name: &str,
    model: &crate::llm::ModelConfig,
    secrets: &crate::llm::Secrets,
    report: &mut Report,
) -> anyhow::Result<()> {
    let what = match model.provider {
        ProviderKind::Scripted => format!(
            "scripted, {}",
            model
                .script
                .as_ref()
                .map_or("-".into(), |s| s.display().to_string())
        ),
        _ => format!(
            "{:?} `{}` at {}",
            model.provider,
            model.model,
            model.base_url.as_deref().unwrap_or("the default URL")
        )
        .to_lowercase(),
    };
    if model.provider == ProviderKind::Custom {
        report.fail(
            format!("model {name}: `provider = \"custom\"`: the `warren` binary cannot answer it"),
            "a custom model is supplied by a program embedding warren (docs/library.md); use openai or anthropic here",
        )?;
        return Ok(());
    }
    if model.provider == ProviderKind::Scripted {
        match crate::llm::connect(name, model, secrets) {
            Ok(_) => report.ok(format!("model {name} ({what}): script loads"))?,
            Err(error) => report.fail(
                format!("model {name}: {error}"),
                "fix the script file named",
            )?,
        }
        return Ok(());
    }
    let provider = match crate::llm::connect(name, model, secrets) {
        Ok(provider) => provider,
        Err(error) => {
            report.fail(
                format!("model {name} ({what}): {error}"),
                remedy(&error, model),
            )?;
            return Ok(());
        }
    };
    let request = ChatRequest {
        system: "Answer with one word.".into(),
        messages: vec![Message::User("Say OK.".into())],
        ..ChatRequest::default()
    };
    let started = Instant::now();
    match tokio::time::timeout(
        MODEL_TIMEOUT,
        provider.chat(&request, &crate::llm::EventSink::none()),
    )
    .await
    {
        Ok(Ok(response)) => report.ok(format!(
            "model {name} ({what}): answered in {} ms, {} tokens",
            started.elapsed().as_millis(),
            response.usage.total()
        ))?,
        Ok(Err(error)) => report.fail(
            format!("model {name} ({what}): {error}"),
            remedy(&error, model),
        )?,
        Err(_) => report.fail(
            format!(
                "model {name} ({what}): no answer in {} s",
                MODEL_TIMEOUT.as_secs()
            ),
            "check base_url and that the server is running",
        )?,
    }
    Ok(())
}

/// What to do about a model error.
fn remedy(error: &LlmError, model: &crate::llm::ModelConfig) -> &'static str {
    match error {
        LlmError::Auth { .. } => "check the key in the variable named by api_key_env (and that it belongs to this provider)",
        LlmError::UnknownModel { .. } => "fix `model` (the name the API expects)",
        LlmError::Config { .. } if model.provider == ProviderKind::Anthropic => {
            "set the API key variable (ANTHROPIC_API_KEY, or the one api_key_env names)"
        }
        LlmError::Config { .. } => "set the API key variable (OPENAI_API_KEY, or the one api_key_env names)",
        LlmError::Connection { .. } => "check base_url and that the server is running (for Ollama: ollama serve)",
        LlmError::RateLimited { .. } => "wait, or raise the account's rate limit",
        _ => "see the provider's message above",
    }
}

/// The lines printed so far and how many failed.
#[derive(Default)]
struct Report {
    failed: usize,
    warned: usize,
    passed: usize,
}

impl Report {
    fn ok(&mut self, line: String) -> anyhow::Result<()> {
        self.passed += 1;
        outln!("ok    {line}")
    }

    fn warn(&mut self, line: String) -> anyhow::Result<()> {
        self.warned += 1;
        outln!("warn  {line}")
    }

    fn fail(&mut self, line: String, remedy: &str) -> anyhow::Result<()> {
        self.failed += 1;
        outln!("FAIL  {line}")?;
        outln!("      → {remedy}")
    }

    fn summary(&self) -> anyhow::Result<()> {
        outln!(
            "\n{} ok, {} warning(s), {} failed",
            self.passed,
            self.warned,
            self.failed
        )
    }
}
