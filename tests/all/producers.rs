//! Jobs from producers other than warren, in the shape the seed designs give them
//! (queue `agent-tasks`, job name `sub-agent`, data `{task, context}`), from the
//! official BullMQ packages for Python and Node against a real `redis-server`: such a
//! job is a sub-agent handed work, and cancelling it as BullMQ users do stops it.

use std::process::Command;

use serde_json::Value;

use crate::fake_llm::{FakeLlm, Reply};
use crate::queue::{node_bullmq, node_json, python_bullmq, Redis, Worker};

/// `[queue]` settings for a worker on the seed designs' queue.
const SEED_QUEUE: &str = "[queue]\nname = \"agent-tasks\"\nlock_ms = 1000\nstalled_interval_ms = 500\nattempts = 2\nshutdown_grace_s = 1\n";

/// A worker with no `[queue] default_profile` and no profiles: a Python producer's job
/// with no profile runs as a sub-agent of the implicit `main` (the worker says so when
/// it starts): it gets the sub-agent prompt, its task with the context, and `main`'s
/// tools, but no spawn tools, as a child under `max_depth = 1` would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_from_another_producer_runs_as_a_sub_agent_handed_work() {
    let (python, fixture) = python_bullmq();
    let server = FakeLlm::start().await;
    server.route("SEED-TASK", Reply::answer("seed done", (1, 1)));
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("warren.toml"),
        format!(
            "[plugins]\ncache = false\n[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n{SEED_QUEUE}",
            server.base_url
        ),
    )
    .unwrap();
    let worker = Worker::start(dir.path(), &redis, "w1", 1);
    assert!(
        worker
            .output()
            .contains("a job naming no profile runs as `main`"),
        "{}",
        worker.output()
    );
    let output = tokio::task::block_in_place(|| {
        Command::new(&python)
            .arg(fixture.join("producer.py"))
            .args([
                &redis.url(),
                "agent-tasks",
                r#"{"task": "SEED-TASK: list the sources", "context": {"repo": "seed-repo"}}"#,
                "1",
                "sub-agent",
            ])
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let done: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(done["state"], "completed", "{done}\n{}", worker.output());
    assert_eq!(done["result"]["text"], "seed done", "{done}");
    let request = server
        .requests()
        .into_iter()
        .find(|r| r.body.to_string().contains("SEED-TASK"))
        .expect("the job's model request");
    let messages = request.body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system", "{}", request.body);
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are a sub-agent"),
        "{}",
        messages[0]
    );
    let task = messages[1]["content"].as_str().unwrap();
    assert!(
        task.contains("<context>") && task.contains("seed-repo"),
        "{task}"
    );
    let tools: Vec<&str> = request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"read_file"), "{tools:?}");
    assert!(
        !tools
            .iter()
            .any(|t| t.ends_with("_agent") || *t == "await_agents"),
        "a job handed work got the spawn tools: {tools:?}"
    );
}

/// Runs `cancel.mjs MODE` for a job with `task` on queue `agent-tasks`.
fn cancel_with_node(redis: &Redis, mode: &str, task: &str) -> Value {
    node_json(
        Command::new("node")
            .arg(node_bullmq().join("cancel.mjs"))
            .args([&redis.url(), "agent-tasks", mode])
            .arg(serde_json::json!({ "task": task }).to_string()),
    )
}

/// Cancelling a running job the BullMQ way: a Node producer's
/// `job.moveToFailed(error, "0")` stops the agent (long before its minute-long model
/// turn ends) and the job keeps
/// the producer's end; warren's own cancel key ends the job failed, unrecoverably (one
/// attempt of two), with `cancelled:` as its reason and the agent's outcome in its
/// log, as BullMQ's consumers count a job that did not complete.
#[test]
fn cancelling_the_bullmq_way_stops_the_agent_and_fails_the_job() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("warren.toml"),
        format!("[plugins]\ncache = false\nbuiltins = false\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n{SEED_QUEUE}"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("script.toml"),
        "[[turns]]\nprofile = \"main\"\nwhen = \"SLOW ONE\"\ndelay_ms = 60000\ntext = \"never\"\n\
         [[turns]]\nprofile = \"main\"\nwhen = \"SLOW TWO\"\ndelay_ms = 60000\ntext = \"never\"\n",
    )
    .unwrap();
    let worker = Worker::start(dir.path(), &redis, "w1", 1);

    let moved = cancel_with_node(&redis, "move-to-failed", "SLOW ONE");
    assert_eq!(moved["state"], "failed", "{moved}");
    assert_eq!(
        moved["failedReason"], "cancelled by the producer",
        "{moved}"
    );
    let within = moved["cancelToLogMs"].as_u64();
    assert!(
        within.is_some_and(|ms| ms < 15_000),
        "the agent was not stopped: {moved}\n{}",
        worker.output()
    );
    assert!(
        moved["logs"].to_string().contains(
            "worker w1: agent cancelled: another client moved the job to failed: cancelled by the producer"
        ),
        "{moved}"
    );

    let keyed = cancel_with_node(&redis, "cancel-key", "SLOW TWO");
    assert_eq!(keyed["state"], "failed", "{keyed}");
    assert_eq!(keyed["attemptsMade"], 1, "retried: {keyed}");
    assert!(
        keyed["failedReason"]
            .as_str()
            .is_some_and(|r| r.starts_with("cancelled") && r.ends_with("(worker w1)")),
        "{keyed}"
    );
    assert!(
        keyed["cancelToLogMs"]
            .as_u64()
            .is_some_and(|ms| ms < 15_000),
        "{keyed}"
    );
    let outcome: Value = keyed["logs"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|l| serde_json::from_str(l.as_str()?.strip_prefix("warren outcome: ")?).ok())
        .unwrap_or_else(|| panic!("no outcome in the log: {keyed}"));
    assert_eq!(outcome["state"], "cancelled", "{outcome}");
    assert_eq!(outcome["worker"], "w1", "{outcome}");
}
