//! The Python clients: the OpenAI Agents SDK (an agent on a scripted chat-completions
//! model) and fastmcp (a client library, driven by a script with no model).

use std::path::PathBuf;

use serde_json::Value;

use super::scripted::{ClientModel, Wire, GRANTED};
use super::{check_offered, check_shown, run, Project, Transport, SERVED};
use crate::support::root;

/// A Python with the clients pinned in `tests/fixtures/mcp-clients-python`, in a venv
/// under `target/`, installed on first use.
fn python() -> PathBuf {
    crate::guests::python_venv(
        "tests/fixtures/mcp-clients-python",
        "target/mcp-clients-python",
        "the MCP client tests",
    )
}

/// The snippet docs/mcp.md gives `client` for `transport`, written into the project.
fn snippet_file(
    project: &Project,
    client: &str,
    transport: Transport,
    server: Option<&super::HttpServer>,
) -> PathBuf {
    let name = match transport {
        Transport::Stdio => format!("{client}-stdio"),
        Transport::Http => format!("{client}-http"),
    };
    project.write(&format!("{name}.py"), &project.snippet(&name, server))
}

async fn agents_sdk(transport: Transport) {
    let project = Project::new().await;
    let model = ClientModel::start(Wire::Chat, "", project.subagents.hangs.clone()).await;
    let server = (transport == Transport::Http).then(|| project.serve_http());
    let snippet = snippet_file(&project, "agents", transport, server.as_ref());
    let mut command = project.client(python(), None);
    command
        .arg(root().join("tests/fixtures/mcp-clients-python/agents_client.py"))
        .arg(&snippet)
        .arg(&model.server.base_url);
    let stdout = run("the Agents SDK client", command, server.as_ref()).await;
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["final"], "All done.", "{report}");
    let turns = model.turns("");
    check_offered(&super::scripted::offered(Wire::Chat, &turns[0]), "");
    check_shown(&model.shown(""));
    project.check_subagents().await;
}

/// The Agents SDK's `MCPServerStdio`, configured as docs/mcp.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_agents_sdk_uses_warren_over_stdio() {
    agents_sdk(Transport::Stdio).await;
}

/// The Agents SDK's `MCPServerStreamableHttp`, with the bearer token as docs/mcp.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_agents_sdk_uses_warren_over_http() {
    agents_sdk(Transport::Http).await;
}

async fn fastmcp(transport: Transport) {
    let project = Project::new().await;
    project
        .subagents
        .route("HANG-FOREGROUND", crate::fake_llm::Reply::Hang);
    // The script cancels each hanging sub-agent once its model request is here.
    let (hangs, dir) = (project.subagents.hangs.clone(), project.world.path(""));
    tokio::spawn(async move {
        for n in 1..=2 {
            if let Ok(permit) = hangs.acquire().await {
                permit.forget();
            }
            std::fs::write(dir.join(format!("hang-asked-{n}")), "").unwrap();
        }
    });
    let server = (transport == Transport::Http).then(|| project.serve_http());
    let snippet = snippet_file(&project, "fastmcp", transport, server.as_ref());
    let mut command = project.client(python(), None);
    command
        .arg(root().join("tests/fixtures/mcp-clients-python/fastmcp_client.py"))
        .arg(&snippet);
    let stdout = run("the fastmcp client", command, server.as_ref()).await;
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["tools"], serde_json::json!(SERVED), "{report}");
    assert_eq!(report["read_only"]["read_file"], true, "{report}");
    assert_eq!(report["read"], GRANTED.1, "{report}");
    let denied = report["denied"]
        .as_str()
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        denied.contains("denied: /etc/passwd is outside the granted directories"),
        "{report}"
    );
    let started = report["started"].as_str().unwrap();
    let summary = super::scripted::job_id(started).unwrap_or_else(|| panic!("{report}"));
    let awaited = report["awaited"].as_str().unwrap();
    assert!(
        awaited.contains(&format!("[{summary}: OK] researcher"))
            && awaited.contains("SUMMARY-DONE"),
        "{report}"
    );
    let progress: Vec<&str> = report["await_progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["message"].as_str())
        .collect();
    assert!(
        progress
            .last()
            .is_some_and(|m| m.starts_with(&format!("[{summary} researcher] ok · 2 turns"))),
        "{report}"
    );
    let hanging = super::scripted::job_id(report["hanging"].as_str().unwrap()).unwrap();
    assert_eq!(
        report["cancelled"],
        format!("Cancelled job {hanging} (researcher) and its descendants."),
        "{report}"
    );
    // The call cancelled in flight cancelled its agent.
    let listed = report["listed"].as_str().unwrap();
    assert_eq!(listed.matches(" · cancelled · ").count(), 2, "{listed}");
    assert!(
        report["seconds_to_cancel"].as_f64().unwrap() < 10.0,
        "{report}"
    );
    project.check_subagents().await;
    if let Some(server) = server {
        // fastmcp probes MCP 2026-07-28 first; the refusal is the designed answer, not
        // something for the operator to act on.
        let log = server.stderr.lock().unwrap().clone();
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ")).collect();
        assert!(
            warnings
                .iter()
                .all(|l| l.contains("plugin reported a denial")),
            "{warnings:#?}"
        );
        assert_eq!(server.stop(), "");
    }
}

/// fastmcp's `Client` over stdio, configured as docs/mcp.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_uses_warren_over_stdio() {
    fastmcp(Transport::Stdio).await;
}

/// fastmcp's `Client` over Streamable HTTP, with the bearer token as docs/mcp.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_uses_warren_over_http() {
    fastmcp(Transport::Http).await;
}
