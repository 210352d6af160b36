//! The MCP clients people use, run offline against `warren mcp` over stdio and
//! Streamable HTTP (issue 33 item 7): the OpenAI Agents SDK and fastmcp (PyPI, pinned in
//! `tests/fixtures/mcp-clients-python`), Claude Code and the Codex CLI (npm, pinned in
//! `tests/fixtures/mcp-clients-node`). Each is configured with the snippet docs/mcp.md
//! gives for it (read out of the page, its placeholder paths, key and address replaced),
//! starts from an environment without warren's model key, and meets a cold compile
//! cache (a fresh `HOME`). A client's own model is a scripted server
//! ([`scripted::ClientModel`]) that makes it list warren's tools, read a granted file,
//! be refused one outside the grant, spawn a sub-agent and await it, and spawn another
//! and cancel it; warren's sub-agents run on a [`FakeLlm`] with the key the snippet
//! gives the server.

mod node;
mod python;
mod scripted;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply};
use crate::mcp::{eventually, HttpServer, TOKEN};
use crate::support::{root, World};
use scripted::{Shown, GRANTED, HANG_TASK, SUMMARY_TASK};

/// The warren binary under test.
const WARREN: &str = env!("CARGO_BIN_EXE_warren");
/// The key of warren's own model, which only the snippet's `env` (stdio) or the
/// server's environment (HTTP) gives warren.
const WARREN_KEY: &str = "sk-test-warren-0123456789";
/// Longest one client's run may take.
const CLIENT_LIMIT: Duration = Duration::from_secs(300);

/// How the client reaches warren.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Transport {
    Stdio,
    Http,
}

/// The tools the `main` profile serves, in warren's order.
const SERVED: [&str; 8] = [
    "grep",
    "list_dir",
    "read_file",
    "spawn_agent",
    "await_agents",
    "cancel_agent",
    "message_agent",
    "list_agents",
];

/// The code block docs/mcp.md marks `<!-- client-config: NAME -->`.
fn doc_snippet(name: &str) -> String {
    let page = std::fs::read_to_string(root().join("docs/mcp.md")).unwrap();
    let marker = format!("<!-- client-config: {name} -->\n");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/mcp.md has no {marker:?}"));
    let block = page[at + marker.len()..]
        .strip_prefix("```")
        .unwrap_or_else(|| panic!("{name}: no code block right after the marker"));
    let body = &block[block.find('\n').unwrap() + 1..];
    body[..body.find("\n```").unwrap() + 1].to_string()
}

/// A project like docs/mcp.md's worked example, on the fake model with its key in
/// `OPENAI_API_KEY`, and no compile cache of its own (the default one, under `HOME`).
struct Project {
    world: World,
    /// The `HOME` of the client and the server: empty, so the compile cache is cold.
    home: tempfile::TempDir,
    /// warren's own model, for the sub-agents.
    subagents: FakeLlm,
}

impl Project {
    async fn new() -> Project {
        let subagents = FakeLlm::start().await;
        subagents.route(
            SUMMARY_TASK,
            Reply::Delayed(
                Duration::from_millis(300),
                Box::new(Reply::tool_calls(
                    &[("read_file", json!({"path": GRANTED.0}))],
                    (1000, 20),
                )),
            ),
        );
        subagents.route(
            "cargo install warren",
            Reply::Delayed(
                Duration::from_millis(300),
                Box::new(Reply::answer(
                    "SUMMARY-DONE: install with cargo",
                    (1200, 34),
                )),
            ),
        );
        subagents.route(HANG_TASK, Reply::Hang);
        let world = World::new();
        std::fs::write(world.path(&GRANTED.0[1..]), GRANTED.1).unwrap();
        let config = format!(
            r#"[models.default]
provider = "openai"
base_url = "{url}"
model = "fake-model"
api_key_env = "OPENAI_API_KEY"
stream = false
max_retries = 0
price = {{ input_per_mtok = 0.15, output_per_mtok = 0.60 }}

[defaults]
max_concurrent = 3

[profiles.main]
tools = ["read_file", "list_dir", "grep", "spawn_agent"]
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]

[profiles.researcher]
description = "Answers one question from the docs, citing files"
tools = ["read_file", "list_dir", "grep"]
max_turns = 8
[profiles.researcher.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]
"#,
            url = subagents.base_url,
        );
        std::fs::write(world.path("warren.toml"), config).unwrap();
        Project {
            world,
            home: tempfile::tempdir().unwrap(),
            subagents,
        }
    }

    /// docs/mcp.md's snippet `name` for this project: the config path, warren's key
    /// and (when serving over HTTP) the server's address put in for the placeholders.
    fn snippet(&self, name: &str, server: Option<&HttpServer>) -> String {
        let snippet = doc_snippet(name);
        let (placeholder, value) = match server {
            None => (
                "/home/me/project/warren.toml",
                self.world.path("warren.toml").display().to_string(),
            ),
            Some(server) => ("http://127.0.0.1:8931/mcp", server.url.clone()),
        };
        assert!(
            snippet.contains(placeholder),
            "{name} names no {placeholder}"
        );
        if server.is_none() {
            assert!(snippet.contains("sk-…"), "{name} gives warren no key");
        }
        snippet
            .replace(placeholder, &value)
            .replace("sk-…", WARREN_KEY)
    }

    /// `warren mcp --http` serving this project as docs/mcp.md says: its key and token
    /// in its environment, the same cold `HOME`.
    fn serve_http(&self) -> HttpServer {
        HttpServer::launch_with(
            &self.world,
            &[],
            None,
            Some(TOKEN),
            &[
                ("OPENAI_API_KEY", Some(WARREN_KEY.as_ref())),
                ("HOME", Some(self.home.path().as_os_str())),
                ("XDG_CACHE_HOME", None),
            ],
        )
    }

    /// A client's command: the user's environment without any model key, `HOME` the
    /// project's fresh one, warren (the snippets name it `warren`) and `bin` first on
    /// `PATH`, the server's token in `WARREN_MCP_TOKEN` as docs/mcp.md has it.
    fn client(
        &self,
        program: impl AsRef<std::ffi::OsStr>,
        bin: Option<&Path>,
    ) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        let mut path = OsString::from(Path::new(WARREN).parent().unwrap());
        path.push(":");
        if let Some(bin) = bin {
            path.push(bin);
            path.push(":");
        }
        path.push(std::env::var_os("PATH").unwrap_or_default());
        command
            .current_dir(self.world.dir.path())
            .env("PATH", path)
            .env("HOME", self.home.path())
            .env("WARREN_MCP_TOKEN", TOKEN)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("WARREN_CONFIG")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_BASE_URL")
            .kill_on_drop(true);
        command
    }

    /// Writes `text` to `name` in the project; returns its path.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.world.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Every request warren's model got carried the key the snippet gave the server;
    /// the hanging sub-agent was cancelled (its model request dropped).
    async fn check_subagents(&self) {
        let requests = self.subagents.requests();
        assert!(
            requests.len() >= 3,
            "warren's model got {} requests",
            requests.len()
        );
        for request in &requests {
            assert_eq!(
                request.headers.get("authorization").map(String::as_str),
                Some(format!("Bearer {WARREN_KEY}").as_str()),
                "{}",
                request.body
            );
        }
        assert!(
            eventually(Duration::from_secs(10), || self
                .subagents
                .hang_dropped
                .load(Ordering::SeqCst))
            .await,
            "the cancelled sub-agent still waits on the model"
        );
    }
}

/// Runs `command` to its end within [`CLIENT_LIMIT`]; returns its stdout, failing with
/// both streams (and the server's log) when it fails.
async fn run(
    what: &str,
    mut command: tokio::process::Command,
    server: Option<&HttpServer>,
) -> String {
    let output = tokio::time::timeout(CLIENT_LIMIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("{what} took over {CLIENT_LIMIT:?}"))
        .unwrap_or_else(|e| panic!("{what} could not start: {e}"));
    let (stdout, stderr) = (
        crate::support::text(&output.stdout),
        crate::support::text(&output.stderr),
    );
    let log = server.map_or_else(String::new, |s| s.stderr.lock().unwrap().clone());
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}\nserver:\n{log}",
        output.status
    );
    stdout
}

/// What a model-driven client showed its model of [`scripted::next_call`]'s calls:
/// the file's text, the refusal (flagged an error where the client's wire can say so),
/// the spawn, the awaited result, the cancellation.
fn check_shown(shown: &[Shown]) {
    let all = format!("{shown:#?}");
    let shown = &scripted::settled(shown);
    assert_eq!(shown.len(), 6, "{all}");
    assert!(shown[0].text.contains(GRANTED.1.trim()), "{all}");
    assert_ne!(shown[0].error, Some(true), "{all}");
    assert!(
        shown[1].text.contains(
            "read_file failed: denied: /etc/passwd is outside the granted directories: /docs (read-only)"
        ),
        "{all}"
    );
    assert_ne!(shown[1].error, Some(false), "{all}");
    let summary = scripted::job_id(&shown[2].text).unwrap_or_else(|| panic!("{all}"));
    assert!(
        shown[2].text.contains(&format!(
            "Started job {summary} (researcher) in the background"
        )),
        "{all}"
    );
    assert!(
        shown[3]
            .text
            .contains(&format!("[{summary}: OK] researcher"))
            && shown[3].text.contains("SUMMARY-DONE"),
        "{all}"
    );
    let hanging = scripted::job_id(&shown[4].text).unwrap_or_else(|| panic!("{all}"));
    assert!(
        shown[5].text.contains(&format!(
            "Cancelled job {hanging} (researcher) and its descendants."
        )),
        "{all}"
    );
}

/// The tools a model-driven client offered its model: warren's, named `{prefix}NAME`.
fn check_offered(offered: &[String], prefix: &str) {
    for tool in SERVED {
        assert!(
            offered.contains(&format!("{prefix}{tool}")),
            "{prefix}{tool} not offered: {offered:?}"
        );
    }
}
