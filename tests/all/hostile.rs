//! Hostile inputs, round 3 (issue 30), each run through the `warren` binary against a
//! fake model server that attacks it: error bodies too large to hold, and servers that
//! quote the configured secrets back. Each test checks the host stayed within its
//! documented limits and that the next request was served.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{text, World};

/// The most bytes of a profile's description (docs/configuration.md: 4096 bytes).
const MAX_PROFILE_DESCRIPTION_BYTES: usize = 4 * 1024;
/// The most tool calls a model reply runs (docs/limits.md: 256).
const MAX_TOOL_CALLS_PER_REPLY: usize = 256;
/// The most bytes of a turn's tool results (docs/limits.md: 4 MiB).
const MAX_TURN_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// Peak resident memory (`VmHWM`) of a child process, sampled every 5 ms until it
/// exits, with its output.
fn peak_rss_kb(mut command: Command) -> (std::process::Output, u64) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if let Some(kb) = std::fs::read_to_string(&status_path)
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
        {
            peak = peak.max(kb);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (child.wait_with_output().unwrap(), peak)
}

/// `warren ARGS` in `world`, logging warnings, with `env` set.
fn warren(world: &World, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warren"));
    command
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .env("RUST_LOG", "warn");
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// Writes `warren.toml`: model `fake` on `server` (non-streamed, one quick retry)
/// with `extra` model keys, a root `main` and a `worker` it may spawn.
fn config(world: &World, server: &FakeLlm, extra: &str) {
    let text = format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{}"
model = "fake-model"
stream = false
max_retries = 1
retry_base_ms = 1
{extra}

[profiles.main]
description = "Coordinator"

[profiles.worker]
description = "Does one thing"
"#,
        server.base_url
    );
    std::fs::write(world.path("warren.toml"), text).unwrap();
}

/// A 200 MB error body, with `max_response_mib = 1`: the body is read only up to the
/// error-body cap, so the process stays small; a 5xx is retried and the retry is
/// answered; a 400 fails the run with its excerpt. Before the cap, a whole error body
/// was read into memory (the 503's twice).
#[tokio::test]
async fn a_huge_error_body_is_not_read_and_the_next_request_is_served() {
    const FLOOD: usize = 200 * 1024 * 1024;
    const MOST_KB: u64 = 120 * 1024;
    let world = World::new();
    let server = FakeLlm::start().await;
    config(&world, &server, "max_response_mib = 1");

    server.push(Reply::Flood {
        status: 503,
        bytes: FLOOD,
    });
    server.push(Reply::answer("RECOVERED", (10, 5)));
    let command = warren(&world, &["run", "--json", "TASK"], &[]);
    let (output, peak) = tokio::task::spawn_blocking(|| peak_rss_kb(command))
        .await
        .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("RECOVERED"), "{stdout}");
    assert!(stderr.contains("HTTP 503"), "the retry is logged: {stderr}");
    assert!(peak < MOST_KB, "peak RSS {peak} KiB after a 200 MB 503");
    assert_eq!(server.requests().len(), 2);

    server.push(Reply::Flood {
        status: 400,
        bytes: FLOOD,
    });
    let command = warren(&world, &["run", "--json", "TASK"], &[]);
    let (output, peak) = tokio::task::spawn_blocking(|| peak_rss_kb(command))
        .await
        .unwrap();
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(
        stdout.contains("refused the request (HTTP 400): xxxx"),
        "{stdout}"
    );
    assert!(peak < MOST_KB, "peak RSS {peak} KiB after a 200 MB 400");
    assert_eq!(server.requests().len(), 3, "a 400 is not retried");
}

/// A server (or gateway) that quotes the refused credentials in its error bodies: the
/// API key, a configured header and the OTLP exporter's header, in a 503 (retried, so
/// also in the retry warning) and then a 401, to a sub-agent. None of them appears on
/// stdout (`--json`), stderr, the `--events` file, the traces, or the parent's next
/// request, which carries the sub-agent's result block; `[redacted]` stands in.
#[tokio::test]
async fn secrets_quoted_by_a_server_appear_in_no_output() {
    const KEY: &str = "sk-hostile-KEY-0123456789abcdef";
    const HEADER: &str = "gw-hostile-TOKEN-9876543210";
    const OTLP: &str = "otlp-hostile-SECRET-13579";
    let world = World::new();
    let server = FakeLlm::start().await;
    let receiver = FakeLlm::start().await;
    for _ in 0..50 {
        receiver.push(Reply::json(json!({})));
    }
    config(
        &world,
        &server,
        &format!(
            "api_key_env = \"WARREN_HOSTILE_KEY\"\nheaders = {{ x-gateway-token = \"{HEADER}\" }}"
        ),
    );
    let quoted = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY} (token {HEADER}, trace key {OTLP})"}}}}"#
    );
    server.route(
        "ROOT-TASK",
        Reply::tool_calls(
            &[(
                "spawn_agent",
                json!({"profile": "worker", "task": "CHILD-TASK", "background": false}),
            )],
            (10, 5),
        ),
    );
    server.route("CHILD-TASK", Reply::status(503, &quoted));
    server.route("CHILD-TASK", Reply::status(401, &quoted));
    server.route("rejected the API key", Reply::answer("ROOT-DONE", (10, 5)));

    let events = world.path("events.jsonl");
    let endpoint = receiver.base_url.trim_end_matches("/v1").to_string();
    let mut command = warren(
        &world,
        &[
            "run",
            "--json",
            "--events",
            events.to_str().unwrap(),
            "--otlp-endpoint",
            &endpoint,
            "ROOT-TASK",
        ],
        &[
            ("WARREN_HOSTILE_KEY", KEY),
            ("OTEL_EXPORTER_OTLP_HEADERS", &format!("x-trace-key={OTLP}")),
        ],
    );
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("ROOT-DONE"), "{stdout}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    assert_eq!(
        requests[1].headers["authorization"],
        format!("Bearer {KEY}")
    );
    let parent_context = requests[3].body.to_string();
    assert!(
        parent_context.contains(
            "Incorrect API key provided: [redacted] (token [redacted], trace key [redacted])"
        ),
        "the sub-agent's result block quotes the server, redacted: {parent_context}"
    );
    assert!(
        stderr.contains("retrying model call") && stderr.contains("[redacted]"),
        "{stderr}"
    );
    let channels = [
        ("stdout", stdout),
        ("stderr", stderr),
        ("events", std::fs::read_to_string(&events).unwrap()),
        ("the parent's next request", parent_context),
        (
            "traces",
            serde_json::to_string(&receiver.otlp_spans()).unwrap(),
        ),
    ];
    assert!(!receiver.otlp_spans().is_empty(), "no traces were sent");
    for (channel, text) in channels {
        for secret in [KEY, HEADER, OTLP] {
            assert!(!text.contains(secret), "{channel} shows {secret}: {text}");
        }
    }
}

/// Four agent files with descriptions just under 1 MiB each would put 4 MB into every
/// request of every agent that may spawn: an agent file's description over
/// `MAX_PROFILE_DESCRIPTION_BYTES` is cut to it (the file still loads, as Claude Code
/// loads it, with a note), and one in `[profiles]` is an error (naming the key and line).
#[test]
fn profile_descriptions_over_the_cap_are_cut_or_refused_at_load() {
    let world = World::new();
    let huge = "d".repeat(1024 * 1024 - 100);
    std::fs::create_dir(world.path("agents")).unwrap();
    for i in 0..4 {
        std::fs::write(
            world.path(&format!("agents/huge{i}.md")),
            format!("---\nname: huge{i}\ndescription: {huge}\n---\nPrompt\n"),
        )
        .unwrap();
    }
    std::fs::write(
        world.path("agents/small.md"),
        "---\nname: small\ndescription: Does one thing\n---\nPrompt\n",
    )
    .unwrap();
    let path = world.path("warren.toml");
    std::fs::write(&path, "[profiles.main]\ndescription = \"Coordinator\"\n").unwrap();
    let config = warren::Config::load(&path).unwrap();
    assert!(config.profile("small").is_ok());
    assert!(
        config.agent_files().skipped.is_empty(),
        "{:?}",
        config.agent_files().skipped
    );
    for i in 0..4 {
        let profile = config.profile(&format!("huge{i}")).unwrap();
        let description = profile.description.unwrap();
        assert!(
            description.len() <= MAX_PROFILE_DESCRIPTION_BYTES
                && description.starts_with("ddd")
                && description.ends_with("[…cut]"),
            "{} bytes: …{}",
            description.len(),
            &description[description.len() - 20..]
        );
        let notes: Vec<String> = profile.notes.iter().map(ToString::to_string).collect();
        assert!(
            notes.contains(&format!(
                "description is {} bytes; cut to {} where other agents' prompts list it",
                huge.len(),
                MAX_PROFILE_DESCRIPTION_BYTES
            )),
            "{notes:?}"
        );
    }

    let long = "x".repeat(MAX_PROFILE_DESCRIPTION_BYTES + 1);
    std::fs::write(
        &path,
        format!("[profiles.main]\n\n[profiles.big]\ndescription = \"{long}\"\n"),
    )
    .unwrap();
    let error = warren::Config::load(&path).err().unwrap().to_string();
    assert!(
        error.contains(":4") && error.contains("profiles.big.description"),
        "{error}"
    );
    assert!(
        error.contains("a profile's description is at most 4096"),
        "{error}"
    );
}

/// Runs `command` to its end, or kills it after a minute (a hang, which the old code
/// had: the assertion that follows then fails instead of the suite hanging).
fn output_or_kill(mut command: Command) -> Option<std::process::Output> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

/// A cloned project's hostile agent folders and bootstrap files: two directory
/// symlinks making a cycle in `.claude/agents` (followed, loading ran forever), agent
/// files that are `/dev/zero` and a FIFO (read until memory ran out, or forever),
/// `ENVIRONMENT.md` a FIFO (read forever), and `AGENTS.md` linked to a file outside
/// the project (sent to the model as the system prompt). The run and `warren agents`
/// finish; the outside file never reaches the model; the bad files are named.
#[tokio::test]
async fn hostile_agent_folders_and_bootstrap_files_are_read_within_bounds() {
    let world = World::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let server = FakeLlm::start().await;
    server.push(Reply::answer("RAN", (10, 5)));
    config(&world, &server, "");
    let outside = elsewhere.path().join("credentials");
    std::fs::write(&outside, "OUTSIDE-SECRET").unwrap();
    let link = |target: &std::path::Path, at: &str| {
        std::os::unix::fs::symlink(target, world.path(at)).unwrap();
    };
    link(&outside, "AGENTS.md");
    let environment = world.path("ENVIRONMENT.md");
    assert!(Command::new("mkfifo")
        .arg(&environment)
        .status()
        .unwrap()
        .success());
    std::fs::create_dir_all(world.path(".claude/agents")).unwrap();
    link(std::path::Path::new("."), ".claude/agents/loop");
    link(std::path::Path::new(".."), ".claude/agents/up");
    std::fs::write(
        world.path(".claude/agents/good.md"),
        "---\nname: good\ndescription: Fine\n---\nPrompt\n",
    )
    .unwrap();
    std::fs::create_dir(world.path("agents")).unwrap();
    link(std::path::Path::new("/dev/zero"), "agents/zero.md");
    let fifo = world.path("agents/fifo.md");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());

    let command = warren(&world, &["run", "--json", "TASK"], &[]);
    let output = tokio::task::spawn_blocking(|| output_or_kill(command))
        .await
        .unwrap()
        .expect("warren run finished");
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(text(&output.stdout).contains("RAN"));
    let system = server.requests()[0].body["messages"][0].to_string();
    assert!(!system.contains("OUTSIDE-SECRET"), "{system}");
    assert!(
        stderr.contains("AGENTS.md as a bootstrap file: it resolves to")
            && stderr.contains("outside"),
        "{stderr}"
    );
    assert!(
        stderr.contains("ENVIRONMENT.md as a bootstrap file: not a regular file"),
        "{stderr}"
    );

    let command = warren(&world, &["agents", "--json"], &[]);
    let output = tokio::task::spawn_blocking(|| output_or_kill(command))
        .await
        .unwrap()
        .expect("warren agents finished");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let skipped = report["skipped"].to_string();
    assert!(
        skipped.contains("agents/fifo.md") && skipped.contains("agents/zero.md"),
        "{skipped}"
    );
    assert_eq!(
        skipped.matches("not a regular file").count(),
        2,
        "{skipped}"
    );
    let names: Vec<&str> = report["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(
        names.iter().filter(|n| **n == "good").count(),
        1,
        "{names:?}"
    );
}

/// One model reply of 100 `read_file` calls on a 200 KB granted file (20 MB of
/// results): 64 calls run, at most `MAX_TURN_RESULT_BYTES` of results go into the next
/// request, every call gets an answer, and the next turn is served.
#[tokio::test]
async fn a_reply_of_many_large_tool_calls_is_bounded() {
    let world = World::new();
    std::fs::write(world.path("docs/big.txt"), "y".repeat(200 * 1000)).unwrap();
    let server = FakeLlm::start().await;
    let made = MAX_TOOL_CALLS_PER_REPLY + 36;
    let calls: Vec<(&str, serde_json::Value)> = (0..made)
        .map(|_| ("read_file", json!({"path": "/docs/big.txt"})))
        .collect();
    server.push(Reply::tool_calls(&calls, (10, 5)));
    server.push(Reply::answer("READ-ALL", (10, 5)));
    let text = format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{}"
model = "fake-model"
stream = false
max_retries = 0

[profiles.main]
tools = ["read_file"]
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]
"#,
        server.base_url
    );
    let config = warren::Config::load(&world.config(&text)).unwrap();
    let host = warren::Host::load(config).await.unwrap();
    let report = host.start("main", "READ", None).unwrap().wait().await;
    assert_eq!(report.root.text, "READ-ALL", "{:?}", report.root);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), made, "every call is answered");
    let size = requests[1].body.to_string().len();
    assert!(
        size < MAX_TURN_RESULT_BYTES + 200 * 1024,
        "the next request is {size} bytes"
    );
    assert!(results
        .iter()
        .any(|r| r.contains("(MAX_TURN_RESULT_BYTES)")));
    assert_eq!(
        results
            .iter()
            .filter(|r| r.starts_with(&format!(
                "not run: one reply may make at most {} tool calls",
                MAX_TOOL_CALLS_PER_REPLY
            )))
            .count(),
        36
    );
}
