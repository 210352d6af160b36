//! `warren resume` through the binary: a three-level tree (a root, three `mid`
//! children, two `leaf` grandchildren each, every leaf appending a line to a file in a
//! writable grant) is killed with SIGKILL at different moments and resumed. Every time
//! the resumed run ends with the complete answer, no model request is sent again for a
//! response the journal holds, and no line is appended twice.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{text, warren, World};

/// The leaves' markers: two per mid.
const LEAVES: [&str; 6] = [
    "LEAF-A1", "LEAF-A2", "LEAF-B1", "LEAF-B2", "LEAF-C1", "LEAF-C2",
];

pub(crate) fn project(world: &World, server: &FakeLlm, leaf_mode: &str) {
    std::fs::create_dir_all(world.path("out")).unwrap();
    world.config(&format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{}"
model = "fake-model"
api_key_env = "CARGO_PKG_NAME"
max_retries = 0
price = {{ input_per_mtok = 1.0, output_per_mtok = 1.0 }}

[defaults]
max_depth = 2
max_concurrent = 5

[profiles.main]
tools = []
[profiles.main.capabilities]
fs = [{{ host = "out", guest = "/out", mode = "rw" }}]

[profiles.mid]
description = "Splits its part in two"
tools = []
[profiles.mid.capabilities]
fs = [{{ host = "out", guest = "/out", mode = "rw" }}]

[profiles.leaf]
description = "Writes one line"
tools = ["read_file", "write_file"]
[profiles.leaf.capabilities]
fs = [{{ host = "out", guest = "/out", mode = "{leaf_mode}" }}]
"#,
        server.base_url
    ));
}

/// Which agent sent a request (the marker in its task) and which turn it asks for.
pub(crate) fn request_key(body: &Value) -> Option<(String, usize)> {
    let messages = body["messages"].as_array()?;
    let task = messages.iter().find(|m| m["role"] == "user")?["content"].as_str()?;
    let marker = task
        .split("-TASK")
        .next()?
        .rsplit([' ', '\n'])
        .next()?
        .to_string();
    let turn = messages.iter().filter(|m| m["role"] == "assistant").count() + 1;
    Some((marker, turn))
}

/// Every marker of the form `PREFIX-… OK` in `history`, sorted.
fn oks(history: &str, prefix: &str) -> String {
    let mut found: BTreeSet<&str> = BTreeSet::new();
    for (at, _) in history.match_indices(prefix) {
        let rest = &history[at..];
        let end = rest.find(" OK").unwrap_or(0);
        if end > 0 && end <= 8 {
            found.insert(&rest[..end]);
        }
    }
    found
        .iter()
        .map(|m| format!("{m} OK"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A streamed OpenAI reply, one piece every 60 ms: text in four pieces, or tool calls.
pub(crate) fn streamed(
    key: &(String, usize),
    text: Option<String>,
    calls: &[(&str, Value)],
) -> Reply {
    let (marker, turn) = key;
    let mut chunks: Vec<Value> = Vec::new();
    if let Some(text) = &text {
        let quarter = text.len().div_ceil(4).max(1);
        for piece in text.as_bytes().chunks(quarter) {
            let piece = String::from_utf8_lossy(piece);
            chunks.push(json!({"choices": [{"index": 0, "delta": {"content": piece}}]}));
        }
    }
    for (index, (name, arguments)) in calls.iter().enumerate() {
        chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": index, "id": format!("call-{marker}-{turn}-{index}"), "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}
        }]}}]}));
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    chunks.push(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    );
    let mut pieces: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    pieces.push("data: [DONE]\n\n".into());
    Reply::Stream {
        pieces,
        delay: Duration::from_millis(60),
    }
}

/// The model of every agent of the tree, answering from the request alone.
pub(crate) fn script(body: &Value) -> Option<Reply> {
    let key = request_key(body)?;
    let history = body["messages"].to_string();
    let (marker, turn) = (key.0.as_str(), key.1);
    let foreground = |profile: &str, tasks: Vec<String>| -> Vec<(&str, Value)> {
        tasks
            .into_iter()
            .map(|task| {
                (
                    "spawn_agent",
                    json!({"profile": profile, "task": task, "background": false}),
                )
            })
            .collect()
    };
    Some(match (marker, turn) {
        ("ROOT", 1) => streamed(
            &key,
            None,
            &foreground(
                "mid",
                ["A", "B", "C"].map(|m| format!("MID-{m}-TASK")).to_vec(),
            ),
        ),
        ("ROOT", _) => streamed(
            &key,
            Some(format!(
                "ROOT DONE: {}; {}",
                oks(&history, "MID-"),
                oks(&history, "LEAF-")
            )),
            &[],
        ),
        (mid, 1) if mid.starts_with("MID-") => {
            let part = &mid[4..];
            streamed(
                &key,
                None,
                &foreground(
                    "leaf",
                    vec![format!("LEAF-{part}1-TASK"), format!("LEAF-{part}2-TASK")],
                ),
            )
        }
        (mid, _) if mid.starts_with("MID-") => streamed(
            &key,
            Some(format!("{mid} OK with {}", oks(&history, "LEAF-"))),
            &[],
        ),
        (leaf, 1) => streamed(
            &key,
            None,
            &[(
                "write_file",
                json!({"path": "/out/log.txt", "content": format!("{leaf}\n"), "append": true}),
            )],
        ),
        (leaf, _) => streamed(&key, Some(format!("{leaf} OK")), &[]),
    })
}

pub(crate) fn start(world: &World, run_id: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "-q", "--run-id", run_id, "ROOT-TASK"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

pub(crate) fn kill(mut child: Child) {
    let killed = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait().unwrap();
}

pub(crate) fn journal_lines(world: &World, run_id: &str) -> Vec<Value> {
    std::fs::read_to_string(world.path(&format!(".warren/runs/{run_id}/journal.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// (marker, turn) of every model response the journal holds.
fn recorded_responses(lines: &[Value]) -> BTreeSet<(String, usize)> {
    let markers: BTreeMap<&str, String> = lines
        .iter()
        .filter(|l| l["type"] == "agent_queued")
        .map(|l| {
            let task = l["task"].as_str().unwrap();
            (
                l["agent"].as_str().unwrap(),
                task.split("-TASK").next().unwrap().to_string(),
            )
        })
        .collect();
    lines
        .iter()
        .filter(|l| l["type"] == "model_response")
        .map(|l| {
            (
                markers[l["agent"].as_str().unwrap()].clone(),
                l["turn"].as_u64().unwrap() as usize,
            )
        })
        .collect()
}

/// Runs the tree, kills it with SIGKILL once `moment` holds of its journal and the
/// server's requests, resumes it, and checks the resumed run: the complete answer,
/// no recorded response asked for again, no line appended twice.
async fn killed_and_resumed(moment: &str, when: impl Fn(&[Value], &FakeLlm) -> bool) {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(script));
    project(&world, &server, "rw");
    let run_id = format!("resume-{moment}");
    let child = start(&world, &run_id);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let lines = journal_lines(&world, &run_id);
        if when(&lines, &server) {
            break;
        }
        assert!(
            lines.last().is_none_or(|l| l["type"] != "run_finished"),
            "{moment}: the run finished before the moment came"
        );
        assert!(
            Instant::now() < deadline,
            "{moment}: the moment never came: {lines:#?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    kill(child);
    let before = journal_lines(&world, &run_id);
    assert!(
        before.iter().all(|l| l["type"] != "run_finished"),
        "{moment}: killed too late"
    );
    let recorded = recorded_responses(&before);
    let asked_before = server.requests().len();

    let resumed = warren(&world, &["resume", &run_id, "--json"]);
    assert!(
        resumed.status.success(),
        "{moment}: {}\n{}",
        text(&resumed.stdout),
        text(&resumed.stderr)
    );
    let report: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(report["run_id"], run_id.as_str());
    let answer = report["text"].as_str().unwrap();
    assert!(answer.starts_with("ROOT DONE"), "{moment}: {answer}");
    for part in ["MID-A OK", "MID-B OK", "MID-C OK"] {
        assert!(
            answer.contains(part),
            "{moment}: {part} missing from {answer}"
        );
    }
    for leaf in LEAVES {
        assert!(
            answer.contains(&format!("{leaf} OK")),
            "{moment}: {leaf} missing from {answer}"
        );
    }
    // Nothing the journal held was asked for again.
    let asked_again: Vec<(String, usize)> = server.requests()[asked_before..]
        .iter()
        .filter_map(|r| request_key(&r.body))
        .filter(|key| recorded.contains(key))
        .collect();
    assert!(
        asked_again.is_empty(),
        "{moment}: asked again for {asked_again:?}"
    );
    // No side effect repeated: each leaf's line at most once, and once when its
    // call's end was recorded.
    let log = std::fs::read_to_string(world.path("out/log.txt")).unwrap_or_default();
    for leaf in LEAVES {
        let written = log.lines().filter(|l| *l == leaf).count();
        assert!(
            written <= 1,
            "{moment}: {leaf} appended {written} times:\n{log}"
        );
    }
    let after = journal_lines(&world, &run_id);
    assert_eq!(after.last().unwrap()["type"], "run_finished");
    assert_eq!(
        after.iter().filter(|l| l["type"] == "run_resumed").count(),
        1
    );
    // Each agent is registered, and ends, once in the journal.
    for kind in ["agent_queued", "agent_finished"] {
        assert_eq!(
            after.iter().filter(|l| l["type"] == kind).count(),
            10,
            "{moment}: {kind}"
        );
    }
    let in_doubt = after
        .iter()
        .filter(|l| l["type"] == "tool_finished" && l["outcome"] == "in_doubt")
        .count();
    // A leaf's line is missing only when its call was in doubt (and not run again).
    assert!(log.lines().count() + in_doubt >= 6, "{moment}:\n{log}");
    // `warren show` reads the resumed run whole, and a second resume is refused.
    let shown = warren(&world, &["show", &run_id, "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["run"]["state"], "ok", "{moment}: {shown}");
    let again = warren(&world, &["resume", &run_id]);
    assert_eq!(again.status.code(), Some(1), "{moment}");
    assert!(
        text(&again.stderr).contains("already finished"),
        "{}",
        text(&again.stderr)
    );
}

fn count(lines: &[Value], kind: &str, task: &str) -> usize {
    lines
        .iter()
        .filter(|l| {
            l["type"] == kind
                && (task.is_empty() || l["task"].as_str().is_some_and(|t| t.contains(task)))
        })
        .count()
}

/// Agents named in `kind` records whose task holds `task`.
fn agents_with(lines: &[Value], kind: &str, task: &str) -> usize {
    let ids: BTreeSet<&str> = lines
        .iter()
        .filter(|l| l["type"] == "agent_queued" && l["task"].as_str().unwrap().contains(task))
        .map(|l| l["agent"].as_str().unwrap())
        .collect();
    lines
        .iter()
        .filter(|l| l["type"] == kind && ids.contains(l["agent"].as_str().unwrap_or_default()))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_during_a_model_stream_it_resumes_without_asking_again() {
    // A mid's second turn is being streamed (a piece every 60 ms).
    killed_and_resumed("stream", |_, server| {
        server
            .requests()
            .iter()
            .any(|r| request_key(&r.body).is_some_and(|(m, t)| m.starts_with("MID-") && t == 2))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_during_a_tool_call_it_resumes_without_repeating_it() {
    killed_and_resumed("tool", |lines, _| {
        lines
            .iter()
            .any(|l| l["type"] == "tool_started" && l["tool"] == "write_file")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_while_children_run_it_resumes_them() {
    // Some leaves have finished, others still run, no mid has answered.
    killed_and_resumed("children", |lines, _| {
        agents_with(lines, "agent_finished", "LEAF-") >= 2
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_while_a_grandchild_waits_in_the_queue_it_resumes_the_queue() {
    // Five slots: three mids and two leaves run, the other leaves wait.
    killed_and_resumed("queued", |lines, _| {
        count(lines, "agent_queued", "LEAF-") >= 4
            && agents_with(lines, "agent_started", "LEAF-") < count(lines, "agent_queued", "LEAF-")
            && agents_with(lines, "agent_spec", "LEAF-") >= 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_in_doubt_that_could_write_is_not_run_again() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(script));
    project(&world, &server, "rw");
    let run = warren(&world, &["run", "-q", "--run-id", "doubt", "ROOT-TASK"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    // A crash between a call's effect and the record of its end: the journal ends
    // just before the last append's `tool_finished` (a prefix of the journal, as a
    // crash leaves: every other append's end is recorded before it).
    let path = world.path(".warren/runs/doubt/journal.jsonl");
    let written = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = written.lines().collect();
    let cut = lines
        .iter()
        .rposition(|l| l.contains("\"tool_finished\"") && l.contains("appended"))
        .unwrap();
    let doubted: Value = serde_json::from_str(lines[cut]).unwrap();
    std::fs::write(&path, lines[..cut].join("\n") + "\n").unwrap();

    let resumed = warren(&world, &["resume", "doubt", "--json"]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let report: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert!(
        report["text"].as_str().unwrap().contains("LEAF-C2 OK"),
        "{report}"
    );
    let log = std::fs::read_to_string(world.path("out/log.txt")).unwrap();
    let mut sorted: Vec<&str> = log.lines().collect();
    sorted.sort_unstable();
    assert_eq!(sorted, LEAVES, "no line twice:\n{log}");
    let after = journal_lines(&world, "doubt");
    let in_doubt: Vec<&Value> = after
        .iter()
        .filter(|l| l["type"] == "tool_finished" && l["outcome"] == "in_doubt")
        .collect();
    assert_eq!(in_doubt.len(), 1, "{after:#?}");
    assert_eq!(in_doubt[0]["call_id"], doubted["call_id"]);
    // The agent was told, and its transcript shows it.
    let agent = doubted["agent"].as_str().unwrap();
    let shown = warren(&world, &["show", "doubt", "--agent", agent]);
    let shown = text(&shown.stdout);
    assert!(
        shown.contains("in_doubt") && shown.contains("may or may not have taken effect"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_is_resumed_by_one_process_and_only_with_its_setup() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(script));
    project(&world, &server, "rw");
    let child = start(&world, "held");
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&journal_lines(&world, "held"), "agent_queued", "MID-") < 3 {
        assert!(Instant::now() < deadline, "the run did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The running process holds its run.
    let busy = warren(&world, &["resume", "held"]);
    assert_eq!(busy.status.code(), Some(1));
    assert!(
        text(&busy.stderr).contains("held by another process"),
        "{}",
        text(&busy.stderr)
    );
    kill(child);
    // A changed configuration is named, and refused without --force.
    let config = world.path("warren.toml");
    let original = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        original.replace("max_concurrent = 5", "max_concurrent = 6"),
    )
    .unwrap();
    let changed = warren(&world, &["resume", "held"]);
    assert_eq!(changed.status.code(), Some(1));
    let error = text(&changed.stderr);
    assert!(
        error.contains("the configuration file changed") && error.contains("--force"),
        "{error}"
    );
    let forced = warren(&world, &["resume", "held", "--force", "--json"]);
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    let lines = journal_lines(&world, "held");
    let resumed: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "run_resumed")
        .collect();
    assert_eq!(resumed.len(), 1);
    assert_eq!(
        resumed[0]["forced_over"],
        json!(["the configuration file changed"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_while_children_run_on_a_worker_it_re_attaches_to_them() {
    use crate::queue::{Redis, Worker};
    let redis = Redis::start();
    let world = World::new();
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(script));
    project(&world, &server, "rw");
    let config = world.path("warren.toml");
    let mut text_of = std::fs::read_to_string(&config).unwrap();
    text_of.push_str(&format!("\n[queue]\nredis = \"{}\"\n", redis.url()));
    std::fs::write(&config, text_of).unwrap();
    let _worker = Worker::start(world.dir.path(), &redis, "w1", 10);
    let run_id = "resume-worker";
    let child = start(&world, run_id);
    // Some leaves have finished on the worker; the mids are still waiting for theirs.
    let deadline = Instant::now() + Duration::from_secs(60);
    while agents_with(&journal_lines(&world, run_id), "agent_finished", "LEAF-") < 2 {
        assert!(
            Instant::now() < deadline,
            "{:#?}",
            journal_lines(&world, run_id)
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    kill(child);
    let before = journal_lines(&world, run_id);
    let recorded = recorded_responses(&before);
    let asked_before = server.requests().len();
    // The worker goes on meanwhile.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let resumed = warren(&world, &["resume", run_id, "--json"]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let report: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    let answer = report["text"].as_str().unwrap();
    for leaf in LEAVES {
        assert!(
            answer.contains(&format!("{leaf} OK")),
            "{leaf} missing from {answer}"
        );
    }
    let asked_again: Vec<(String, usize)> = server.requests()[asked_before..]
        .iter()
        .filter_map(|r| request_key(&r.body))
        .filter(|key| recorded.contains(key))
        .collect();
    assert!(asked_again.is_empty(), "asked again for {asked_again:?}");
    // No child was started twice: each mid's and leaf's turns were asked for once,
    // and the queue holds one job per child.
    let mut asked: BTreeMap<(String, usize), usize> = BTreeMap::new();
    for key in server
        .requests()
        .iter()
        .filter_map(|r| request_key(&r.body))
    {
        *asked.entry(key).or_default() += 1;
    }
    for (key, times) in &asked {
        if key.0 != "ROOT" {
            assert_eq!(*times, 1, "{key:?} asked {times} times: {asked:?}");
        }
    }
    assert_eq!(
        redis.jobs().len(),
        9,
        "{:?}",
        redis.jobs().iter().map(|j| &j.0).collect::<Vec<_>>()
    );
    let log = std::fs::read_to_string(world.path("out/log.txt")).unwrap();
    let mut sorted: Vec<&str> = log.lines().collect();
    sorted.sort_unstable();
    assert_eq!(sorted, LEAVES, "each line once:\n{log}");
}
