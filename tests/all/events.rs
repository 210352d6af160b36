//! The event stream of a run with nested, parallel, failing and cancelled children;
//! the JSONL log and `--json`; the live tree under a pseudo-terminal.

use std::collections::HashMap;
use std::process::Command;

use serde_json::{json, Value};
use warren::{AgentIntro, Event};
use warren::{AgentState, Config, Host};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::World;

fn answer(text: &str) -> Reply {
    Reply::json(
        json!({"choices": [{"finish_reason": "stop", "message": {"content": text}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
    )
}

fn calls(list: &[(&str, Value)]) -> Reply {
    let tool_calls: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("c{i}_{name}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    Reply::json(
        json!({"choices": [{"finish_reason": "tool_calls", "message": {"content": null, "tool_calls": tool_calls}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
    )
}

#[tokio::test]
async fn the_event_sequence_mirrors_the_agent_tree() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let ids = { crate::support::job_ids("events-test", 5) };
    // root spawns mid, fail, hang; mid spawns leaf in the foreground.
    server.route(
        "ROOT-TASK",
        calls(&[
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "MID-TASK"}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "FAIL-TASK"}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "HANG-TASK"}),
            ),
        ]),
    );
    server.route(
        "MID-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "worker", "task": "LEAF-TASK", "background": false}),
        )]),
    );
    server.route(
        "LEAF-TASK",
        calls(&[("list_dir", json!({"path": "/docs"}))]),
    );
    server.route("notes.md", answer("leaf done"));
    server.route("leaf done", answer("mid done"));
    server.route("FAIL-TASK", Reply::status(401, "no"));
    server.route("HANG-TASK", Reply::Hang);
    server.route(
        "Started job",
        Reply::Delayed(
            std::time::Duration::from_millis(300),
            Box::new(calls(&[
                ("cancel_agent", json!({"job_id": ids[3]})),
                ("await_agents", json!({"job_ids": "*"})),
            ])),
        ),
    );
    server.route(
        "agent_notifications",
        Reply::Delayed(
            std::time::Duration::from_millis(300),
            Box::new(calls(&[
                ("cancel_agent", json!({"job_id": ids[3]})),
                ("await_agents", json!({"job_ids": "*"})),
            ])),
        ),
    );
    server.route("CANCELLED", answer("root done"));
    let text = format!(
        "[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n\
         [defaults]\nmax_depth = 2\n[profiles.main]\ntools = []\n[profiles.main.capabilities]\nfs = [{{ host = \"docs\", guest = \"/docs\" }}]\n\
         [profiles.worker]\ntools = [\"list_dir\"]\n[profiles.worker.capabilities]\nfs = [{{ host = \"docs\", guest = \"/docs\" }}]\n",
        server.base_url
    );
    let host = Host::load(Config::load(&world.config(&text)).unwrap())
        .await
        .unwrap();
    let run = host
        .start_with_run_id("main", "ROOT-TASK", "events-test")
        .unwrap();
    let mut stream = run.events();
    let root = run.root.to_string();
    let report = run.wait().await;
    assert_eq!(report.root.text, "root done", "{:?}", report.root);
    let mut events = Vec::new();
    while let Ok(Some(record)) =
        tokio::time::timeout(std::time::Duration::from_millis(200), stream.next()).await
    {
        events.push(record.event);
    }
    let position = |wanted: &dyn Fn(&Event) -> bool| {
        events
            .iter()
            .position(wanted)
            .unwrap_or_else(|| panic!("missing event in {events:#?}"))
    };
    let (mid, fail, hang, leaf) = (&ids[1], &ids[2], &ids[3], &ids[4]);
    assert_eq!(root, ids[0]);
    let mut states = HashMap::new();
    for id in [&ids[0], mid, fail, hang, leaf] {
        let started = position(
            &|e| matches!(e, Event::AgentStarted(AgentIntro { agent, .. }) if agent == id),
        );
        let finished =
            position(&|e| matches!(e, Event::AgentFinished { agent, .. } if agent == id));
        assert!(started < finished, "{id}");
        if let Event::AgentFinished { state, .. } = &events[finished] {
            states.insert(id.clone(), *state);
        }
        if id != &ids[0] {
            let queued = position(
                &|e| matches!(e, Event::AgentQueued(AgentIntro { agent, .. }) if agent == id),
            );
            assert!(queued < started, "{id}");
        }
    }
    assert_eq!(states[&ids[0]], AgentState::Ok);
    assert_eq!(states[mid], AgentState::Ok);
    assert_eq!(states[leaf], AgentState::Ok);
    assert_eq!(states[fail], AgentState::Error);
    assert_eq!(states[hang], AgentState::Cancelled);
    assert!(
        matches!(events.iter().find(|e| matches!(e, Event::AgentQueued(AgentIntro { agent, .. }) if agent == leaf)), Some(Event::AgentQueued(AgentIntro { parent: Some(p), .. })) if p == mid)
    );
    // The root finishes last, and every tool call that started also finished.
    assert!(
        matches!(events.last(), Some(Event::AgentFinished { agent, .. }) if *agent == root),
        "{:?}",
        events.last()
    );
    let started: Vec<&String> = events
        .iter()
        .filter_map(|e| {
            if let Event::ToolCallStarted { call_id, .. } = e {
                Some(call_id)
            } else {
                None
            }
        })
        .collect();
    let finished = events
        .iter()
        .filter(|e| matches!(e, Event::ToolCallFinished { .. }))
        .count();
    assert_eq!(started.len(), finished);
    let list_dir = events
        .iter()
        .find(|e| matches!(e, Event::ToolCallFinished { tool, .. } if tool == "list_dir"))
        .unwrap();
    assert!(
        matches!(list_dir, Event::ToolCallFinished { agent, outcome, .. } if agent == leaf && *outcome == warren::ToolOutcome::Ok)
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Usage { agent, turns: 2, .. } if agent == mid)));
}

fn demo(args: &[&str], jsonl: Option<&std::path::Path>) -> std::process::Output {
    crate::support::guests();
    let config = crate::support::demo_config();
    let mut command = Command::new(env!("CARGO_BIN_EXE_warren"));
    command
        .arg("--config")
        .arg(&config)
        .arg("run")
        .arg("Summarise.")
        .args(args);
    if let Some(path) = jsonl {
        command.arg("--events").arg(path);
    }
    command.output().unwrap()
}

#[test]
fn the_jsonl_log_and_json_output_match_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let output = demo(&["--json", "--progress", "none"], Some(&log));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["state"], "ok");
    // The coordinator, three researchers and the analyst.
    assert_eq!(result["agents"].as_array().unwrap().len(), 5);
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines
        .iter()
        .all(|l| l["ts_ms"].as_u64().unwrap() > 1_600_000_000_000 && l["type"].is_string()));
    let finished: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "agent_finished")
        .collect();
    assert_eq!(finished.len(), 5);
    let root_id = result["agents"][0]["id"].as_str().unwrap();
    assert_eq!(finished.last().unwrap()["agent"], root_id);
    let denied = lines
        .iter()
        .find(|l| l["type"] == "tool_call_finished" && l["tool"] == "write_file")
        .unwrap();
    assert_eq!(denied["outcome"], "failed");
    assert!(
        denied["summary"].as_str().unwrap().contains("denied"),
        "{denied}"
    );
    // The sandbox's figures: the plugin's guest ran (fuel), a spawn tool ran in the
    // host (no `fuel_used` field); both count their output in bytes.
    assert!(denied["fuel_used"].as_u64().unwrap() > 0, "{denied}");
    assert!(denied["output_bytes"].as_u64().unwrap() > 0, "{denied}");
    let spawned = lines
        .iter()
        .find(|l| l["type"] == "tool_call_finished" && l["tool"] == "spawn_agent")
        .unwrap();
    assert!(spawned.get("fuel_used").is_none(), "{spawned}");
    assert!(spawned["output_bytes"].as_u64().unwrap() > 0, "{spawned}");
    let cost: f64 = result["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["cost_usd"].as_f64().unwrap())
        .sum();
    assert!((cost - result["total_cost_usd"].as_f64().unwrap()).abs() < 1e-5);

    // What each agent said is in its end event; what its parent called it is in its
    // start event and in the JSON.
    let root_end = finished.last().unwrap();
    assert_eq!(root_end["text"], result["text"]);
    assert!(finished
        .iter()
        .all(|f| !f["text"].as_str().unwrap().is_empty()));
    let labels: std::collections::BTreeSet<&str> = result["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["description"].as_str())
        .collect();
    assert_eq!(
        labels,
        [
            "capacity totals",
            "hydro notes",
            "solar notes",
            "wind notes"
        ]
        .into()
    );
    assert!(lines
        .iter()
        .any(|l| l["type"] == "agent_started" && l["label"] == "solar notes"));

    // The run has its own id, on every event; a second run gets another, and other
    // job ids.
    let run_id = result["run_id"].as_str().unwrap();
    assert_eq!(run_id.len(), 16, "{run_id}");
    assert!(lines.iter().all(|l| l["run"] == run_id));
    let again: Value =
        serde_json::from_slice(&demo(&["--json", "--progress", "none"], None).stdout).unwrap();
    assert_ne!(again["run_id"], result["run_id"]);
    assert_ne!(again["agents"][0]["id"], result["agents"][0]["id"]);
}

#[test]
fn plain_progress_and_the_summary_name_each_agent_and_line_up() {
    let output = demo(&["--progress", "plain"], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("started researcher (solar notes): Summarise /docs/solar.md"),
        "{stderr}"
    );
    // A log line within an agent's work names its trace.
    let denial = stderr
        .lines()
        .find(|l| l.contains("plugin reported a denial"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let trace = denial
        .strip_prefix("trace_id=")
        .unwrap_or_else(|| panic!("{denial}"));
    assert!(
        trace[..32].bytes().all(|b| b.is_ascii_hexdigit()),
        "{denial}"
    );
    // The summary table: every column starts where its header does.
    let table: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("agent "))
        .take_while(|l| !l.starts_with("total cost"))
        .collect();
    assert_eq!(table.len(), 6, "{stderr}");
    let header = table[0];
    for column in ["parent", "profile", "state"] {
        let at = header.find(column).unwrap();
        for row in &table[1..] {
            assert!(
                at == 0 || row.as_bytes()[at - 1] == b' ' && row.as_bytes()[at] != b' ',
                "`{column}` at {at} is off in\n{header}\n{row}"
            );
        }
    }
    let description = header.find("description").unwrap();
    assert!(
        table[1..]
            .iter()
            .any(|row| row.get(description..) == Some("solar notes")),
        "{}",
        table.join("\n")
    );
}

#[test]
fn the_live_tree_renders_under_a_pseudo_terminal() {
    crate::support::guests();
    let config = crate::support::demo_config();
    // A 60-column terminal: lines longer than that would wrap and break the cursor
    // arithmetic of the redraws. Warnings (the hydro researcher's denied write) are
    // logged while the tree is live.
    let command = format!(
        "stty cols 60 rows 50; {} --config {} run Summarise.",
        env!("CARGO_BIN_EXE_warren"),
        config.display()
    );
    // `script` (util-linux) runs the command on a pseudo-terminal and copies its screen.
    let started = std::time::Instant::now();
    let output = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("`script` from util-linux is needed: apt-get install util-linux");
    let raw = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{raw}");
    let elapsed = started.elapsed();
    assert!(
        elapsed > std::time::Duration::from_millis(1200)
            && elapsed < std::time::Duration::from_secs(10),
        "the demo's model takes a few hundred ms a turn: {elapsed:?}"
    );
    let frames = raw.matches("\u{1b}[J").count();
    assert!(
        frames >= 8,
        "the view redraws in place, several frames: {frames}"
    );
    let screen = render(&raw);
    let text = screen.join("\n");
    // One tree, drawn last, with no line left from an earlier frame of another height.
    let tree: Vec<&String> = screen
        .iter()
        .filter(|l| l.contains("─ ") && (l.contains(" researcher ") || l.contains(" analyst ")))
        .collect();
    assert_eq!(tree.len(), 4, "{text}");
    assert!(
        tree.iter().all(|l| l.contains("✓ ok") || l.contains("✗")),
        "{text}"
    );
    assert!(
        tree.iter().any(|l| l.contains("├─ ")) && tree.iter().any(|l| l.contains("└─ ")),
        "{text}"
    );
    assert_eq!(
        screen
            .iter()
            .filter(|l| l.contains(" main ✓ ok · 3 turns"))
            .count(),
        1,
        "{text}"
    );
    assert!(
        !text.chars().any(|c| ('⠋'..='⠿').contains(&c)),
        "no spinner of a running agent is left: {text}"
    );
    // The answer is printed once (the streamed copy under the tree is gone).
    assert_eq!(
        text.matches("Summary of 2025 energy notes").count(),
        1,
        "{text}"
    );
    // The warning logged during the run is on the screen, whole.
    assert!(text.contains("plugin reported a denial"), "{text}");
    assert!(screen.iter().all(|l| l.chars().count() <= 60), "{text}");
    assert!(
        text.contains("agent    parent   profile"),
        "the summary table follows: {text}"
    );
}

/// The final screen a terminal shows for `raw` output: printable text, `\r`, `\n`, and
/// the sequences the live view uses (cursor up, clear line, clear to end of screen);
/// other escape sequences (colours) are dropped. Lines wrap at 60 columns.
fn render(raw: &str) -> Vec<String> {
    let width = 60;
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' if chars.peek() == Some(&'[') => {
                chars.next();
                let mut arg = String::new();
                let command = loop {
                    match chars.next() {
                        Some(c) if c.is_ascii_digit() || c == ';' || c == '?' => arg.push(c),
                        Some(c) => break c,
                        None => break '\0',
                    }
                };
                let n: usize = arg.parse().unwrap_or(1);
                match command {
                    'A' => row = row.saturating_sub(n),
                    // Down, stopping at the last row (a terminal's bottom).
                    'B' => row = (row + n).min(rows.len() - 1),
                    'K' => rows[row].clear(),
                    'J' => rows.truncate(row + 1),
                    _ => {}
                }
                if command == 'J' {
                    rows[row].truncate(col);
                }
            }
            '\r' => col = 0,
            '\n' => {
                row += 1;
                col = 0;
                if rows.len() <= row {
                    rows.push(Vec::new());
                }
            }
            c if c.is_control() => {}
            c => {
                if col >= width {
                    row += 1;
                    col = 0;
                    if rows.len() <= row {
                        rows.push(Vec::new());
                    }
                }
                let line = &mut rows[row];
                while line.len() < col {
                    line.push(' ');
                }
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
    }
    rows.into_iter()
        .map(|r| r.into_iter().collect::<String>().trim_end().to_string())
        .collect()
}

/// `warren run` on the offline demo, exporting traces to `receiver` with
/// `OTEL_EXPORTER_OTLP_HEADERS` set to `headers`.
async fn demo_with_otlp(receiver: &FakeLlm, headers: &str) -> std::process::Output {
    demo_with_otlp_env(receiver, headers, &[]).await
}

/// [`demo_with_otlp`] with more variables set.
async fn demo_with_otlp_env(
    receiver: &FakeLlm,
    headers: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    let endpoint = receiver.base_url.trim_end_matches("/v1").to_string();
    let config = crate::support::demo_config();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .arg("--config")
        .arg(&config)
        .args(["run", "Summarise.", "--quiet", "--otlp-endpoint", &endpoint])
        .env("OTEL_EXPORTER_OTLP_HEADERS", headers)
        .env_remove("WARREN_OTEL_GENAI_COMPAT")
        .env_remove("OTEL_SEMCONV_STABILITY_OPT_IN")
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap()
}

/// An OTLP span's attribute `key`, as text (string or integer).
fn span_attr(span: &Value, key: &str) -> Option<String> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| {
            let value = &a["value"];
            value["stringValue"]
                .as_str()
                .map(str::to_string)
                .or_else(|| value["intValue"].as_str().map(str::to_string))
                .unwrap_or_default()
        })
}

/// The names of OpenTelemetry's GenAI conventions as they stand (v1.37 and after):
/// `gen_ai.provider.name` on each model call, `gen_ai.conversation.id` (the run id)
/// on every GenAI span, cache-read tokens beside the usage, and each sandboxed call's fuel,
/// peak memory and bytes as `warren.*`; the v1.36 `gen_ai.system` only when
/// `WARREN_OTEL_GENAI_COMPAT=1.36` asks for it.
#[tokio::test]
async fn spans_carry_the_current_genai_names_and_the_old_only_when_asked() {
    for compat in [false, true] {
        let receiver = FakeLlm::start().await;
        for _ in 0..50 {
            receiver.push(Reply::json(json!({})));
        }
        let env: &[(&str, &str)] = match compat {
            true => &[("WARREN_OTEL_GENAI_COMPAT", "1.36")],
            false => &[],
        };
        let output = demo_with_otlp_env(&receiver, "", env).await;
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let spans = receiver.otlp_spans();
        let named = |prefix: &str| -> Vec<&Value> {
            spans
                .iter()
                .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
                .collect()
        };
        let root = named("invoke_agent main");
        let run = span_attr(root[0], "warren.run.id").expect("the run id");
        let genai = spans
            .iter()
            .filter(|s| span_attr(s, "gen_ai.operation.name").is_some());
        for span in genai {
            assert_eq!(
                span_attr(span, "gen_ai.conversation.id").as_deref(),
                Some(run.as_str()),
                "{span}"
            );
        }
        let chats = named("chat ");
        assert!(!chats.is_empty());
        for chat in &chats {
            assert_eq!(
                span_attr(chat, "gen_ai.provider.name").as_deref(),
                Some("warren.scripted")
            );
            assert_eq!(
                span_attr(chat, "gen_ai.usage.cache_read.input_tokens").as_deref(),
                Some("0")
            );
            let system = span_attr(chat, "gen_ai.system");
            assert_eq!(
                system.as_deref(),
                compat.then_some("warren.scripted"),
                "{chat}"
            );
        }
        let code = named("execute_tool run_python");
        assert_eq!(code.len(), 1);
        let fuel: u64 = span_attr(code[0], "warren.fuel_used")
            .unwrap()
            .parse()
            .unwrap();
        let peak: u64 = span_attr(code[0], "warren.memory_peak_bytes")
            .unwrap()
            .parse()
            .unwrap();
        let bytes: u64 = span_attr(code[0], "warren.output_bytes")
            .unwrap()
            .parse()
            .unwrap();
        assert!(fuel > 0 && peak > 1 << 20 && bytes > 0, "{}", code[0]);
        // A spawn runs no guest: no fuel or memory is made up for it.
        for spawn in named("execute_tool spawn_agent") {
            assert!(span_attr(spawn, "warren.fuel_used").is_none(), "{spawn}");
            assert!(span_attr(spawn, "warren.output_bytes").is_some(), "{spawn}");
        }
    }
}

/// The OTLP exporter does not follow a redirect to another address: its headers
/// (`OTEL_EXPORTER_OTLP_HEADERS`) usually carry the tracing backend's key. It warns
/// instead, and the run itself is unaffected.
#[tokio::test]
async fn the_otlp_exporter_does_not_follow_a_redirect_elsewhere() {
    crate::support::guests();
    let elsewhere = FakeLlm::start().await;
    let redirector = FakeLlm::start().await;
    for _ in 0..50 {
        redirector.push(Reply::Full {
            status: 307,
            headers: vec![("location", format!("{}/traces", elsewhere.base_url))],
            body: String::new(),
        });
    }
    let output = demo_with_otlp(&redirector, "x-honeycomb-team=s3cret").await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!redirector.requests().is_empty(), "no traces were sent");
    assert!(
        elsewhere.requests().is_empty(),
        "the redirect was followed, with these headers: {:?}",
        elsewhere
            .requests()
            .iter()
            .map(|r| &r.headers)
            .collect::<Vec<_>>()
    );
    assert!(
        stderr.contains("HTTP 307") && stderr.contains("not followed"),
        "{stderr}"
    );
}

#[tokio::test]
async fn traces_reach_an_otlp_receiver_and_mirror_the_agent_tree() {
    crate::support::guests();
    // The fake LLM server doubles as the OTLP/HTTP receiver: it records every POST.
    let receiver = FakeLlm::start().await;
    for _ in 0..50 {
        receiver.push(Reply::json(json!({})));
    }
    let output = demo_with_otlp(&receiver, "Authorization=Basic%20dGVzdA==").await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let posts = receiver.requests();
    assert!(!posts.is_empty(), "no traces were sent");
    assert!(posts.iter().all(|p| p.path == "/v1/traces"));
    assert_eq!(posts[0].headers["authorization"], "Basic dGVzdA==");
    let spans = receiver.otlp_spans();
    let trace_ids: std::collections::BTreeSet<&str> = spans
        .iter()
        .map(|s| s["traceId"].as_str().unwrap())
        .collect();
    assert_eq!(trace_ids.len(), 1, "one trace for the whole run");
    let attr = span_attr;
    let named =
        |name: &str| -> Vec<&Value> { spans.iter().filter(|s| s["name"] == name).collect() };
    let root = named("invoke_agent main");
    assert_eq!(root.len(), 1);
    assert!(root[0].get("parentSpanId").is_none());
    assert_eq!(
        attr(root[0], "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    let spawns = named("execute_tool spawn_agent");
    assert_eq!(spawns.len(), 4);
    for spawn in &spawns {
        assert_eq!(spawn["parentSpanId"], root[0]["spanId"]);
        assert_eq!(
            attr(spawn, "gen_ai.tool.name").as_deref(),
            Some("spawn_agent")
        );
        assert!(attr(spawn, "gen_ai.tool.call.id").is_some());
    }
    let researchers = named("invoke_agent researcher");
    assert_eq!(researchers.len(), 3);
    let spawn_ids: Vec<&Value> = spawns.iter().map(|s| &s["spanId"]).collect();
    for researcher in &researchers {
        assert!(
            spawn_ids.contains(&&researcher["parentSpanId"]),
            "a child nests under its parent's spawn_agent span"
        );
        assert_eq!(
            attr(researcher, "gen_ai.agent.name").as_deref(),
            Some("researcher")
        );
        assert!(attr(researcher, "gen_ai.agent.id").is_some());
        // What it was asked and answered, and how it ended, as trace UIs show them.
        let input = attr(researcher, "input.value").unwrap();
        assert!(input.starts_with("Summarise /docs/"), "{input}");
        let messages: Value =
            serde_json::from_str(&attr(researcher, "gen_ai.input.messages").unwrap()).unwrap();
        assert_eq!(messages[0]["parts"][0]["content"], input.as_str());
        assert!(!attr(researcher, "output.value").unwrap().is_empty());
        let output: Value =
            serde_json::from_str(&attr(researcher, "gen_ai.output.messages").unwrap()).unwrap();
        assert_eq!(output[0]["role"], "assistant");
        assert_eq!(
            attr(researcher, "warren.agent.state").as_deref(),
            Some("ok")
        );
        assert!(attr(researcher, "warren.run.id").is_some());
    }
    let chats = named("chat scripted");
    assert_eq!(chats.len(), 3 + 2 + 2 + 3 + 2, "one per model turn");
    for chat in &chats {
        assert_eq!(
            attr(chat, "gen_ai.request.model").as_deref(),
            Some("scripted")
        );
        assert!(
            attr(chat, "gen_ai.usage.input_tokens").is_some()
                && attr(chat, "gen_ai.usage.output_tokens").is_some()
        );
    }
    // The analyst's code ran as one sandboxed call, with its span.
    assert_eq!(named("execute_tool run_python").len(), 1);
    let denied = named("execute_tool write_file");
    assert_eq!(denied.len(), 1);
    assert_eq!(attr(denied[0], "error.type").as_deref(), Some("failed"));
    assert_eq!(denied[0]["status"]["code"], 2);
}

/// The live tree in a real terminal multiplexer: tmux, 120 columns, the demo run with
/// the tree on. The sandbox's denial is logged while the tree is shown; the tree must
/// be erased for it, not left standing above it (in the scrollback too), so the root
/// shows once at every moment.
#[test]
fn in_tmux_a_log_line_never_leaves_a_second_tree_behind() {
    crate::support::guests();
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", "warren-test-tree"])
            .args(args)
            .output()
            .expect("tmux is needed for the terminal test: apt-get install tmux (scripts/install-deps does)")
    };
    let config = crate::support::demo_config();
    let command = format!(
        "{} --config {} run Summarise. --progress tty; sleep 60",
        env!("CARGO_BIN_EXE_warren"),
        config.display()
    );
    let _ = tmux(&["kill-server"]);
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        "tree",
        "-x",
        "120",
        "-y",
        "40",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    let root_line = |line: &&str| {
        line.len() > 12
            && line[..6].bytes().all(|b| b.is_ascii_hexdigit())
            && line[6..].starts_with(" main ")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut screens = Vec::new();
    loop {
        let screen = tmux(&["capture-pane", "-p", "-S", "-200", "-t", "tree"]);
        let screen = String::from_utf8_lossy(&screen.stdout).into_owned();
        let done = screen.contains("total cost");
        screens.push(screen);
        if done || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(40));
    }
    let _ = tmux(&["kill-server"]);
    let last = screens.last().unwrap();
    assert!(
        last.contains("total cost"),
        "the demo did not finish:\n{last}"
    );
    assert!(last.contains("WARN plugin reported a denial"), "{last}");
    for screen in &screens {
        let roots = screen.lines().filter(root_line).count();
        assert!(roots <= 1, "the root shows {roots} times:\n{screen}");
    }
}

/// Twenty-four children under `max_concurrent = 3`, four runs over: in the JSONL log, as
/// in the journal, no more than three children are ever between `agent_started` and
/// `agent_finished` (a slot passes on only once its child's end is published), and
/// each child's `agent_queued` and `agent_started` say how it was spawned.
#[tokio::test(flavor = "multi_thread")]
async fn the_events_never_show_more_children_running_than_max_concurrent() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let spawns: Vec<(&str, Value)> = (0..24)
        .map(|i| {
            let background = i != 23;
            (
                "spawn_agent",
                json!({"profile": "worker", "task": format!("SLOT-CHILD-{i}"), "background": background}),
            )
        })
        .collect();
    server.respond_with(std::sync::Arc::new(move |body: &Value| {
        let messages = body["messages"].as_array()?;
        let first = messages.iter().find(|m| m["role"] == "user")?["content"].as_str()?;
        if first.starts_with("SLOT-CHILD-") {
            return Some(Reply::Delayed(
                std::time::Duration::from_millis(2),
                Box::new(answer("child done")),
            ));
        }
        let turns = messages.iter().filter(|m| m["role"] == "assistant").count();
        Some(match turns {
            0 => calls(&spawns),
            1 => calls(&[("await_agents", json!({"job_ids": "*"}))]),
            _ => answer("root done"),
        })
    }));
    let text = format!(
        "[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n\
         [defaults]\nmax_concurrent = 3\n[profiles.main]\ntools = []\n[profiles.worker]\ntools = []\n",
        server.base_url
    );
    let config = world.config(&text);
    for round in 0..4 {
        let log = world.path(&format!("events-{round}.jsonl"));
        let output = Command::new(env!("CARGO_BIN_EXE_warren"))
            .arg("--config")
            .arg(&config)
            .args(["run", "ROOT", "--progress", "none", "--events"])
            .arg(&log)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let lines: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let children: std::collections::HashSet<&str> = lines
            .iter()
            .filter(|l| l["type"] == "agent_queued" && !l["parent"].is_null())
            .map(|l| l["agent"].as_str().unwrap())
            .collect();
        let (mut running, mut most) = (0i32, 0i32);
        for line in lines
            .iter()
            .filter(|l| children.contains(l["agent"].as_str().unwrap_or_default()))
        {
            match line["type"].as_str().unwrap() {
                "agent_started" => running += 1,
                "agent_finished" => running -= 1,
                _ => {}
            }
            most = most.max(running);
        }
        assert_eq!((children.len(), running), (24, 0), "round {round}");
        assert!(most <= 3, "round {round}: {most} children running at once");
        let modes: Vec<(String, String)> = lines
            .iter()
            .filter(|l| l["type"] == "agent_queued" || l["type"] == "agent_started")
            .filter(|l| !l["parent"].is_null())
            .map(|l| {
                let task = l["task"].as_str().unwrap().to_string();
                (task, l["mode"].as_str().unwrap_or("none").to_string())
            })
            .collect();
        assert_eq!(modes.len(), 48, "round {round}: {modes:?}");
        for (task, mode) in &modes {
            let expected = if task == "SLOT-CHILD-23" {
                "foreground"
            } else {
                "background"
            };
            assert_eq!(mode, expected, "round {round}: {task}");
        }
        let root = lines
            .iter()
            .find(|l| l["type"] == "agent_started" && l["parent"].is_null())
            .unwrap();
        assert!(root.get("mode").is_none(), "{root}");
    }
}
