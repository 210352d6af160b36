//! Sub-agents end to end through the library, against the fake LLM server over HTTP:
//! isolation, parallelism, the concurrency cap, await/cancel/list, depth, budget,
//! limits, failures, push notifications and the root never abandoning its children.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use warren::{AgentState, Config, Host, RunReport};

use crate::fake_llm::{FakeLlm, Recorded, Reply};
use crate::support::World;

/// A text answer with some usage.
fn answer(text: &str) -> Reply {
    Reply::answer(text, (100, 50))
}

/// A turn of tool calls.
fn calls(list: &[(&str, Value)]) -> Reply {
    Reply::tool_calls(list, (100, 50))
}

fn delayed(ms: u64, reply: Reply) -> Reply {
    Reply::Delayed(Duration::from_millis(ms), Box::new(reply))
}

fn spawn(profile: &str, task: &str) -> (&'static str, Value) {
    ("spawn_agent", json!({"profile": profile, "task": task}))
}

/// Config text: the fake model, `[defaults]`, a root `main` and a `worker`, plus `extra`.
fn config(server: &FakeLlm, defaults: &str, extra: &str) -> String {
    format!(
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
{defaults}

[profiles.main]
description = "Coordinator"
system_prompt = "ROOT-PROMPT: coordinate."
tools = ["list_dir"]
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]

[profiles.worker]
description = "Does one thing"
system_prompt = "You are a worker."
tools = ["read_file", "list_dir", "write_file"]
[profiles.worker.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "rw" }}]
{extra}
"#,
        server.base_url
    )
}

async fn run(world: &World, text: &str, task: &str) -> (RunReport, Duration) {
    let config = Config::load(&world.config(text)).unwrap();
    let host = Host::load(config).await.unwrap();
    let started = Instant::now();
    let report = host
        .start_with_run_id("main", task, RUN_ID)
        .unwrap()
        .wait()
        .await;
    (report, started.elapsed())
}

/// Requests whose body mentions `marker`.
fn requests_with(server: &FakeLlm, marker: &str) -> Vec<Recorded> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.body.to_string().contains(marker))
        .collect()
}

/// The tool-result contents of a recorded request, in order.
fn tool_results(request: &Recorded) -> Vec<String> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

/// The run id [`run`] gives its runs, so their job ids are known beforehand.
const RUN_ID: &str = "agents-test";

/// The ids a run of id [`RUN_ID`] hands out, in order.
fn job_ids(n: usize) -> Vec<String> {
    crate::support::job_ids(RUN_ID, n)
}

#[tokio::test]
async fn children_run_in_parallel_in_isolation_and_are_never_abandoned() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[
            spawn("worker", "TASK-A"),
            spawn("worker", "TASK-B"),
            spawn("worker", "TASK-C"),
        ]),
    );
    for name in ["A", "B", "C"] {
        server.route(
            &format!("TASK-{name}"),
            delayed(300, answer(&format!("result {name}"))),
        );
    }
    // The root tries to finish while its children still run.
    server.route("Started job", answer("done early"));
    server.route("still running", answer("final: A, B and C reported"));
    let (report, elapsed) = run(
        &world,
        &config(&server, "max_concurrent = 3", ""),
        "ROOT-TASK",
    )
    .await;

    assert_eq!(report.root.state, AgentState::Ok, "{:?}", report.root);
    assert_eq!(report.root.text, "final: A, B and C reported");
    assert_eq!(report.agents.len(), 4);
    assert!(
        elapsed < Duration::from_millis(800),
        "three 300 ms children took {elapsed:?}"
    );
    // Isolation: a child's requests carry none of the parent's history or prompt.
    for name in ["A", "B", "C"] {
        let child = requests_with(&server, &format!("TASK-{name}"));
        let child = child
            .iter()
            .find(|r| r.body["messages"][0]["content"] == "You are a worker.")
            .unwrap();
        let text = child.body.to_string();
        assert!(
            !text.contains("ROOT-TASK") && !text.contains("ROOT-PROMPT"),
            "{text}"
        );
        assert_eq!(
            child.body["messages"].as_array().unwrap().len(),
            2,
            "system + task only"
        );
        // max_depth = 1: children get no spawn tools.
        assert!(!text.contains("spawn_agent"), "{text}");
        // Its profile's plugin tools, each with its own schema (shared across agents,
        // parsed once when the plugin loaded).
        let tools: BTreeMap<&str, &Value> = child.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["function"]["name"].as_str().unwrap(),
                    &t["function"]["parameters"],
                )
            })
            .collect();
        assert_eq!(
            tools.keys().copied().collect::<Vec<_>>(),
            ["list_dir", "read_file", "write_file"]
        );
        assert_eq!(tools["read_file"]["required"], json!(["path"]), "{text}");
        assert!(
            tools["write_file"]["properties"].get("content").is_some()
                && tools["list_dir"]["properties"].get("content").is_none(),
            "{text}"
        );
    }
    let last_root = requests_with(&server, "still running").pop().unwrap();
    let text = last_root.body.to_string();
    for name in ["A", "B", "C"] {
        assert!(text.contains(&format!("result {name}")), "{text}");
    }
    assert!(
        text.contains(": OK] worker · 1 turns · 150 tokens"),
        "{text}"
    );
    // The parent's system prompt lists the profiles it may spawn.
    let first_root = requests_with(&server, "ROOT-TASK").remove(0);
    let system = first_root.body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("<available_spawn_profiles>")
            && system.contains("- worker: Does one thing"),
        "{system}"
    );
    let profiles = &first_root.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "spawn_agent")
        .unwrap()["function"]["parameters"]["properties"]["profile"]["enum"];
    assert_eq!(profiles, &json!(["main", "worker"]));
}

#[tokio::test]
async fn a_finished_background_child_is_pushed_before_the_next_turn() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route("ROOT-TASK", calls(&[spawn("worker", "QUICK-TASK")]));
    server.route("QUICK-TASK", answer("QUICK-RESULT"));
    server.route(
        "Started job",
        delayed(400, calls(&[("list_dir", json!({"path": "/docs"}))])),
    );
    server.route("agent_notifications", answer("done"));
    let (report, _) = run(&world, &config(&server, "", ""), "ROOT-TASK").await;
    assert_eq!(report.root.state, AgentState::Ok, "{:?}", report.root);
    let turn3 = requests_with(&server, "agent_notifications")
        .into_iter()
        .find(|r| r.body.to_string().contains("ROOT-TASK"))
        .unwrap();
    let text = turn3.body.to_string();
    assert!(
        text.contains("<agent_notifications>") && text.contains("QUICK-RESULT"),
        "{text}"
    );
    assert_eq!(text.matches("QUICK-RESULT").count(), 1, "notified once");
}

#[tokio::test]
async fn the_concurrency_cap_queues_extra_spawns() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let spawns: Vec<(&str, Value)> = ["Q1", "Q2", "Q3", "Q4"]
        .iter()
        .map(|t| spawn("worker", t))
        .collect();
    server.route("ROOT-TASK", calls(&spawns));
    for task in ["Q1", "Q2", "Q3", "Q4"] {
        server.route(task, delayed(300, answer(&format!("{task} done"))));
    }
    server.route(
        "in the background",
        calls(&[("await_agents", json!({"job_ids": "*"}))]),
    );
    server.route("Q4 done", answer("all done"));
    let (report, elapsed) = run(
        &world,
        &config(&server, "max_concurrent = 2", ""),
        "ROOT-TASK",
    )
    .await;
    assert_eq!(report.root.text, "all done");
    assert!(
        elapsed >= Duration::from_millis(600),
        "4 × 300 ms at 2 at a time took {elapsed:?}"
    );
    let turn2 = requests_with(&server, "Started job")
        .into_iter()
        .find(|r| r.body.to_string().contains("ROOT-TASK"))
        .unwrap();
    let results = tool_results(&turn2);
    assert!(
        !results[0].contains("queued") && !results[1].contains("queued"),
        "{results:?}"
    );
    assert!(
        results[2].contains("It is queued") && results[3].contains("max_concurrent = 2"),
        "{results:?}"
    );
}

/// Three leads, each spawning two workers, in a run of two slots: a lead waiting for
/// its workers gives its slot back (else the two leads holding both slots wait forever
/// for workers that can never start), and takes it again ahead of the queued spawns.
#[tokio::test]
async fn a_parent_waiting_for_its_children_frees_its_slot() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let leads: Vec<(&str, Value)> = ["LEAD-1", "LEAD-2", "LEAD-3"]
        .iter()
        .map(|t| spawn("lead", t))
        .collect();
    server.route("ROOT-TASK", calls(&leads));
    let await_all = || calls(&[("await_agents", json!({"job_ids": "*"}))]);
    for lead in ["LEAD-1", "LEAD-2", "LEAD-3"] {
        server.route(
            lead,
            calls(&[
                spawn("worker", &format!("WORK-{}A", &lead[5..])),
                spawn("worker", &format!("WORK-{}B", &lead[5..])),
            ]),
        );
    }
    server.respond_with(std::sync::Arc::new(move |body| {
        let text = body.to_string();
        let newest = body["messages"].as_array()?.last()?.to_string();
        if newest.contains("Started job") || newest.contains("It is queued") {
            return Some(await_all());
        }
        if newest.contains("WORK-") {
            return Some(delayed(50, answer("worker done")));
        }
        if text.contains("You lead") && newest.contains("OK]") {
            return Some(answer("lead done"));
        }
        if newest.contains("OK]") {
            return Some(answer("all done"));
        }
        None
    }));
    let extra = r#"
[profiles.lead]
description = "Leads two workers"
system_prompt = "You lead."
tools = []
"#;
    let text = config(&server, "max_concurrent = 2\nmax_depth = 2", extra);
    let (report, _) =
        tokio::time::timeout(Duration::from_secs(60), run(&world, &text, "ROOT-TASK"))
            .await
            .expect("the tree stalled: every slot held by a lead waiting for its workers");
    assert_eq!(report.root.text, "all done", "{:?}", report.root);
    assert_eq!(report.agents.len(), 1 + 3 + 6);
    let ok = report
        .agents
        .iter()
        .filter(|a| {
            a.outcome
                .as_ref()
                .is_some_and(|o| o.state == AgentState::Ok)
        })
        .count();
    assert_eq!(ok, 10);
}

#[tokio::test]
async fn await_by_star_list_and_comma_string_with_any_and_timeouts() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[
            ("await_agents", json!({"job_ids": "*"})),
            ("list_agents", json!({})),
        ]),
    );
    server.route(
        "No jobs found",
        calls(&[spawn("worker", "FAST-TASK"), spawn("worker", "SLOW-TASK")]),
    );
    server.route("FAST-TASK", answer("FAST-RESULT"));
    server.route("SLOW-TASK", delayed(1000, answer("SLOW-RESULT")));
    server.route(
        "Started job",
        calls(&[("await_agents", json!({"job_ids": "*", "until": "any"}))]),
    );
    server.route(
        "FAST-RESULT",
        calls(&[
            ("await_agents", json!({"job_ids": "zz9999, yy8888"})),
            (
                "await_agents",
                json!({"job_ids": ["xx7777"], "timeout_s": 0.1}),
            ),
            ("await_agents", json!({"job_ids": "*", "timeout_s": 0.2})),
        ]),
    );
    server.route("RUNNING", answer("done"));
    server.route("still running", answer("final"));
    let (report, _) = run(&world, &config(&server, "", ""), "ROOT-TASK").await;
    assert_eq!(report.root.text, "final");
    let root: Vec<Recorded> = requests_with(&server, "ROOT-TASK");
    let results = tool_results(root.last().unwrap());
    assert_eq!(results[0], "No jobs found.");
    assert_eq!(results[1], "No jobs found.");
    assert!(
        results[4].contains(": OK] worker") && results[4].contains("FAST-RESULT"),
        "{}",
        results[4]
    );
    assert!(
        results[4].contains(": RUNNING] worker"),
        "until any returns before the slow one: {}",
        results[4]
    );
    assert_eq!(results[5], "[zz9999: NOT FOUND]\n\n[yy8888: NOT FOUND]");
    assert_eq!(results[6], "[xx7777: NOT FOUND]");
    assert!(results[7].contains(": RUNNING] worker"), "{}", results[7]);
    assert!(
        results.last().unwrap().contains("SLOW-RESULT")
            || root
                .last()
                .unwrap()
                .body
                .to_string()
                .contains("SLOW-RESULT")
    );
}

#[tokio::test]
async fn cancel_agent_cancels_its_descendants_and_aborts_their_requests() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let ids = job_ids(3); // root, mid, leaf
    server.route("ROOT-TASK", calls(&[spawn("mid", "MID-TASK")]));
    server.route("MID-TASK", calls(&[spawn("worker", "LEAF-TASK")]));
    server.route("LEAF-TASK", Reply::Hang);
    server.route(
        "(worker) in the background",
        calls(&[("await_agents", json!({"job_ids": "*"}))]),
    );
    server.route(
        "(mid) in the background",
        delayed(300, calls(&[("cancel_agent", json!({"job_id": ids[1]}))])),
    );
    server.route(
        "Cancelled job",
        calls(&[
            ("await_agents", json!({"job_ids": "*"})),
            ("list_agents", json!({})),
        ]),
    );
    server.route("cancelled", answer("gave up on mid"));
    let extra = "[profiles.mid]\ntools = []\n[profiles.mid.capabilities]\nfs = [{ host = \"docs\", guest = \"/docs\" }]\n";
    let (report, elapsed) = run(
        &world,
        &config(&server, "max_depth = 2", extra),
        "ROOT-TASK",
    )
    .await;
    assert_eq!(report.root.text, "gave up on mid", "{:?}", report.root);
    assert!(elapsed < Duration::from_secs(10));
    let state = |id: &str| {
        let agent = report
            .agents
            .iter()
            .find(|j| j.id.to_string() == id)
            .unwrap();
        match &agent.outcome {
            Some(o) => o.state,
            None => panic!("{agent:?}"),
        }
    };
    assert_eq!(state(&ids[1]), AgentState::Cancelled);
    assert_eq!(state(&ids[2]), AgentState::Cancelled);
    assert!(
        server.hang_dropped.load(Ordering::SeqCst),
        "the leaf's in-flight request was aborted"
    );
    // max_depth = 2: the middle agent had spawn tools.
    assert!(requests_with(&server, "MID-TASK")[0]
        .body
        .to_string()
        .contains("spawn_agent"));
    let root = requests_with(&server, "ROOT-TASK");
    let results = tool_results(root.last().unwrap());
    assert!(
        results
            .iter()
            .any(|r| r.contains(&format!("[{}: CANCELLED] mid", ids[1]))),
        "{results:?}"
    );
}

#[tokio::test]
async fn limits_failures_and_spawn_argument_errors() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "LOOP-TASK", "max_turns": 2}),
            ),
            spawn("worker", "FAIL-TASK"),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "SLOW-TASK", "timeout_s": 1}),
            ),
            spawn("worker", "GOOD-TASK"),
            ("spawn_agent", json!({"profile": "worker", "task": "  "})),
            ("spawn_agent", json!({"profile": "nobody", "task": "x"})),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "x", "tools": ["http_get"]}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "x", "colour": "red"}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "x", "background": "yes"}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "x", "max_turns": 0}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "x", "max_cost_usd": 5.0}),
            ),
            ("cancel_agent", json!({"job_id": "nope42"})),
        ]),
    );
    server.route(
        "LOOP-TASK",
        calls(&[("list_dir", json!({"path": "/docs"}))]),
    );
    server.route("notes.md", calls(&[("list_dir", json!({"path": "/docs"}))]));
    server.route("FAIL-TASK", Reply::status(401, r#"{"error":"bad key"}"#));
    server.route("SLOW-TASK", delayed(3000, answer("too late")));
    server.route("GOOD-TASK", answer("GOOD-RESULT"));
    // The root's next turn sees either its last tool result or, if children already
    // finished, their notifications; it awaits everything either way.
    server.route(
        "[nope42: NOT FOUND]",
        calls(&[("await_agents", json!({"job_ids": "*"}))]),
    );
    server.route(
        "agent_notifications",
        calls(&[("await_agents", json!({"job_ids": "*"}))]),
    );
    server.route("GOOD-RESULT", answer("root finished"));
    let (report, _) = run(
        &world,
        &config(&server, "budget_usd = 0.5", ""),
        "ROOT-TASK",
    )
    .await;
    assert_eq!(
        report.root.text, "root finished",
        "a failing child does not fail the parent: {:?}",
        report.root
    );

    let root = requests_with(&server, "ROOT-TASK");
    let results = tool_results(root.last().unwrap());
    let errors = &results[4..12];
    assert_eq!(errors[0], "`task` is required and must not be empty");
    assert_eq!(
        errors[1],
        "unknown profile `nobody` (available: main, worker; or leave `profile` out to use your own)"
    );
    assert_eq!(errors[2], "tool `http_get` is not available to profile `worker` (available: list_dir, read_file, write_file)");
    assert!(
        errors[3].starts_with("unknown argument `colour`"),
        "{}",
        errors[3]
    );
    assert_eq!(errors[4], "`background` must be true or false, got \"yes\"");
    assert_eq!(errors[5], "`max_turns` must be a positive integer");
    assert!(
        errors[6].starts_with("spawn refused: it may cost up to $5.0000 but only $0.4"),
        "{}",
        errors[6]
    );
    assert!(
        errors[6].contains("of the run's $0.5000 budget is left (spent $0.000"),
        "{}",
        errors[6]
    );
    assert_eq!(errors[7], "[nope42: NOT FOUND]");

    let blocks = results.last().unwrap();
    assert!(
        blocks.contains(": ERROR] worker · max turns (2) reached"),
        "{blocks}"
    );
    assert!(
        blocks.contains(": ERROR] worker · openai rejected the API key (HTTP 401)"),
        "{blocks}"
    );
    assert!(
        blocks.contains(": TIMEOUT] worker · timed out after 1 s (timeout_s)"),
        "{blocks}"
    );
    assert!(
        blocks.contains(": OK] worker") && blocks.contains("GOOD-RESULT"),
        "{blocks}"
    );
}

#[tokio::test]
async fn the_budget_is_shared_by_the_tree() {
    let world = World::new();
    let server = FakeLlm::start().await;
    // Each turn costs 150 tokens × $1/Mtok = $0.00015; the budget allows one turn.
    server.route("ROOT-TASK", calls(&[spawn("worker", "W-TASK")]));
    let (report, _) = run(
        &world,
        &config(&server, "budget_usd = 0.0001", ""),
        "ROOT-TASK",
    )
    .await;
    assert_eq!(
        report.root.state,
        AgentState::BudgetExceeded,
        "{:?}",
        report.root
    );
    assert!(
        report
            .root
            .error
            .as_deref()
            .unwrap()
            .contains("budget of $0.0001 is used up (spent $0.000"),
        "{:?}",
        report.root.error
    );
    let root = requests_with(&server, "ROOT-TASK");
    assert_eq!(root.len(), 1);
}

/// `[defaults] max_agents` bounds the agents of a run, the root included: with 3, a
/// reply of three spawns gets two children and a refusal naming the key, and the
/// root goes on with the two results.
#[tokio::test]
async fn max_agents_stops_a_larger_tree_naming_the_key() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[
            spawn("worker", "A-TASK"),
            spawn("worker", "B-TASK"),
            spawn("worker", "C-TASK"),
        ]),
    );
    for task in ["A-TASK", "B-TASK", "C-TASK"] {
        server.route(task, answer(&format!("{task} DONE")));
    }
    // Which spawn is refused depends on how the three calls interleave.
    server.respond_with(Arc::new(|body: &Value| {
        let all = body["messages"].to_string();
        let done = ["A-TASK DONE", "B-TASK DONE", "C-TASK DONE"];
        Some(match done.iter().filter(|d| all.contains(*d)).count() {
            2 => answer("ROOT-DONE"),
            _ => calls(&[("await_agents", json!({"job_ids": "*"}))]),
        })
    }));
    let text = config(&server, "max_agents = 3\nmax_concurrent = 3", "");
    let (report, _) = run(&world, &text, "ROOT-TASK").await;
    assert_eq!(report.root.text, "ROOT-DONE", "{:?}", report.root);
    assert_eq!(report.agents.len(), 3, "the root and two children");
    let refused = requests_with(&server, "max_agents");
    let results = tool_results(refused.last().expect("the refusal reached the root"));
    let refusal = results.iter().find(|r| r.contains("max_agents")).unwrap();
    assert!(
        refusal.contains("this run holds 3 agents") && refusal.contains("max_agents = 3"),
        "{refusal}"
    );
    let asked = ["A-TASK", "B-TASK", "C-TASK"].iter();
    let children = asked.filter(|t| !requests_with(&server, &format!("{t} DONE")).is_empty());
    assert_eq!(children.count(), 2, "two children ran");
}

#[tokio::test]
async fn capabilities_are_intersected_and_delegation_is_single_shot() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-TASK",
        calls(&[
            ("spawn_agent", json!({"profile": "worker", "task": "WRITE-TASK", "background": false})),
            ("spawn_agent", json!({"profile": "delegate", "task": "ONE-SHOT", "background": false, "context": {"topic": "fox"}})),
        ]),
    );
    server.route(
        "WRITE-TASK",
        calls(&[(
            "write_file",
            json!({"path": "/docs/new.md", "content": "x"}),
        )]),
    );
    server.route("denied", answer("could not write: denied"));
    server.route("ONE-SHOT", answer("DELEGATE-ANSWER"));
    server.route("DELEGATE-ANSWER", answer("root done"));
    let extra = r#"
[models.small]
provider = "openai"
base_url = "BASE"
model = "small-model"
api_key_env = "CARGO_PKG_NAME"
stream = false

[profiles.delegate]
description = "Answers in one generation"
tools = []
max_turns = 1
model = "small"
"#
    .replace("BASE", &server.base_url);
    let text = config(&server, "model = \"fake\"", &extra);
    let (report, _) = run(&world, &text, "ROOT-TASK").await;
    assert_eq!(report.root.text, "root done", "{:?}", report.root);
    assert!(
        !world.path("docs/new.md").exists(),
        "the child's rw grant was cut to the parent's ro"
    );
    let results = tool_results(&requests_with(&server, "DELEGATE-ANSWER").pop().unwrap());
    assert!(
        results[0].contains(": OK] worker") && results[0].contains("could not write: denied"),
        "{results:?}"
    );
    assert!(
        results[1].contains(": OK] delegate · 1 turns") && results[1].contains("DELEGATE-ANSWER"),
        "{results:?}"
    );
    let delegate = &requests_with(&server, "ONE-SHOT")[0];
    assert_eq!(delegate.body["model"], "small-model");
    assert!(
        delegate.body.get("tools").is_none(),
        "delegate mode offers no tools"
    );
    assert!(
        delegate.body.to_string().contains("<context>"),
        "{}",
        delegate.body
    );
}

#[tokio::test]
async fn cancelling_the_run_stops_everything() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route("ROOT-TASK", calls(&[spawn("worker", "HANG-TASK")]));
    server.route("HANG-TASK", Reply::Hang);
    server.route(
        "Started job",
        calls(&[("await_agents", json!({"job_ids": "*"}))]),
    );
    let config = Config::load(&world.config(&config(&server, "", ""))).unwrap();
    let host = Host::load(config).await.unwrap();
    let run = host.start("main", "ROOT-TASK", None).unwrap();
    let cancel: warren::Canceller = run.canceller();
    while !server
        .requests()
        .iter()
        .any(|r| r.body.to_string().contains("HANG-TASK"))
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cancel.cancel();
    let report = tokio::time::timeout(Duration::from_secs(5), run.wait())
        .await
        .expect("cancellation is prompt");
    assert_eq!(report.root.state, AgentState::Cancelled);
    assert!(report.agents.iter().all(|j| j
        .outcome
        .as_ref()
        .is_some_and(|o| o.state == AgentState::Cancelled)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(server.hang_dropped.load(Ordering::SeqCst));
}

#[tokio::test]
async fn the_host_wide_limit_spans_runs() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT-ONE",
        calls(&[spawn("worker", "G1"), spawn("worker", "G2")]),
    );
    server.route(
        "ROOT-TWO",
        calls(&[spawn("worker", "G3"), spawn("worker", "G4")]),
    );
    for task in ["G1", "G2", "G3", "G4"] {
        server.route(
            &format!("\"{task}\""),
            delayed(300, answer(&format!("{task} done"))),
        );
    }
    for _ in 0..2 {
        server.route(
            "in the background",
            calls(&[("await_agents", json!({"job_ids": "*"}))]),
        );
    }
    server.route("G1 done", answer("one done"));
    server.route("G3 done", answer("two done"));
    let text = config(&server, "max_concurrent = 2\nmax_concurrent_total = 2", "");
    let host = Host::load(Config::load(&world.config(&text)).unwrap())
        .await
        .unwrap();
    let started = Instant::now();
    let (one, two) = (
        host.start("main", "ROOT-ONE", None).unwrap(),
        host.start("main", "ROOT-TWO", None).unwrap(),
    );
    let (one, two) = tokio::join!(one.wait(), two.wait());
    assert_eq!(
        (one.root.text.as_str(), two.root.text.as_str()),
        ("one done", "two done")
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(600),
        "4 × 300 ms children with 2 host-wide slots took {elapsed:?}"
    );
}

#[tokio::test]
async fn slots_are_granted_in_spawn_order_and_the_spawn_answer_says_which() {
    // Five spawns in one turn under max_concurrent = 3, several times over: the three
    // told "Started" are the three that run first, and the two told "queued" start in
    // the order they were spawned.
    for round in 0..6 {
        let world = World::new();
        let server = FakeLlm::start().await;
        let tasks: Vec<String> = (1..=5).map(|n| format!("FIFO-{round}-{n}")).collect();
        let spawns: Vec<(&str, Value)> = tasks.iter().map(|t| spawn("worker", t)).collect();
        server.route("ROOT-TASK", calls(&spawns));
        for task in &tasks {
            server.route(task, delayed(150, answer(&format!("{task} done"))));
        }
        server.route(
            "in the background",
            calls(&[("await_agents", json!({"job_ids": "*"}))]),
        );
        server.route(&format!("{} done", tasks[4]), answer("all done"));
        let (report, _) = run(
            &world,
            &config(&server, "max_concurrent = 3", ""),
            "ROOT-TASK",
        )
        .await;
        assert_eq!(report.root.text, "all done", "round {round}");
        let turn2 = requests_with(&server, "Started job")
            .into_iter()
            .find(|r| r.body.to_string().contains("ROOT-TASK"))
            .unwrap();
        let answers = tool_results(&turn2);
        let queued: Vec<bool> = answers.iter().map(|a| a.contains("It is queued")).collect();
        assert_eq!(queued, [false, false, false, true, true], "{answers:?}");
        // The order in which the children's first requests reached the model.
        let first_seen: Vec<usize> = server
            .requests()
            .iter()
            .filter_map(|r| {
                let task = r.body["messages"][1]["content"].as_str()?;
                tasks.iter().position(|t| t == task)
            })
            .collect();
        assert_eq!(first_seen.len(), 5, "{first_seen:?}");
        let mut started_first = first_seen[..3].to_vec();
        started_first.sort_unstable();
        assert_eq!(started_first, [0, 1, 2], "round {round}: {first_seen:?}");
        assert_eq!(&first_seen[3..], [3, 4], "round {round}: {first_seen:?}");
    }
}

#[tokio::test]
async fn main_is_implicit_beside_other_profiles_and_can_be_spawned() {
    let world = World::new();
    let server = FakeLlm::start().await;
    // Only a `worker` profile: the root runs under the implicit `main` and may spawn
    // `main` by name.
    let text = config(&server, "", "").replace(
        "[profiles.main]\ndescription = \"Coordinator\"\nsystem_prompt = \"ROOT-PROMPT: coordinate.\"\ntools = [\"list_dir\"]\n[profiles.main.capabilities]\nfs = [{ host = \"docs\", guest = \"/docs\", mode = \"ro\" }]\n",
        "",
    );
    assert!(!text.contains("[profiles.main]"), "{text}");
    server.route(
        "ROOT-TASK",
        calls(&[(
            "spawn_agent",
            json!({"profile": "main", "task": "AS-MAIN", "background": false}),
        )]),
    );
    server.route("AS-MAIN", answer("MAIN-CHILD-RESULT"));
    server.route("MAIN-CHILD-RESULT", answer("root done"));
    let (report, _) = run(&world, &text, "ROOT-TASK").await;
    assert_eq!(report.root.state, AgentState::Ok, "{:?}", report.root);
    assert_eq!(report.root.text, "root done");
    assert_eq!(report.agents[1].profile, "main");
    // An unknown profile lists what there is, `main` included.
    let config = Config::load(&world.config(&text)).unwrap();
    let error = config.profile("nobody").unwrap_err().to_string();
    assert!(error.contains("(defined: main, worker)"), "{error}");
}

/// Through the binary: with only a `worker` profile configured, the model is offered
/// every profile a spawn may name, the implicit `main` included, in `spawn_agent`'s
/// `profile` enum and in its `<available_spawn_profiles>` block.
#[tokio::test(flavor = "multi_thread")]
async fn the_spawn_tool_offers_the_implicit_main_beside_other_profiles() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route("ROOT-TASK", answer("root done"));
    let text = config(&server, "", "").replace(
        "[profiles.main]\ndescription = \"Coordinator\"\nsystem_prompt = \"ROOT-PROMPT: coordinate.\"\ntools = [\"list_dir\"]\n[profiles.main.capabilities]\nfs = [{ host = \"docs\", guest = \"/docs\", mode = \"ro\" }]\n",
        "",
    );
    assert!(!text.contains("[profiles.main]"), "{text}");
    let path = world.config(&text);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .arg("--config")
        .arg(&path)
        .args(["run", "-q", "ROOT-TASK"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let first = requests_with(&server, "ROOT-TASK").remove(0);
    let spawn = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "spawn_agent")
        .unwrap()["function"]["parameters"]["properties"]["profile"]
        .clone();
    assert_eq!(spawn["enum"], json!(["main", "worker"]), "{spawn}");
    let system = first.body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("\n- main: ") && system.contains("\n- worker: Does one thing"),
        "{system}"
    );
}

#[tokio::test]
async fn a_root_with_no_prompt_sends_no_system_message() {
    let world = World::new();
    let server = FakeLlm::start().await;
    let text = config(&server, "", "");
    let text = &text[..text.find("[profiles.main]").unwrap()];
    server.route("ROOT-TASK", answer("root done"));
    let (report, _) = run(&world, text, "ROOT-TASK").await;
    assert_eq!(report.root.text, "root done", "{:?}", report.root);
    let root = requests_with(&server, "ROOT-TASK");
    let roles: Vec<&str> = root[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user"], "{}", root[0].body);
}

#[tokio::test]
async fn a_spawn_is_told_what_it_was_granted_and_the_defaults_ceiling_holds() {
    let world = World::new();
    let server = FakeLlm::start().await;
    // The worker sets its own max_turns (4) and timeout_s (2); [defaults] allows spawns
    // up to 30 turns.
    let text = config(&server, "max_turns_ceiling = 30", "").replace(
        "[profiles.worker]\n",
        "[profiles.worker]\nmax_turns = 4\ntimeout_s = 2\n",
    );
    let loaded = Config::load(&world.config(&text)).unwrap();
    assert_eq!(loaded.profile("worker").unwrap().max_turns_ceiling, 30);
    server.route(
        "ROOT-TASK",
        calls(&[
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "ASK-MORE", "max_turns": 50, "timeout_s": 100}),
            ),
            (
                "spawn_agent",
                json!({"profile": "worker", "task": "ASK-FAIR", "max_turns": 20}),
            ),
        ]),
    );
    server.route("ASK-MORE", answer("more done"));
    server.route("ASK-FAIR", answer("fair done"));
    server.route(
        "Started job",
        calls(&[("await_agents", json!({"job_ids": "*"}))]),
    );
    server.route("done", answer("root done"));
    let (report, _) = run(&world, &text, "ROOT-TASK").await;
    assert_eq!(report.root.text, "root done", "{:?}", report.root);
    let turn2 = requests_with(&server, "Started job")
        .into_iter()
        .find(|r| r.body.to_string().contains("ROOT-TASK"))
        .unwrap();
    let answers = tool_results(&turn2);
    assert!(
        answers[0].contains("max_turns 50 was asked, 30 granted")
            && answers[0].contains("timeout_s 100 was asked, 2 granted"),
        "{answers:?}"
    );
    assert!(!answers[1].contains("granted"), "{answers:?}");
}

/// A child whose scratch directory cannot be made (here: TMPDIR is removed after the
/// root made its own) is a spawn error the parent reads, and nothing is left queued:
/// the run ends.
#[test]
fn a_child_that_cannot_be_prepared_is_never_left_queued() {
    let world = World::new();
    std::fs::write(
        world.path("script.toml"),
        r#"
[[turns]]
profile = "main"
delay_ms = 2000
tool_calls = [{ name = "spawn_agent", arguments = { profile = "digger", task = "dig" } }]
[[turns]]
profile = "main"
when = "cannot prepare the sub-agent"
text = "the spawn failed"
"#,
    )
    .unwrap();
    world.config(
        "[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\
         [profiles.main]\ntools = []\n[profiles.main.capabilities]\nscratch = true\n\
         [profiles.digger]\ntools = []\n[profiles.digger.capabilities]\nscratch = true\n",
    );
    let tmp = world.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "go", "--json", "--progress", "none"])
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the root has its scratch directory (its first turn takes 2 s), the next
    // one cannot be made.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_dir(&tmp).unwrap().next().is_none() {
        assert!(
            Instant::now() < deadline,
            "the root made no scratch directory"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&tmp).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run never ended: the unprepared child stayed queued");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["text"], "the spawn failed");
    assert_eq!(result["agents"].as_array().unwrap().len(), 1, "{result}");
}

/// A session's caller (an MCP client) is answered in its own terms, spawned jobs are
/// known by the id the spawn returns, and every job's end is an event, a job cancelled
/// while it still waited for its slot included.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_is_told_to_await_and_every_job_it_starts_ends_with_an_event() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route("SLOW-TASK", delayed(1500, answer("slow done")));
    server.route("FG-TASK", answer("fg done"));
    let text = config(&server, "max_concurrent = 1\nmax_turns = 5", "");
    let host = Host::load(Config::load(&world.config(&text)).unwrap())
        .await
        .unwrap();
    let session = host.session(None).unwrap();
    let mut events = session.events();
    let spawn = |task: &str| json!({"profile": "worker", "task": task}).to_string();

    let started = session
        .call("spawn_agent", &spawn("SLOW-TASK"))
        .await
        .unwrap();
    assert!(
        started.ends_with(
            "in the background; get its result with await_agents (list_agents shows where it is)."
        ),
        "{started}"
    );
    let queued = session
        .call("spawn_agent", &spawn("WAITING-TASK"))
        .await
        .unwrap();
    assert!(queued.starts_with("Queued job "), "{queued}");
    assert!(
        queued.ends_with("Get its result with await_agents (list_agents shows where it is).")
            && !queued.contains("notified"),
        "{queued}"
    );
    let waiting = queued.split_whitespace().nth(2).unwrap().to_string();
    let cancelled = session
        .call("cancel_agent", &json!({"job_id": waiting}).to_string())
        .await
        .unwrap();
    assert!(
        cancelled.starts_with(&format!("Cancelled job {waiting}")),
        "{cancelled}"
    );

    // A foreground spawn waits its turn, and hears what it was not granted.
    let foreground = session
        .call(
            "spawn_agent",
            &json!({"profile": "worker", "task": "FG-TASK", "max_turns": 50, "background": false})
                .to_string(),
        )
        .await
        .unwrap();
    assert!(
        foreground.starts_with("max_turns 50 was asked, 5 granted"),
        "{foreground}"
    );
    assert!(
        foreground.contains(": OK] worker") && foreground.ends_with("fg done"),
        "{foreground}"
    );

    let mut finished = BTreeMap::new();
    while finished.len() < 3 {
        let record = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("every job's end is an event")
            .unwrap();
        if let warren::Event::AgentFinished { agent, state, .. } = record.event {
            finished.insert(agent, state);
        }
    }
    assert_eq!(finished[&waiting], AgentState::Cancelled, "{finished:?}");
    assert_eq!(
        finished.values().filter(|s| **s == AgentState::Ok).count(),
        2,
        "{finished:?}"
    );

    // The session is journaled as a run, its end recorded when it closes.
    drop(session);
    // Read back as `warren runs` and `warren show` read journals.
    let deadline = Instant::now() + Duration::from_secs(10);
    let run_id = loop {
        let listed = crate::support::warren(&world, &["runs", "--json"]);
        let stderr = crate::support::text(&listed.stderr);
        assert!(!stderr.contains("skipping a journal"), "{stderr}");
        let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
        let finished = listed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["finished"] == true)
            .map(|r| r["run_id"].as_str().unwrap().to_string());
        if let Some(run_id) = finished {
            break run_id;
        }
        assert!(
            Instant::now() < deadline,
            "the session's end was not journaled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let shown = crate::support::warren(&world, &["show", &run_id, "--json"]);
    let run: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(run["agents"].as_array().unwrap().len(), 4, "{run:#}");
    assert_eq!(run["run"]["state"], "cancelled");
    assert_eq!(run["agents"][1]["text"], "slow done");
}
