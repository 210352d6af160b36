//! The npm clients: Claude Code (`claude -p`, on a scripted Anthropic Messages server)
//! and the Codex CLI (`codex exec`, on a scripted Responses server as a custom model
//! provider). Both are native binaries the npm packages carry; both are kept offline
//! with their own settings (no updates, telemetry or error reports).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use super::scripted::{offered, ClientModel, Wire};
use super::{check_offered, check_shown, run, Project, Transport};
use crate::support::root;

/// `node_modules/.bin` with the clients pinned in `tests/fixtures/mcp-clients-node`,
/// installed with `npm ci` into `target/mcp-clients-node` on first use (and again when
/// the lock file changes).
fn node_bin() -> PathBuf {
    static READY: Mutex<bool> = Mutex::new(false);
    let fixture = root().join("tests/fixtures/mcp-clients-node");
    let prefix = root().join("target/mcp-clients-node");
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    if !*ready {
        std::fs::create_dir_all(&prefix).unwrap();
        let lock = std::fs::read(fixture.join("package-lock.json")).unwrap();
        let installed = std::fs::read(prefix.join("package-lock.json")).ok();
        if installed.as_ref() != Some(&lock) || !prefix.join("node_modules/.bin").exists() {
            for file in ["package.json", "package-lock.json"] {
                std::fs::copy(fixture.join(file), prefix.join(file)).unwrap();
            }
            let status = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&prefix)
                .status()
                .expect("npm is needed for the Claude Code and Codex tests: install Node.js and npm (scripts/install-deps does)");
            assert!(
                status.success(),
                "npm ci of {} failed (the npm registry must be reachable once)",
                fixture.display()
            );
        }
        *ready = true;
    }
    prefix.join("node_modules/.bin")
}

/// What Claude Code calls warren's tools.
const CLAUDE_PREFIX: &str = "mcp__warren__";

async fn claude_code(transport: Transport) {
    let project = Project::new().await;
    let model = ClientModel::start(
        Wire::Anthropic,
        CLAUDE_PREFIX,
        project.subagents.hangs.clone(),
    )
    .await;
    let server = (transport == Transport::Http).then(|| project.serve_http());
    let name = match transport {
        Transport::Stdio => "claude-stdio",
        Transport::Http => "claude-http",
    };
    let config = project.write("mcp.json", &project.snippet(name, server.as_ref()));
    let script = super::doc_snippet("claude-print");
    assert!(script.contains("/home/me/project/mcp.json"), "{script}");
    let script = script.replace("/home/me/project/mcp.json", config.to_str().unwrap());
    let mut command = project.client("sh", Some(&node_bin()));
    command
        .args(["-c", &script])
        .env(
            "ANTHROPIC_BASE_URL",
            model.server.base_url.trim_end_matches("/v1"),
        )
        .env("ANTHROPIC_API_KEY", "client-model-key")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    let stdout = run("claude -p", command, server.as_ref()).await;
    assert!(stdout.contains("All done."), "{stdout}");
    let turns = model.turns(CLAUDE_PREFIX);
    assert!(
        !turns.is_empty(),
        "Claude Code never named warren's tools to its model, only {:?}",
        model
            .server
            .requests()
            .first()
            .map(|r| offered(Wire::Anthropic, &r.body))
    );
    check_offered(
        &offered(Wire::Anthropic, turns.last().unwrap()),
        CLAUDE_PREFIX,
    );
    check_shown(&model.shown(CLAUDE_PREFIX));
    project.check_subagents().await;
    if let Some(server) = server {
        assert_eq!(server.stop(), "");
    }
}

/// `claude -p` with warren from an `--mcp-config` file, as docs/mcp.md gives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_uses_warren_over_stdio() {
    claude_code(Transport::Stdio).await;
}

/// `claude -p` with warren over Streamable HTTP, the token in a header from
/// `WARREN_MCP_TOKEN`, as docs/mcp.md gives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_uses_warren_over_http() {
    claude_code(Transport::Http).await;
}

async fn codex(transport: Transport) {
    let project = Project::new().await;
    // Codex puts each server's tools in a namespace named after its entry.
    let prefix = match transport {
        Transport::Stdio => "mcp__warren__",
        Transport::Http => "mcp__warren_http__",
    };
    let model = ClientModel::start(Wire::Responses, prefix, project.subagents.hangs.clone()).await;
    let server = (transport == Transport::Http).then(|| project.serve_http());
    let name = match transport {
        Transport::Stdio => "codex-stdio",
        Transport::Http => "codex-http",
    };
    // The client's own model: a custom provider on the scripted server, its key in a
    // variable of its own.
    let codex_home = project.home.path().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        "model = \"scripted\"\nmodel_provider = \"scripted\"\n\n\
         [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}\"\n\
         wire_api = \"responses\"\nenv_key = \"SCRIPTED_MODEL_KEY\"\n\n{}",
        model.server.base_url,
        project.snippet(name, server.as_ref())
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let mut command = project.client(node_bin().join("codex"), None);
    command
        .args(["exec", "--skip-git-repo-check", "Use warren's tools."])
        .env("CODEX_HOME", &codex_home)
        .env("SCRIPTED_MODEL_KEY", "client-model-key");
    let stdout = run("codex exec", command, server.as_ref()).await;
    assert!(stdout.contains("All done."), "{stdout}");
    let turns = model.turns(prefix);
    assert!(
        !turns.is_empty(),
        "Codex never offered its model warren's tools, only {:?} (it starts the turn \
         without waiting for a server still starting)",
        model
            .server
            .requests()
            .first()
            .map(|r| offered(Wire::Responses, &r.body))
    );
    check_offered(&offered(Wire::Responses, turns.last().unwrap()), prefix);
    check_shown(&model.shown(prefix));
    project.check_subagents().await;
    if let Some(server) = server {
        assert_eq!(server.stop(), "");
    }
}

/// `codex exec` with warren as an `[mcp_servers.warren]` entry, as docs/mcp.md gives
/// it, and no approval setting: warren's read-only tools run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_uses_warren_over_stdio() {
    codex(Transport::Stdio).await;
}

/// `codex exec` with warren over Streamable HTTP, the token from `WARREN_MCP_TOKEN`
/// (`bearer_token_env_var`), as docs/mcp.md gives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_uses_warren_over_http() {
    codex(Transport::Http).await;
}
