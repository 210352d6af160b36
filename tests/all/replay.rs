//! `warren replay` through the binary, with the network closed (`unshare -rn`): the
//! three-level tree of the resume tests, recorded against a local scripted server,
//! replays with the same answers and no request sent; a changed prompt stops it at
//! that agent and turn with a diff; a changed grant at that tool's result; a
//! recording of a killed run replays up to where it stops; the demo's recorded run,
//! kept as a fixture, replays in the suite; no key or configured secret reaches a
//! journal; bad journals are refused with what is wrong.

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fake_llm::{FakeLlm, Reply};
use crate::guests::root;
use crate::resume::{journal_lines, kill, project, script, start};
use crate::support::{text, warren, World};

/// The version journals record (`"v"`; docs/journal.md).
const JOURNAL_VERSION: u32 = 2;

/// `warren ARGS` in `world` with no network at all (a new network namespace).
fn offline(world: &World, args: &[&str]) -> Output {
    let output = Command::new("unshare")
        .args(["-rn", env!("CARGO_BIN_EXE_warren")])
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .output()
        .expect("`unshare` (util-linux) runs: the replay tests close the network with it");
    assert!(
        !text(&output.stderr).contains("unshare failed"),
        "unshare -rn cannot make a network namespace here (user namespaces disabled?): {}",
        text(&output.stderr)
    );
    output
}

/// Records the tree as run `id` against `server` and returns the run's answer.
async fn record(world: &World, server: &FakeLlm, id: &str) -> String {
    let out = warren(world, &["run", "-q", "--run-id", id, "--json", "ROOT-TASK"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = report["text"].as_str().unwrap().to_string();
    assert!(answer.starts_with("ROOT DONE"), "{answer}");
    assert!(!server.requests().is_empty());
    answer
}

async fn recorded_world(id: &str) -> (World, FakeLlm) {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(script));
    project(&world, &server, "rw");
    record(&world, &server, id).await;
    (world, server)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_tree_replays_offline_with_the_same_answers_and_no_request() {
    let (world, server) = recorded_world("rec").await;
    let asked = server.requests().len();
    for tools in ["rerun", "recorded"] {
        let out = offline(&world, &["replay", "rec", "--tools", tools]);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "--tools {tools}:\n{stdout}\n{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("replay of rec: the same (10 agent(s)"),
            "{stdout}"
        );
        // The tree, three levels deep.
        assert!(stdout.contains("\n    leaf"), "{stdout}");
    }
    assert_eq!(server.requests().len(), asked, "a replay sent a request");
    // Nothing was journaled by the replays.
    let runs = std::fs::read_dir(world.path(".warren/runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_prompt_stops_the_replay_at_that_agent_and_turn_with_a_diff() {
    let (world, _server) = recorded_world("rec").await;
    let config = world.path("warren.toml");
    let changed = std::fs::read_to_string(&config).unwrap().replace(
        "description = \"Writes one line\"",
        "description = \"Writes one line\"\nsystem_prompt = \"Write exactly one line, NEW RULE.\"",
    );
    std::fs::write(&config, changed).unwrap();
    let out = offline(&world, &["replay", "rec"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    // The first leaf to ask: its path has the root, a mid and a leaf.
    let line = stdout.lines().next().unwrap();
    assert!(
        line.starts_with("replay of rec: differs at main[")
            && line.contains("]/mid[")
            && line.contains("]/leaf[")
            && line.ends_with("turn 1: the request to the model differs from the recorded one"),
        "{stdout}"
    );
    assert!(stdout.contains("system prompt:"), "{stdout}");
    assert!(
        stdout.contains("+Write exactly one line, NEW RULE."),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_grant_stops_the_replay_at_that_tools_result() {
    let (world, _server) = recorded_world("rec").await;
    let config = world.path("warren.toml");
    // The leaves' writable grant becomes read-only: their write is now denied.
    let text_now = std::fs::read_to_string(&config).unwrap();
    let at = text_now.rfind("mode = \"rw\"").unwrap();
    let mut changed = text_now.clone();
    changed.replace_range(at..at + "mode = \"rw\"".len(), "mode = \"ro\"");
    std::fs::write(&config, changed).unwrap();
    let out = offline(&world, &["replay", "rec"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("]/leaf[") && stdout.contains("turn 1: the result of `write_file`"),
        "{stdout}"
    );
    assert!(
        stdout.contains("-ok:") && stdout.contains("+error:"),
        "{stdout}"
    );
    assert!(stdout.contains("read-only"), "{stdout}");
    // Served from the journal, the tool results are the recorded ones: the same.
    let out = offline(&world, &["replay", "rec", "--tools", "recorded"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_runs_recording_replays_up_to_where_it_stops() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(script));
    project(&world, &server, "rw");
    let child = start(&world, "cut");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Killed once some leaf has finished and the run has not.
    while !journal_lines(&world, "cut").iter().any(|l| {
        l["type"] == "agent_finished" && l["text"].as_str().is_some_and(|t| t.starts_with("LEAF"))
    }) {
        assert!(Instant::now() < deadline, "no leaf finished");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    kill(child);
    assert!(journal_lines(&world, "cut")
        .iter()
        .all(|l| l["type"] != "run_finished"));
    let out = offline(&world, &["replay", "cut"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("replay of cut: the same as far as the recording goes")
            && stdout.contains("the recording ends"),
        "{stdout}"
    );
}

#[test]
fn the_demos_recorded_run_replays_as_a_fixture() {
    let world = World::new();
    let config = crate::support::demo_config();
    let fixtures = root().join("tests/fixtures/runs");
    let out = offline(
        &world,
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            "--all",
            fixtures.to_str().unwrap(),
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("same     demo (5 agents)"), "{stdout}");
    assert!(
        stdout.ends_with("1 replayed: 1 the same, 0 differ or failed\n"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_api_key_or_configured_secret_reaches_a_journal() {
    const KEY: &str = "sk-replay-SECRET-4c1d";
    const HEADER: &str = "hdr-replay-SECRET-9f2e";
    let world = World::new();
    let server = FakeLlm::start().await;
    // Every request is refused with a body quoting the key, as some gateways do.
    server.respond_with(Arc::new(|_body: &Value| {
        Some(Reply::status(
            401,
            &format!(
                r#"{{"error": {{"message": "Incorrect API key provided: {KEY} ({HEADER})"}}}}"#
            ),
        ))
    }));
    world.config(&format!(
        r#"
[models.fake]
provider = "openai"
base_url = "{}"
model = "fake-model"
api_key_env = "REPLAY_TEST_KEY"
headers = {{ "X-Gateway-Token" = "{HEADER}" }}
max_retries = 0

[profiles.main]
tools = []
"#,
        server.base_url
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "-q", "--run-id", "leak", "hello"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("REPLAY_TEST_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // The key was sent, and refused.
    let sent = &server.requests()[0];
    assert!(format!("{:?}", sent.headers).contains(KEY));
    let journal = std::fs::read_to_string(world.path(".warren/runs/leak/journal.jsonl")).unwrap();
    assert!(journal.contains("\"agent_finished\""), "{journal}");
    for secret in [KEY, HEADER] {
        assert!(
            !journal.contains(secret),
            "{secret} in the journal:\n{journal}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_journals_are_refused_saying_what_is_wrong() {
    let (world, _server) = recorded_world("rec").await;
    let journal = world.path(".warren/runs/rec/journal.jsonl");
    let lines = std::fs::read_to_string(&journal).unwrap();

    let newer = world.path("newer.jsonl");
    std::fs::write(
        &newer,
        lines.replacen(&format!("\"v\":{JOURNAL_VERSION}"), "\"v\":99", 1),
    )
    .unwrap();
    let out = offline(&world, &["replay", newer.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("journal format 99 is newer than this warren reads"),
        "{}",
        text(&out.stderr)
    );

    // Cut in the middle of a line: what is whole replays, up to where it stops.
    let cut = world.path("cut.jsonl");
    std::fs::write(&cut, &lines[..lines.len() * 2 / 3]).unwrap();
    let out = offline(&world, &["replay", cut.to_str().unwrap()]);
    assert!(
        out.status.success() && text(&out.stdout).contains("as far as the recording goes"),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    let out = offline(&world, &["replay", "nosuchrun"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no run `nosuchrun`"),
        "{}",
        text(&out.stderr)
    );

    let out = offline(&world, &["replay"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// The tree's model, where a leaf told to be brief answers `LEAF-… BRIEF` (so its
/// parent, which reports the leaves that said OK, answers differently too).
fn brief_script(body: &Value) -> Option<Reply> {
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let key = crate::resume::request_key(body)?;
    if system.contains("Be brief.") && key.1 == 2 {
        return Some(crate::resume::streamed(
            &key,
            Some(format!("{} BRIEF", key.0)),
            &[],
        ));
    }
    script(body)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_from_a_grandchild_runs_only_its_subtree_and_what_follows_live() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(brief_script));
    project(&world, &server, "rw");
    record(&world, &server, "rec").await;
    let lines = journal_lines(&world, "rec");
    let leaf = lines
        .iter()
        .find(|l| {
            l["type"] == "agent_queued" && l["task"].as_str().unwrap().contains("LEAF-A1-TASK")
        })
        .unwrap()["agent"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(world.path("brief.txt"), "Be brief.").unwrap();

    // A fork from an agent the run does not have lists those it has.
    let out = warren(
        &world,
        &[
            "replay",
            "rec",
            "--from",
            "nosuch",
            "--prompt-file",
            "brief.txt",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("run rec has no agent `nosuch`; its agents are:"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("  {leaf} (leaf): ")), "{stderr}");

    let before = server.requests().len();
    let out = warren(
        &world,
        &[
            "replay",
            "rec",
            "--from",
            &leaf,
            "--prompt-file",
            "brief.txt",
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    // The server was asked only for the forked leaf's turns and the turns after its
    // new result: its parent's and the root's last turns.
    let mut asked: Vec<(String, usize)> = server.requests()[before..]
        .iter()
        .filter_map(|r| crate::resume::request_key(&r.body))
        .collect();
    asked.sort();
    let expected: Vec<(String, usize)> =
        [("LEAF-A1", 1), ("LEAF-A1", 2), ("MID-A", 2), ("ROOT", 2)]
            .iter()
            .map(|(m, t)| (m.to_string(), *t))
            .collect();
    assert_eq!(asked, expected, "{stdout}");
    let answer = stdout.lines().last().unwrap();
    assert!(
        answer.starts_with("ROOT DONE") && !answer.contains("LEAF-A1 OK"),
        "{answer}"
    );

    // The fork is a run of its own, linked to the recording.
    let fork = stdout
        .split_whitespace()
        .nth(1)
        .expect("`fork ID of run …`")
        .to_string();
    let runs = text(&warren(&world, &["runs"]).stdout);
    assert!(
        runs.contains(&format!("[fork of rec from {leaf}]")),
        "{runs}"
    );

    // `warren diff` shows what changed: the leaf's answer and the answers above it.
    let out = warren(&world, &["diff", "rec", &fork]);
    let diff = text(&out.stdout);
    assert!(out.status.success(), "{diff}\n{}", text(&out.stderr));
    assert!(
        diff.starts_with(&format!("- rec\n+ {fork} (fork of rec from {leaf})\n")),
        "{diff}"
    );
    let changed: Vec<&str> = diff.lines().filter(|l| l.starts_with("~ ")).collect();
    assert_eq!(
        changed.len(),
        3,
        "the root, MID-A and LEAF-A1 changed:\n{diff}"
    );
    assert!(diff.contains("\n-LEAF-A1 OK\n+LEAF-A1 BRIEF\n"), "{diff}");
    // No agent only in one run (after the two header lines).
    assert!(
        !diff
            .lines()
            .skip(2)
            .any(|l| l.starts_with("+ ") || l.starts_with("- ")),
        "{diff}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_plugin_stops_the_replay_at_its_tools_result() {
    let world = World::new();
    let server = FakeLlm::start().await;
    // Turn 1 stamps a text; turn 2 answers.
    server.respond_with(Arc::new(|body: &Value| {
        let turn = body["messages"]
            .as_array()?
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count()
            + 1;
        Some(if turn == 1 {
            Reply::tool_calls(&[("stamp", serde_json::json!({"text": "hi"}))], (10, 5))
        } else {
            Reply::answer("stamped", (10, 5))
        })
    }));
    std::fs::create_dir_all(world.path("plugins")).unwrap();
    let plugin = world.path("plugins/stamp.wasm");
    std::fs::copy(&crate::guests::guests().stamp_one, &plugin).unwrap();
    let config = format!(
        r#"
[plugins]
files = ["plugins/stamp.wasm"]
builtins = false
cache_dir = {:?}

[models.fake]
provider = "openai"
base_url = "{}"
model = "fake-model"
stream = false
max_retries = 0

[profiles.main]
tools = ["stamp"]
"#,
        crate::support::cache_dir(),
        server.base_url
    );
    std::fs::write(world.path("warren.toml"), config).unwrap();
    let out = warren(&world, &["run", "-q", "--run-id", "stamped", "stamp hi"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(offline(&world, &["replay", "stamped"]).status.success());

    std::fs::copy(&crate::guests::guests().stamp_two, &plugin).unwrap();
    let out = offline(&world, &["replay", "stamped"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("turn 1: the result of `stamp`")
            && stdout.contains("-stamped by version one")
            && stdout.contains("+stamped by version two"),
        "{stdout}"
    );
}

/// A root that spawns four children in the background under `max_concurrent = 2` (two
/// are told they are queued), calls `list_agents` while they run and then awaits them,
/// replays as "the same" twenty times in a row: what the recorded run observed of its
/// children (their states in `list_agents`, each spawn's place in the queue) is served
/// from the journal, not observed again under the replay's timing.
#[tokio::test(flavor = "multi_thread")]
async fn observed_states_and_queue_places_replay_the_same_every_time() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.respond_with(Arc::new(|body: &Value| {
        let messages = body["messages"].as_array()?;
        let task = messages.iter().find(|m| m["role"] == "user")?["content"].as_str()?;
        if let Some(n) = task.strip_prefix("OBS-CHILD-") {
            let reply = Reply::answer(&format!("child {n} done"), (10, 5));
            return Some(Reply::Delayed(Duration::from_millis(300), Box::new(reply)));
        }
        let turns = messages.iter().filter(|m| m["role"] == "assistant").count();
        let calls = |list: Vec<(&str, Value)>| Reply::tool_calls(&list, (10, 5));
        Some(match turns {
            0 => calls(
                (1..=4)
                    .map(|n| ("spawn_agent", serde_json::json!({"profile": "worker", "task": format!("OBS-CHILD-{n}")})))
                    .collect(),
            ),
            1 => calls(vec![("list_agents", serde_json::json!({}))]),
            2 => calls(vec![("await_agents", serde_json::json!({"job_ids": "*"}))]),
            _ => Reply::answer("ROOT DONE: observed", (10, 5)),
        })
    }));
    world.config(&format!(
        "[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n\
         [defaults]\nmax_concurrent = 2\n[profiles.main]\ntools = []\n[profiles.worker]\ndescription = \"Answers\"\ntools = []\n",
        server.base_url
    ));
    let out = warren(
        &world,
        &["run", "-q", "--run-id", "obs", "--json", "ROOT-TASK"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let journal = journal_lines(&world, "obs");
    let answers: Vec<String> = journal
        .iter()
        .filter(|l| l["type"] == "tool_finished")
        .filter_map(|l| l["content"].as_str().map(str::to_string))
        .collect();
    assert!(
        answers.iter().any(|a| a.starts_with("Queued job ")),
        "no spawn was queued: {answers:?}"
    );
    for attempt in 1..=20 {
        let out = offline(&world, &["replay", "obs"]);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("replay of obs: the same (5 agent(s)"),
            "replay {attempt} of 20:\n{stdout}\n{}",
            text(&out.stderr)
        );
    }
}
