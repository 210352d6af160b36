//! The run journal through the binary: every run recorded as it goes, read back by
//! later processes (`warren runs`, `warren show`), and a run whose process was killed
//! with SIGKILL still readable, its unfinished agents shown as interrupted.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{text, warren, World};

fn answer(text: &str) -> Reply {
    Reply::answer(text, (100, 50))
}

fn calls(list: &[(&str, Value)]) -> Reply {
    Reply::tool_calls(list, (100, 50))
}

/// A project on the fake model: `main` may spawn `worker`s, which may append to a
/// writable grant.
fn project(world: &World, server: &FakeLlm) {
    world.config(&format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{}"
model = "fake-model"
api_key_env = "CARGO_PKG_NAME"
stream = false
max_retries = 0
price = {{ input_per_mtok = 1.0, output_per_mtok = 1.0 }}

[defaults]
max_depth = 2
max_concurrent = 2
budget_usd = 2.0

[profiles.main]
tools = []
[profiles.main.capabilities]
fs = [{{ host = "out", guest = "/out", mode = "rw" }}]

[profiles.worker]
description = "Does one thing"
tools = ["read_file", "write_file"]
[profiles.worker.capabilities]
fs = [{{ host = "out", guest = "/out", mode = "rw" }}]
"#,
        server.base_url
    ));
}

fn json_of(output: &std::process::Output) -> Value {
    assert!(
        output.status.success(),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&output.stdout)))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_run_is_journaled_and_read_back_by_later_processes() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "CHILD-ONE", "description": "first"}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "CHILD-TWO"}),
            ),
        ]),
    );
    server.route(
        "CHILD-ONE",
        calls(&[(
            "write_file",
            json!({"path": "/out/one.txt", "content": "one"}),
        )]),
    );
    server.route("one.txt", answer("child one done"));
    server.route("CHILD-TWO", answer("child two done"));
    server.route(
        "Started job",
        calls(&[("await_agents", json!({"job_ids": "*"}))]),
    );
    server.route("child two done", answer("ROOT ANSWER"));
    // A child that ends before the root's second turn comes as a notification
    // instead of the spawn answers: the root awaits the rest.
    server.respond_with(std::sync::Arc::new(|body: &Value| {
        let newest = body["messages"].as_array()?.last()?.to_string();
        newest
            .contains("background sub-agents finished")
            .then(|| calls(&[("await_agents", json!({"job_ids": "*"}))]))
    }));
    project(&world, &server);

    let run = warren(&world, &["run", "--json", "ROOT-TASK"]);
    let report = json_of(&run);
    let run_id = report["run_id"].as_str().unwrap().to_string();
    assert_eq!(report["text"], "ROOT ANSWER", "{report}");

    let journal = world.path(&format!(".warren/runs/{run_id}/journal.jsonl"));
    let lines: Vec<Value> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "run_started");
    assert_eq!(lines[0]["v"], 2);
    assert_eq!(lines.last().unwrap()["type"], "run_finished");
    let count = |kind: &str| lines.iter().filter(|l| l["type"] == kind).count();
    assert_eq!(count("agent_queued"), 3);
    // Each distinct system prompt is written once, before the first spec naming it:
    // the root's, and the one both workers share.
    let mut prompts = std::collections::BTreeMap::new();
    for line in &lines {
        match line["type"].as_str() {
            Some("system_prompt") => {
                let digest = line["digest"].as_str().unwrap();
                assert!(
                    prompts.insert(digest, &line["text"]).is_none(),
                    "{lines:#?}"
                );
            }
            Some("agent_spec") => {
                assert!(line.get("system").is_none(), "{line}");
                let named = line["system_digest"].as_str().unwrap();
                assert!(prompts.contains_key(named), "{named} before its prompt");
            }
            _ => {}
        }
    }
    assert_eq!(prompts.len(), 2, "{prompts:#?}");
    assert_eq!(count("agent_spec"), 3);
    assert_eq!(count("agent_finished"), 3);
    assert!(count("model_response") >= 4, "{lines:#?}");
    // Each response names the request it answered by a digest of the body sent.
    let digests: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter(|l| l["type"] == "model_response")
        .map(|l| l["request_digest"].as_str().unwrap())
        .collect();
    assert_eq!(digests.len(), count("model_response"), "{digests:?}");
    assert!(digests.iter().all(|d| d.len() == 32), "{digests:?}");
    // Every tool call is recorded before it runs, and its result after.
    assert_eq!(count("tool_started"), count("tool_finished"));
    let write = lines
        .iter()
        .find(|l| l["type"] == "tool_started" && l["tool"] == "write_file")
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(write["arguments"].as_str().unwrap()).unwrap()["content"],
        "one"
    );
    // Each result with the sandbox's figures: the fuel the plugin burned (of the
    // default 5e9) and the bytes it returned; a spawn tool runs in the host, no fuel.
    let finished = |started: &Value| {
        lines
            .iter()
            .find(|l| {
                l["type"] == "tool_finished"
                    && l["agent"] == started["agent"]
                    && l["call_id"] == started["call_id"]
            })
            .unwrap()
            .clone()
    };
    let wrote = finished(write);
    let fuel = wrote["fuel_used"]
        .as_u64()
        .unwrap_or_else(|| panic!("{wrote}"));
    assert!(fuel > 0 && fuel < 5_000_000_000, "{wrote}");
    assert_eq!(
        wrote["output_bytes"].as_u64().unwrap(),
        wrote["content"].as_str().unwrap().len() as u64,
        "{wrote}"
    );
    let spawn = lines
        .iter()
        .find(|l| l["type"] == "tool_started" && l["tool"] == "spawn_agent")
        .unwrap();
    let spawned = finished(spawn);
    assert!(spawned.get("fuel_used").is_none(), "{spawned}");
    assert!(spawned["output_bytes"].as_u64().unwrap() > 0, "{spawned}");
    // The run's own limits, for showing it against them afterwards.
    assert_eq!(
        lines[0]["limits"],
        json!({"budget_usd": 2.0, "max_concurrent": 2, "max_depth": 2})
    );

    // A later process lists it and shows its tree and an agent's transcript.
    let listed = json_of(&warren(&world, &["runs", "--json"]));
    let runs = listed["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{listed}");
    assert_eq!(runs[0]["run_id"], run_id.as_str());
    assert_eq!(runs[0]["state"], "ok");
    assert_eq!(runs[0]["finished"], true);
    assert_eq!(runs[0]["agents"], 3);
    assert_eq!(runs[0]["task"], "ROOT-TASK");
    assert!(runs[0]["tokens"].as_u64().unwrap() >= 600, "{listed}");
    assert_eq!(runs[0]["budget_usd"], 2.0, "{listed}");
    assert_eq!(runs[0]["max_concurrent"], 2, "{listed}");

    let shown = json_of(&warren(&world, &["show", &run_id[..6], "--json"]));
    let agents = shown["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 3);
    assert_eq!(agents[0]["parent"], Value::Null);
    assert_eq!(agents[0]["text"], "ROOT ANSWER");
    let one = agents.iter().find(|a| a["task"] == "CHILD-ONE").unwrap();
    assert_eq!(one["label"], "first");
    assert_eq!(one["state"], "ok", "{lines:#?}");
    assert_eq!(one["text"], "child one done");

    let transcript = json_of(&warren(
        &world,
        &[
            "show",
            "last",
            "--agent",
            one["id"].as_str().unwrap(),
            "--json",
        ],
    ));
    let kinds: Vec<&str> = transcript["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "agent_queued",
            "agent_started",
            "agent_spec",
            "model_response",
            "tool_started",
            "tool_finished",
            "model_response",
            "agent_finished"
        ]
    );
    let shown_result = &transcript["records"][5];
    assert_eq!(shown_result["fuel_used"], fuel, "{transcript}");
    assert_eq!(shown_result["output_bytes"], wrote["output_bytes"]);
    let plain_transcript = warren(
        &world,
        &["show", "last", "--agent", one["id"].as_str().unwrap()],
    );
    let plain_transcript = text(&plain_transcript.stdout);
    let figures = format!(
        "ms, fuel {}, {} bytes, memory peak {} KiB)",
        thousands(fuel),
        wrote["output_bytes"],
        thousands(wrote["memory_peak_bytes"].as_u64().unwrap() / 1024)
    );
    assert!(plain_transcript.contains(&figures), "{plain_transcript}");

    let plain = warren(&world, &["show", "last"]);
    let plain = text(&plain.stdout);
    assert!(
        plain.contains(&format!("run {run_id} · ok · 3 agents")),
        "{plain}"
    );
    assert!(plain.contains(" of $2.0000 budget · "), "{plain}");
    assert!(
        plain.contains("  ✓ ") && plain.contains("worker (first) · ok"),
        "{plain}"
    );
    let table = text(&warren(&world, &["runs"]).stdout);
    assert!(
        table.lines().nth(1).unwrap().starts_with(&run_id),
        "{table}"
    );

    // Names that are not runs are errors naming what exists.
    let missing = warren(&world, &["show", "nope"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing.stderr).contains("no run `nope`"),
        "{}",
        text(&missing.stderr)
    );
    // A run id names one run: reusing it is refused before anything runs.
    let again = warren(&world, &["run", "--run-id", &run_id, "ROOT-TASK"]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("already journaled"),
        "{}",
        text(&again.stderr)
    );
    // --no-journal runs leave nothing.
    let before = std::fs::read_dir(world.path(".warren/runs"))
        .unwrap()
        .count();
    server.route("THIRD-TASK", answer("third"));
    let unjournaled = warren(&world, &["run", "--no-journal", "-q", "THIRD-TASK"]);
    assert!(
        unjournaled.status.success(),
        "{}",
        text(&unjournaled.stderr)
    );
    assert_eq!(
        std::fs::read_dir(world.path(".warren/runs"))
            .unwrap()
            .count(),
        before
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_with_sigkill_is_still_read_with_its_finished_work() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "QUICK-CHILD"}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "SLOW-CHILD"}),
            ),
        ]),
    );
    server.route("QUICK-CHILD", answer("quick child done"));
    server.route("SLOW-CHILD", Reply::Hang);
    // The root's next turn waits forever, whether it sees its spawns' answers or the
    // quick child's result first.
    server.route("Started job", Reply::Hang);
    server.route("quick child done", Reply::Hang);
    project(&world, &server);

    let mut child = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "-q", "--run-id", "killed-run", "ROOT-TASK"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once the quick child's end is on disk and the slow one is waiting on
    // its model.
    let journal = world.path(".warren/runs/killed-run/journal.jsonl");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let written = std::fs::read_to_string(&journal).unwrap_or_default();
        if written.contains("quick child done") && written.matches("agent_spec").count() >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run did not get far:\n{written}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let killed = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait().unwrap();
    // A write cut short by the crash leaves a torn last line: it is ignored.
    let mut torn = std::fs::read(&journal).unwrap();
    torn.extend_from_slice(b"{\"ts_ms\":1,\"type\":\"model_resp");
    std::fs::write(&journal, torn).unwrap();

    let listed = json_of(&warren(&world, &["runs", "--json"]));
    let run = &listed["runs"][0];
    assert_eq!(run["run_id"], "killed-run", "{listed}");
    assert_eq!(run["finished"], false);
    assert_eq!(run["state"], "interrupted");
    let shown = json_of(&warren(&world, &["show", "killed", "--json"]));
    let states: Vec<(&str, &str)> = shown["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["task"].as_str().unwrap(), a["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("ROOT-TASK", "interrupted"),
            ("QUICK-CHILD", "ok"),
            ("SLOW-CHILD", "interrupted")
        ]
    );
    let quick = &shown["agents"][1];
    assert_eq!(quick["text"], "quick child done");
    let plain = text(&warren(&world, &["runs"]).stdout);
    assert!(plain.contains("interrupted (no end)"), "{plain}");
}

/// The end of a call that could have had an effect (a write to a granted directory)
/// is on disk before its agent asks its model again, so a crash of the process after
/// it cannot leave the call in doubt: the fake model reads the journal the moment the
/// next request arrives. (Other records are written in batches, up to 20 ms later.)
#[tokio::test(flavor = "multi_thread")]
async fn the_end_of_a_call_that_could_have_an_effect_is_on_disk_before_its_agent_goes_on() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "WRITE-TASK",
        calls(&[(
            "write_file",
            json!({"path": "/out/note.txt", "content": "written once"}),
        )]),
    );
    let journal = world.path(".warren/runs/effect-run/journal.jsonl");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (reader, seen_by_server) = (journal.clone(), seen.clone());
    server.respond_with(std::sync::Arc::new(move |_body: &Value| {
        let written = std::fs::read_to_string(&reader).unwrap_or_default();
        *seen_by_server.lock().unwrap() = Some(written);
        Some(answer("done"))
    }));
    project(&world, &server);
    std::fs::create_dir_all(world.path("out")).unwrap();
    let output = warren(
        &world,
        &[
            "run",
            "-q",
            "--run-id",
            "effect-run",
            "--profile",
            "worker",
            "WRITE-TASK",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let seen = seen
        .lock()
        .unwrap()
        .clone()
        .expect("a second turn was asked");
    let finished = seen
        .lines()
        .filter(|line| line.contains("\"type\":\"tool_finished\""))
        .count();
    assert_eq!(
        finished, 1,
        "the journal when the next turn was asked:\n{seen}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn old_runs_are_pruned_and_a_run_past_its_size_bound_says_so() {
    let world = World::new();
    let server = FakeLlm::start().await;
    project(&world, &server);
    for task in ["FIRST", "SECOND", "THIRD"] {
        server.route(task, answer("done"));
        let run = warren(&world, &["run", "-q", "--run-id", task, task]);
        assert!(run.status.success(), "{}", text(&run.stderr));
        std::thread::sleep(Duration::from_millis(5));
    }
    // An unfinished run: its journal ends without run_finished.
    let unfinished = world.path(".warren/runs/UNFINISHED");
    std::fs::create_dir_all(&unfinished).unwrap();
    let first = std::fs::read_to_string(world.path(".warren/runs/FIRST/journal.jsonl")).unwrap();
    let head: Vec<&str> = first.lines().take(2).collect();
    std::fs::write(
        unfinished.join("journal.jsonl"),
        head.join("\n").replace("\"FIRST\"", "\"UNFINISHED\"") + "\n",
    )
    .unwrap();

    let vague = warren(&world, &["runs", "prune"]);
    assert_eq!(vague.status.code(), Some(1));
    assert!(
        text(&vague.stderr).contains("--keep N"),
        "{}",
        text(&vague.stderr)
    );
    let dry = json_of(&warren(
        &world,
        &["runs", "prune", "--keep", "1", "--dry-run", "--json"],
    ));
    assert_eq!(dry["pruned"].as_array().unwrap().len(), 2, "{dry}");
    assert_eq!(
        std::fs::read_dir(world.path(".warren/runs"))
            .unwrap()
            .count(),
        4
    );
    let pruned = warren(&world, &["runs", "prune", "--keep", "1"]);
    let said = text(&pruned.stdout);
    assert!(said.contains("deleted 2 run(s)"), "{said}");
    let left: Vec<String> = json_of(&warren(&world, &["runs", "--json"]))["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect();
    // The newest finished run, and the unfinished one (it could be resumed).
    assert!(
        left.contains(&"THIRD".to_string()) && left.contains(&"UNFINISHED".to_string()),
        "{left:?}"
    );
    assert_eq!(left.len(), 2, "{left:?}");
    let all = warren(
        &world,
        &["runs", "prune", "--older-than", "0", "--unfinished"],
    );
    assert!(
        text(&all.stdout).contains("deleted 2 run(s)"),
        "{}",
        text(&all.stdout)
    );

    // A journal past [journal] max_run_mib ends with journal_full; the run goes on.
    let config = world.path("warren.toml");
    let mut with_bound = std::fs::read_to_string(&config).unwrap();
    with_bound.push_str("\n[journal]\nmax_run_mib = 1\n");
    std::fs::write(&config, with_bound).unwrap();
    server.route("BIG", answer(&"x".repeat(1536 * 1024)));
    let big = warren(&world, &["run", "-q", "--run-id", "big", "BIG"]);
    assert!(big.status.success(), "{}", text(&big.stderr));
    assert!(
        text(&big.stderr).contains("max_run_mib"),
        "{}",
        text(&big.stderr)
    );
    let journal = std::fs::read_to_string(world.path(".warren/runs/big/journal.jsonl")).unwrap();
    assert!(journal.len() < 1024 * 1024, "{}", journal.len());
    assert!(journal.lines().last().unwrap().contains("\"journal_full\""));
    let resume = warren(&world, &["resume", "big"]);
    assert_eq!(resume.status.code(), Some(1));
    assert!(
        text(&resume.stderr).contains("cannot be resumed"),
        "{}",
        text(&resume.stderr)
    );
}

/// `n` with a comma between each group of three digits (`12,345`), as `warren runs`
/// prints figures.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
