//! Sub-agents through Redis: a real `redis-server` per test on a free port, workers
//! as separate `warren worker` processes, the parent as `warren run --redis`, and a
//! Node BullMQ producer from npm.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The most bytes of a queue job's data (docs/queue.md: 4 MiB).
const MAX_JOB_DATA_BYTES: usize = 4 * 1024 * 1024;
/// What starts the log line in which a worker records a job's outcome.
const OUTCOME_LOG_PREFIX: &str = "warren outcome: ";

/// A `redis-server` of our own, with an append-only file so a restart keeps its data.
pub(crate) struct Redis {
    port: u16,
    dir: tempfile::TempDir,
    server: Child,
    /// Whether it keeps an append-only file.
    durable: bool,
}

impl Redis {
    pub(crate) fn start() -> Redis {
        Redis::start_with(true)
    }

    /// A server without an append-only file (nothing it holds survives a restart),
    /// for tests that add thousands of jobs.
    pub(crate) fn start_volatile() -> Redis {
        Redis::start_with(false)
    }

    fn start_with(durable: bool) -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let server = Redis::spawn(port, dir.path(), durable);
        let redis = Redis {
            port,
            dir,
            server,
            durable,
        };
        redis.wait_ready();
        redis
    }

    fn spawn(port: u16, dir: &Path, durable: bool) -> Child {
        let append_only: &[&str] = if durable {
            &["--appendonly", "yes", "--appendfsync", "always"]
        } else {
            &["--appendonly", "no"]
        };
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(append_only)
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start redis-server ({e}): install it with `apt-get install redis-server` (.ci/run does)")
            })
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.connection().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server on port {} did not start", self.port);
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn connection(&self) -> Option<redis::Connection> {
        let mut conn = redis::Client::open(self.url())
            .ok()?
            .get_connection()
            .ok()?;
        redis::cmd("PING").query::<String>(&mut conn).ok()?;
        Some(conn)
    }

    pub(crate) fn query<T: redis::FromRedisValue>(&self, cmd: &mut redis::Cmd) -> T {
        cmd.query(&mut self.connection().expect("redis is up"))
            .unwrap()
    }

    /// Stops the server (its append-only file stays) and starts it again on the same
    /// port, `down` later.
    fn restart(&mut self, down: Duration) {
        let _ = redis::cmd("SHUTDOWN").query::<()>(&mut self.connection().unwrap());
        let _ = self.server.wait();
        std::thread::sleep(down);
        self.server = Redis::spawn(self.port, self.dir.path(), self.durable);
        self.wait_ready();
    }

    /// Every job hash of queue `warren` with its id.
    pub(crate) fn jobs(&self) -> Vec<(String, std::collections::HashMap<String, String>)> {
        let keys: Vec<String> = self.query(redis::cmd("KEYS").arg("bull:warren:*"));
        keys.into_iter()
            .filter_map(|key| {
                let id = key.strip_prefix("bull:warren:")?.to_string();
                let kind: String = self.query(redis::cmd("TYPE").arg(&key));
                if kind != "hash" {
                    return None;
                }
                let fields: std::collections::HashMap<String, String> =
                    self.query(redis::cmd("HGETALL").arg(&key));
                fields.contains_key("data").then_some((id, fields))
            })
            .collect()
    }

    /// The outcomes of finished jobs, parsed: a completed job's return value, or the
    /// outcome a worker logged for a job it failed as cancelled.
    fn outcomes(&self) -> Vec<Value> {
        self.jobs()
            .into_iter()
            .filter_map(|(id, job)| self.outcome(&id, &job))
            .collect()
    }

    /// Job `id`'s outcome (see [`Redis::outcomes`]).
    fn outcome(&self, id: &str, job: &std::collections::HashMap<String, String>) -> Option<Value> {
        if let Some(value) = job.get("returnvalue") {
            return serde_json::from_str(value).ok();
        }
        job.get("failedReason")?;
        let logs: Vec<String> = self.query(
            redis::cmd("LRANGE")
                .arg(format!("bull:warren:{id}:logs"))
                .arg(0)
                .arg(-1),
        );
        logs.iter()
            .rev()
            .find_map(|line| serde_json::from_str(line.strip_prefix(OUTCOME_LOG_PREFIX)?).ok())
    }

    /// The ids of the active jobs.
    fn active(&self) -> Vec<String> {
        self.query(
            redis::cmd("LRANGE")
                .arg("bull:warren:active")
                .arg(0)
                .arg(-1),
        )
    }

    /// The return values once there are `n` (or what there is after `within`).
    fn wait_outcomes(&self, n: usize, within: Duration) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let outcomes = self.outcomes();
            if outcomes.len() >= n || Instant::now() > deadline {
                return outcomes;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until some job is active and returns the worker holding it (BullMQ's
    /// `pb`, processed-by, field).
    fn wait_active(&self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(id) = self.active().first() {
                let by: Option<String> = self.query(
                    redis::cmd("HGET")
                        .arg(format!("bull:warren:{id}"))
                        .arg("pb"),
                );
                if let Some(by) = by {
                    return by;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no job became active within {within:?}");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// A `warren worker` process; killed when dropped.
pub(crate) struct Worker {
    child: Child,
    log: PathBuf,
}

impl Worker {
    pub(crate) fn start(dir: &Path, redis: &Redis, name: &str, concurrency: u32) -> Worker {
        Worker::start_with(dir, redis, name, concurrency, &[])
    }

    fn start_with(
        dir: &Path,
        redis: &Redis,
        name: &str,
        concurrency: u32,
        extra: &[&str],
    ) -> Worker {
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(["worker", "--redis", &redis.url(), "--name", name])
            .args(["--concurrency", &concurrency.to_string()])
            .args(extra)
            .current_dir(dir)
            .env_remove("WARREN_CONFIG")
            .env("RUST_LOG", "warn,warren=info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let worker = Worker { child, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !worker.output().contains("taking jobs") {
            assert!(
                Instant::now() < deadline,
                "worker {name} did not start:\n{}",
                worker.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        worker
    }

    pub(crate) fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub(crate) fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "worker did not exit:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory with `warren.toml` (scripted model, `[queue]` with short locks) and
/// `script.toml`.
/// `warren ARGS --redis URL` in a project of `config`, its sub-agents run by one
/// worker (width 2) of a project of the same `config`, over a fresh redis-server.
fn run_with_one_worker(config: &str, args: &[&str]) -> std::process::Output {
    let (parent, worker_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for dir in [&parent, &worker_dir] {
        std::fs::write(dir.path().join("warren.toml"), config).unwrap();
    }
    let redis = Redis::start();
    let _worker = Worker::start(worker_dir.path(), &redis, "w1", 2);
    tokio::task::block_in_place(|| {
        Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(args)
            .args(["--redis", &redis.url()])
            .current_dir(parent.path())
            .env_remove("WARREN_CONFIG")
            .output()
            .unwrap()
    })
}

pub(crate) fn world(extra: &str, script: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("warren.toml"),
        format!(
            r#"[plugins]
cache = false
builtins = false

[models.scripted]
provider = "scripted"
script = "script.toml"

[defaults]
max_turns = 6
timeout_s = 60
max_concurrent = 3

[queue]
lock_ms = 1000
stalled_interval_ms = 500
attempts = 2
shutdown_grace_s = 1

[profiles.main]
description = "Coordinator"

[profiles.researcher]
description = "Researches one topic"
{extra}"#
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("script.toml"), script).unwrap();
    dir
}

/// Runs `warren run TASK --redis URL --events events.jsonl` in `dir`; returns the
/// exit code, stdout, stderr and the events.
fn run_parent(dir: &Path, redis: &Redis, task: &str) -> (Option<i32>, String, String, Vec<Value>) {
    let output = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", task, "--redis", &redis.url(), "--progress", "plain"])
        .args(["--events", "events.jsonl", "--run-id", RUN_ID])
        .current_dir(dir)
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let events = std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        events,
    )
}

/// Rewrites `dir`'s `warren.toml`, replacing each `from` with its `to`.
fn edit_config(dir: &Path, edits: &[(&str, &str)]) {
    let path = dir.join("warren.toml");
    let mut config = std::fs::read_to_string(&path).unwrap();
    for (from, to) in edits {
        assert!(config.contains(from), "{from:?} is not in {config}");
        config = config.replace(from, to);
    }
    std::fs::write(path, config).unwrap();
}

/// A script where the root spawns one researcher on `task` and waits for it; the
/// researcher answers `answer` after `delay_ms`, then the root answers `root_answer`.
fn one_child_script(task: &str, delay_ms: u64, answer: &str, root_answer: &str) -> String {
    format!(
        r#"
[[turns]]
profile = "main"
tool_calls = [{{ name = "spawn_agent", arguments = {{ profile = "researcher", task = "{task}", background = false }} }}]
[[turns]]
profile = "main"
when = "OK]"
text = "{root_answer}"
[[turns]]
profile = "researcher"
when = "{task}"
delay_ms = {delay_ms}
text = "{answer}"
"#
    )
}

/// Asserts that a `warren run` exited 0; its stdout, trimmed.
fn succeeded(output: &std::process::Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Runs `warren run go --redis URL --quiet EXTRA…` in `dir` on another thread.
fn run_parent_in_background(
    dir: &Path,
    redis: &Redis,
    extra: &[&str],
) -> std::thread::JoinHandle<std::process::Output> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warren"));
    command
        .args(["run", "go", "--redis", &redis.url(), "--quiet"])
        .args(extra)
        .current_dir(dir)
        .env_remove("WARREN_CONFIG");
    std::thread::spawn(move || command.output().unwrap())
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The run id the parents of these tests are given, so their job ids are known
/// beforehand ([`ids`]). One parent per Redis: two runs of one id would share job ids.
const RUN_ID: &str = "queue-test";

/// The ids a run hands out first: the root's, then its first child's.
fn first_ids() -> (String, String) {
    let ids = ids(2);
    (ids[0].clone(), ids[1].clone())
}

/// The first `n` ids a run hands out (the root's first).
fn ids(n: usize) -> Vec<String> {
    crate::support::job_ids(RUN_ID, n)
}

const THREE_TOPICS: &str = r#"
[[turns]]
profile = "main"
tool_calls = [
  { name = "spawn_agent", arguments = { profile = "researcher", task = "topic one" } },
  { name = "spawn_agent", arguments = { profile = "researcher", task = "topic two" } },
  { name = "spawn_agent", arguments = { profile = "researcher", task = "topic three" } },
]
[[turns]]
profile = "main"
when = "Started job"
tool_calls = [
  { name = "list_agents", arguments = {} },
  { name = "await_agents", arguments = { job_ids = "CHILDREN" } },
]
[[turns]]
profile = "main"
when = "OK]"
text = "all three reported"
[[turns]]
profile = "researcher"
when = "topic one"
delay_ms = 1500
text = "one is done"
[[turns]]
profile = "researcher"
when = "topic two"
delay_ms = 1500
text = "two is done"
[[turns]]
profile = "researcher"
when = "topic three"
delay_ms = 1500
text = "three is done"
"#;

#[test]
fn three_workers_share_the_children_and_the_parent_sees_their_events() {
    let redis = Redis::start();
    let children = ids(4)[1..].join(",");
    let dir = world("", &THREE_TOPICS.replace("CHILDREN", &children));
    let _workers: Vec<Worker> = ["w1", "w2", "w3"]
        .iter()
        .map(|name| Worker::start(dir.path(), &redis, name, 1))
        .collect();
    let (code, stdout, stderr, events) = run_parent(dir.path(), &redis, "research");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "all three reported");

    // Each worker ran one child (each takes one job at a time, all three at once).
    let outcomes = redis.outcomes();
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    let workers: BTreeSet<&str> = outcomes
        .iter()
        .map(|o| o["worker"].as_str().unwrap())
        .collect();
    assert_eq!(workers, BTreeSet::from(["w1", "w2", "w3"]));
    assert!(outcomes.iter().all(|o| o["state"] == "ok"), "{outcomes:?}");

    // The parent's event log shows the remote agents under the root, with their turns,
    // streamed text and ends.
    let (root, _) = first_ids();
    let started = of_type(&events, "agent_started");
    let children: Vec<&str> = started
        .iter()
        .filter(|e| e["parent"] == root.as_str())
        .map(|e| e["agent"].as_str().unwrap())
        .collect();
    assert_eq!(children.len(), 3, "{started:?}");
    for child in &children {
        let mine = |kind: &str| {
            events
                .iter()
                .filter(|e| e["type"] == kind && e["agent"] == *child)
                .count()
        };
        assert_eq!(mine("turn_started"), 1, "{child}");
        assert!(mine("text_delta") >= 1, "{child}");
        assert_eq!(mine("agent_finished"), 1, "{child}");
    }
    assert!(stderr.contains("finished ok"), "{stderr}");
    // list_agents and await_agents (by a list of ids) see the remote children.
    let results: Vec<&Value> = of_type(&events, "tool_call_finished");
    let listed = results.iter().find(|e| e["tool"] == "list_agents").unwrap();
    assert_eq!(
        listed["summary"]
            .as_str()
            .unwrap()
            .matches("researcher")
            .count(),
        3,
        "{listed}"
    );
    let awaited = results
        .iter()
        .find(|e| e["tool"] == "await_agents")
        .unwrap();
    assert_eq!(awaited["outcome"], "ok");
    // Together they took about as long as one, not three.
    let ends: Vec<u64> = of_type(&events, "agent_finished")
        .iter()
        .filter(|e| children.contains(&e["agent"].as_str().unwrap()))
        .map(|e| e["duration_ms"].as_u64().unwrap())
        .collect();
    assert!(ends.iter().all(|d| *d >= 1500), "{ends:?}");
}

#[test]
fn a_node_bullmq_producer_gets_a_warren_workers_result() {
    let client = node_bullmq();
    let redis = Redis::start();
    let dir = world("", THREE_TOPICS);
    // Results are kept one second (BullMQ drops older ones as later jobs finish).
    edit_config(
        dir.path(),
        &[("attempts = 2", "attempts = 2\nkeep_results_s = 1")],
    );
    let _worker = Worker::start(dir.path(), &redis, "w1", 2);
    let node = |task: &str, profile: &str| -> Value {
        node_json(Command::new("node").arg(client.join("client.mjs")).args([
            &redis.url(),
            "warren",
            task,
            profile,
        ]))
    };
    let answer = node("topic two", "researcher");
    assert_eq!(answer["result"]["state"], "ok", "{answer}");
    assert_eq!(answer["result"]["text"], "two is done");
    assert_eq!(answer["result"]["worker"], "w1");
    assert_eq!(answer["result"]["turns"], 1);
    // Past keep_results_s, a finished job and its result leave Redis.
    let first = answer["id"].as_str().unwrap().to_string();
    let exists = |id: &str| -> bool {
        redis.query::<u32>(redis::cmd("EXISTS").arg(format!("bull:warren:{id}"))) == 1
    };
    assert!(exists(&first));
    std::thread::sleep(Duration::from_millis(2100));
    let later = node("topic one", "researcher");
    assert_eq!(later["result"]["text"], "one is done");
    assert!(!exists(&first), "job {first} outlived keep_results_s");
    assert!(exists(later["id"].as_str().unwrap()));
    // A profile the worker does not have fails the job at once, saying so.
    let refused = node("anything", "ghost");
    let reason = refused["failed"].as_str().unwrap();
    assert!(
        reason.contains("unknown profile `ghost` on worker w1 (it has: main, researcher)"),
        "{refused}"
    );
}

/// A Python with the official BullMQ package (pinned in
/// `tests/fixtures/bullmq-python/requirements.txt`), in a venv under `target/`, and the
/// fixture directory.
/// The Node BullMQ client fixture, its packages installed.
pub(crate) fn node_bullmq() -> PathBuf {
    let client = crate::support::root().join("tests/fixtures/bullmq-client");
    if !client.join("node_modules/bullmq").exists() {
        crate::guests::npm_ci(
            &client,
            "npm is needed for the BullMQ interop test: install Node.js and npm (scripts/install-deps does)",
        );
    }
    client
}

/// Runs a Node fixture script and reads the one JSON line it prints.
pub(crate) fn node_json(command: &mut Command) -> Value {
    let output = command
        .output()
        .expect("node is needed for the BullMQ interop test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

pub(crate) fn python_bullmq() -> (PathBuf, PathBuf) {
    static READY: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let fixture = crate::support::root().join("tests/fixtures/bullmq-python");
    let venv = crate::support::root().join("target/bullmq-python");
    let python = venv.join("bin/python");
    let mut ready = READY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !*ready && !python.exists() {
        let hint = "python3 with venv and pip is needed for the Python BullMQ tests (scripts/install-deps installs it)";
        let status = Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .status()
            .expect(hint);
        assert!(status.success(), "{hint}");
        let status = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "-r"])
            .arg(fixture.join("requirements.txt"))
            .status()
            .expect(hint);
        assert!(
            status.success(),
            "pip install -r {}/requirements.txt failed",
            fixture.display()
        );
    }
    *ready = true;
    (python, fixture)
}

/// A sub-agent job that a consumer other than warren completes with a value of its
/// own ends that sub-agent with an error saying so; the parent does not wait on.
#[test]
fn a_job_completed_by_a_foreign_worker_ends_its_sub_agent_with_an_error() {
    let (python, fixture) = python_bullmq();
    let redis = Redis::start();
    let script = one_child_script("foreign topic", 0, "never", "unused")
        + "[[turns]]\nprofile = \"main\"\nwhen = \"ERROR]\"\ntext = \"the child failed\"\n";
    let dir = world("", &script);
    let mut consumer = Command::new(&python)
        .arg(fixture.join("consumer.py"))
        .args([&redis.url(), "warren", "30"])
        .spawn()
        .unwrap();
    let started = Instant::now();
    let (code, stdout, stderr, events) = run_parent(dir.path(), &redis, "go");
    let _ = consumer.kill();
    let _ = consumer.wait();
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "the child failed");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let child_end = of_type(&events, "agent_finished")
        .into_iter()
        .find(|e| e["state"] == "error")
        .cloned()
        .unwrap_or_default();
    assert!(
        child_end["error"]
            .as_str()
            .unwrap_or_default()
            .contains("not a warren outcome"),
        "{events:?}"
    );
}

/// A producer written with the official Python BullMQ package, shaping jobs as a
/// Python service would: no `profile` (the worker's `[queue] default_profile`), extra
/// fields of its own (ignored, logged once each), and `attempts`: an agent that ends in
/// `error` fails the job with the reason, so the attempts apply.
#[test]
fn a_python_bullmq_producer_with_its_own_job_shape() {
    let (python, fixture) = python_bullmq();
    let redis = Redis::start();
    let dir = world("", THREE_TOPICS);
    edit_config(
        dir.path(),
        &[(
            "attempts = 2",
            "attempts = 2\ndefault_profile = \"researcher\"",
        )],
    );
    let worker = Worker::start(dir.path(), &redis, "w1", 2);
    let produce = |data: &str, attempts: &str| -> Value {
        let output = Command::new(&python)
            .arg(fixture.join("producer.py"))
            .args([&redis.url(), "warren", data, attempts])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(stdout.trim()).unwrap()
    };
    let done = produce(
        r#"{"task": "topic two", "submitted_by": "billing-service", "priority_hint": 3}"#,
        "1",
    );
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["result"]["state"], "ok");
    assert_eq!(done["result"]["text"], "two is done");
    let again = produce(
        r#"{"task": "topic one", "submitted_by": "billing-service"}"#,
        "1",
    );
    assert_eq!(again["result"]["text"], "one is done", "{again}");
    let log = worker.output();
    assert_eq!(
        log.matches("ignoring job-data field `submitted_by`")
            .count(),
        1,
        "{log}"
    );
    assert_eq!(
        log.matches("ignoring job-data field `priority_hint`")
            .count(),
        1,
        "{log}"
    );

    // No scripted turn for this task: the agent ends in error, the job fails with the
    // reason after both attempts, and stays in Redis (keep_failed_s: forever).
    let failed = produce(r#"{"task": "a task nobody scripted"}"#, "2");
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["attempts"], 2, "{failed}");
    assert!(
        failed["failed"]
            .as_str()
            .unwrap()
            .starts_with("agent ended error on worker w1: "),
        "{failed}"
    );
    let id = failed["id"].as_str().unwrap();
    assert_eq!(
        redis.query::<u32>(redis::cmd("EXISTS").arg(format!("bull:warren:{id}"))),
        1
    );
    // A tool subset the worker's profile cannot give is refused, as in-process.
    let refused = produce(r#"{"task": "topic three", "tools": ["write_file"]}"#, "2");
    assert_eq!(refused["state"], "failed", "{refused}");
    assert_eq!(refused["attempts"], 1, "unrecoverable: {refused}");
    assert!(
        refused["failed"]
            .as_str()
            .unwrap()
            .contains("tool `write_file` is not available to profile `researcher`"),
        "{refused}"
    );
}

#[test]
fn a_worker_killed_mid_job_loses_nothing() {
    let redis = Redis::start();
    // Long enough for a second worker to start (and load its plugins) on a busy machine.
    let script = &one_child_script("slow topic", 6000, "slow topic done", "got it");
    let dir = world("", script);
    let mut first = Worker::start(dir.path(), &redis, "first", 1);
    let parent = run_parent_in_background(
        dir.path(),
        &redis,
        &["--events", "events.jsonl", "--run-id", RUN_ID],
    );
    assert_eq!(redis.wait_active(Duration::from_secs(20)), "first");
    let _second = Worker::start(dir.path(), &redis, "second", 1);
    first.signal("-KILL");
    first.wait_exit(Duration::from_secs(5));

    let output = parent.join().unwrap();
    assert_eq!(succeeded(&output), "got it");
    let outcomes = redis.outcomes();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0]["worker"], "second");
    assert_eq!(outcomes[0]["text"], "slow topic done");
    // Delivered once: one end for the child in the parent's log.
    let events: Vec<Value> = std::fs::read_to_string(dir.path().join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (_, child) = first_ids();
    let ends: Vec<&Value> = of_type(&events, "agent_finished")
        .into_iter()
        .filter(|e| e["agent"] == child.as_str())
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["state"], "ok");
}

#[test]
fn a_retried_job_cancels_the_sub_agents_of_its_earlier_attempt() {
    let redis = Redis::start();
    // The researcher (on worker `first`) spawns a digger that runs on `second`; then
    // `first` dies. The researcher's retry on `second` spawns a new digger; the old
    // one, whose result nobody would read, must not keep running (and holding a slot).
    let script = r#"
[[turns]]
profile = "main"
tool_calls = [{ name = "spawn_agent", arguments = { profile = "researcher", task = "deep task", background = false } }]
[[turns]]
profile = "main"
when = "OK]"
text = "got it"
[[turns]]
profile = "researcher"
when = "deep task"
tool_calls = [{ name = "spawn_agent", arguments = { profile = "digger", task = "dig" } }]
[[turns]]
profile = "researcher"
when = "Started job"
tool_calls = [{ name = "await_agents", arguments = { job_ids = "*" } }]
[[turns]]
profile = "researcher"
when = "OK]"
text = "researched"
[[turns]]
profile = "digger"
when = "dig"
delay_ms = 60000
text = "never"
[[turns]]
profile = "digger"
when = "dig"
text = "dug"
"#;
    let dir = world("[profiles.digger]\ndescription = \"Digs\"\n", script);
    edit_config(
        dir.path(),
        &[("max_concurrent = 3", "max_concurrent = 3\nmax_depth = 2")],
    );
    // `--max-waiting 0`: the researcher waiting for its digger keeps first's one place.
    let mut first = Worker::start_with(dir.path(), &redis, "first", 1, &["--max-waiting", "0"]);
    let started = Instant::now();
    let parent = run_parent_in_background(dir.path(), &redis, &[]);
    assert_eq!(redis.wait_active(Duration::from_secs(20)), "first");
    // `first` has one slot, taken by the researcher: the digger waits for `second`.
    let _second = Worker::start(dir.path(), &redis, "second", 2);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let active = redis.active();
        if active.len() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the digger did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    first.signal("-KILL");
    first.wait_exit(Duration::from_secs(5));

    let output = parent.join().unwrap();
    assert_eq!(succeeded(&output), "got it");
    // Well before the first digger's minute was up.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let states = loop {
        let mut states: Vec<(String, String)> = redis
            .jobs()
            .into_iter()
            .filter_map(|(id, job)| {
                let data: Value = serde_json::from_str(&job["data"]).ok()?;
                let outcome = redis.outcome(&id, &job)?;
                Some((
                    data["profile"].as_str()?.to_string(),
                    outcome["state"].as_str()?.to_string(),
                ))
            })
            .collect();
        states.sort();
        if states.len() == 3 || Instant::now() > deadline {
            break states;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let expected = [
        ("digger", "cancelled"),
        ("digger", "ok"),
        ("researcher", "ok"),
    ];
    assert_eq!(
        states,
        expected.map(|(p, s)| (p.to_string(), s.to_string())),
    );
    let (researcher, _) = redis
        .jobs()
        .into_iter()
        .find(|(_, job)| job["data"].contains("deep task"))
        .unwrap();
    let logs: Vec<String> = redis.query(
        redis::cmd("LRANGE")
            .arg(format!("bull:warren:{researcher}:logs"))
            .arg(0)
            .arg(-1),
    );
    assert!(
        logs.iter()
            .any(|l| l == "worker second: cancelled 1 sub-agent job(s) of an earlier attempt"),
        "{logs:?}"
    );
}

#[test]
fn a_dead_parents_remote_jobs_are_cancelled() {
    let redis = Redis::start();
    let script = &one_child_script("endless topic", 60000, "never read", "");
    let dir = world("", script);
    edit_config(
        dir.path(),
        &[("attempts = 2", "attempts = 2\nparent_timeout_s = 2")],
    );
    let _worker = Worker::start(dir.path(), &redis, "w1", 1);
    let mut parent = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "go", "--redis", &redis.url(), "--quiet"])
        .current_dir(dir.path())
        .env_remove("WARREN_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(redis.wait_active(Duration::from_secs(20)), "w1");
    // A live parent renews its heartbeat: past parent_timeout_s the job still runs.
    std::thread::sleep(Duration::from_secs(3));
    assert!(redis.outcomes().is_empty(), "{:?}", redis.outcomes());
    let active = redis.active();
    assert_eq!(active.len(), 1);
    parent.kill().unwrap();
    parent.wait().unwrap();
    // Once its heartbeat expires, the worker cancels the job nobody will read.
    let outcomes = redis.wait_outcomes(1, Duration::from_secs(15));
    assert_eq!(
        outcomes.len(),
        1,
        "the job still runs after its parent died"
    );
    assert_eq!(outcomes[0]["state"], "cancelled", "{outcomes:?}");
    assert!(
        outcomes[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("cancelled: its parent process stopped renewing its heartbeat for 2 s"),
        "{outcomes:?}"
    );
}

#[test]
fn cancel_reaches_the_remote_job_and_its_descendants() {
    let redis = Redis::start();
    let (_, child) = first_ids();
    let script = format!(
        r#"
[[turns]]
profile = "main"
tool_calls = [{{ name = "spawn_agent", arguments = {{ profile = "researcher", task = "deep task" }} }}]
[[turns]]
profile = "main"
when = "Started job"
delay_ms = 3000
tool_calls = [{{ name = "cancel_agent", arguments = {{ job_id = "{child}" }} }}]
[[turns]]
profile = "main"
when = "Cancelled job"
tool_calls = [{{ name = "await_agents", arguments = {{ job_ids = "*" }} }}]
[[turns]]
profile = "main"
when = "CANCELLED]"
text = "stopped it"
[[turns]]
profile = "researcher"
when = "deep task"
tool_calls = [{{ name = "spawn_agent", arguments = {{ profile = "digger", task = "dig forever" }} }}]
[[turns]]
profile = "researcher"
when = "Started job"
tool_calls = [{{ name = "await_agents", arguments = {{ job_ids = "*" }} }}]
[[turns]]
profile = "digger"
when = "dig forever"
delay_ms = 60000
text = "never"
"#
    );
    let dir = world("[profiles.digger]\ndescription = \"Digs\"\n", &script);
    // Children of the remote researcher may spawn too.
    edit_config(
        dir.path(),
        &[("max_concurrent = 3", "max_concurrent = 3\nmax_depth = 2")],
    );
    let _workers = [
        Worker::start(dir.path(), &redis, "w1", 2),
        Worker::start(dir.path(), &redis, "w2", 2),
    ];
    let started = Instant::now();
    let (code, stdout, stderr, events) = run_parent(dir.path(), &redis, "go");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "stopped it");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    // Both the researcher and the digger it spawned on a worker ended cancelled.
    let outcomes = redis.wait_outcomes(2, Duration::from_secs(10));
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(
        outcomes.iter().all(|o| o["state"] == "cancelled"),
        "{outcomes:?}"
    );
    // The parent's log shows the remote grandchild too, under the child.
    let grandchild = of_type(&events, "agent_queued")
        .into_iter()
        .find(|e| e["parent"] == child.as_str())
        .unwrap_or_else(|| panic!("no grandchild in {events:?}"));
    assert_eq!(grandchild["profile"], "digger");
    let child_end = of_type(&events, "agent_finished")
        .into_iter()
        .find(|e| e["agent"] == child.as_str())
        .unwrap();
    assert_eq!(child_end["state"], "cancelled", "{child_end}");
}

#[test]
fn a_redis_restart_loses_no_result() {
    let mut redis = Redis::start();
    let script = &one_child_script("slow topic", 3000, "slow topic done", "survived");
    let dir = world("", script);
    let _worker = Worker::start(dir.path(), &redis, "w1", 1);
    let parent = run_parent_in_background(dir.path(), &redis, &[]);
    redis.wait_active(Duration::from_secs(20));
    redis.restart(Duration::from_millis(500));
    let output = parent.join().unwrap();
    assert_eq!(succeeded(&output), "survived");
    // The finished result is still there after another restart.
    redis.restart(Duration::ZERO);
    let outcomes = redis.outcomes();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0]["text"], "slow topic done");
}

#[test]
fn failing_jobs_end_failed_with_every_reason() {
    let redis = Redis::start();
    // The parent's configuration.
    let script = r#"
[[turns]]
profile = "main"
tool_calls = [
  { name = "spawn_agent", arguments = { profile = "researcher", task = "topic one" } },
  { name = "spawn_agent", arguments = { profile = "analyst", task = "numbers" } },
]
[[turns]]
profile = "main"
when = "Started job"
tool_calls = [{ name = "await_agents", arguments = { job_ids = "*" } }]
[[turns]]
profile = "main"
when = "ERROR]"
text = "both failed"
"#;
    let dir = world("[profiles.analyst]\ndescription = \"Counts\"\n", script);
    // The worker's: no model at all, and no `analyst` profile.
    let worker_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        worker_dir.path().join("warren.toml"),
        "[plugins]\ncache = false\n[queue]\nattempts = 2\n[profiles.main]\n[profiles.researcher]\n",
    )
    .unwrap();
    let _worker = Worker::start(worker_dir.path(), &redis, "bare", 2);
    let (code, stdout, stderr, events) = run_parent(dir.path(), &redis, "go");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "both failed");
    let errors: Vec<String> = of_type(&events, "agent_finished")
        .iter()
        .filter_map(|e| e["error"].as_str().map(str::to_string))
        .collect();
    let no_model = errors
        .iter()
        .find(|e| e.contains("has no model"))
        .unwrap_or_else(|| panic!("{errors:?}"));
    assert!(no_model.contains("failed after 2 attempt(s)"), "{no_model}");
    assert!(
        no_model.contains("attempt 1 on worker bare: profile `researcher` has no model"),
        "{no_model}"
    );
    assert!(no_model.contains("attempt 2 on worker bare"), "{no_model}");
    let unknown = errors
        .iter()
        .find(|e| e.contains("unknown profile"))
        .unwrap_or_else(|| panic!("{errors:?}"));
    assert!(
        unknown.contains("failed after 1 attempt(s): unknown profile `analyst` on worker bare (it has: main, researcher)"),
        "{unknown}"
    );
}

#[test]
fn a_stopping_worker_finishes_its_job_or_hands_it_back() {
    let redis = Redis::start();
    let script = &one_child_script("slow topic", 4000, "slow topic done", "done");
    // shutdown_grace_s = 1 is shorter than the job: the worker hands it back.
    let dir = world("", script);
    let mut leaving = Worker::start(dir.path(), &redis, "leaving", 1);
    let parent = run_parent_in_background(dir.path(), &redis, &[]);
    assert_eq!(redis.wait_active(Duration::from_secs(20)), "leaving");
    leaving.signal("-TERM");
    let status = leaving.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{}", leaving.output());
    let log = leaving.output();
    assert!(
        log.contains("letting 1 running job(s) finish (up to 1 s"),
        "{log}"
    );
    assert!(log.contains("handing 1 job(s) back to the queue"), "{log}");
    let _staying = Worker::start(dir.path(), &redis, "staying", 1);
    let output = parent.join().unwrap();
    succeeded(&output);
    let outcomes = redis.outcomes();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0]["worker"], "staying");

    // With time enough, a stopping worker finishes the job itself.
    edit_config(
        dir.path(),
        &[("shutdown_grace_s = 1", "shutdown_grace_s = 30")],
    );
    drop(_staying);
    let mut patient = Worker::start(dir.path(), &redis, "patient", 1);
    let parent = run_parent_in_background(dir.path(), &redis, &[]);
    assert_eq!(redis.wait_active(Duration::from_secs(20)), "patient");
    patient.signal("-TERM");
    assert!(
        patient.wait_exit(Duration::from_secs(20)).success(),
        "{}",
        patient.output()
    );
    let output = parent.join().unwrap();
    succeeded(&output);
    let by_patient = redis
        .outcomes()
        .into_iter()
        .filter(|o| o["worker"] == "patient")
        .count();
    assert_eq!(by_patient, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agents_spans_join_the_parents_trace() {
    use crate::fake_llm::{FakeLlm, Reply};
    // The fake LLM server doubles as the OTLP/HTTP receiver of both processes.
    let receiver = FakeLlm::start().await;
    for _ in 0..100 {
        receiver.push(Reply::json(serde_json::json!({})));
    }
    let endpoint = receiver.base_url.trim_end_matches("/v1").to_string();
    let redis = Redis::start();
    let script = &one_child_script("topic one", 0, "one is done", "traced");
    let dir = world("", script);
    let mut worker =
        Worker::start_with(dir.path(), &redis, "w1", 1, &["--otlp-endpoint", &endpoint]);
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args([
            "run",
            "go",
            "--quiet",
            "--redis",
            &redis.url(),
            "--otlp-endpoint",
            &endpoint,
        ])
        .current_dir(dir.path())
        .env_remove("WARREN_CONFIG")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A stopping worker sends its last spans.
    worker.signal("-TERM");
    tokio::task::block_in_place(|| worker.wait_exit(Duration::from_secs(20)));
    let spans = receiver.otlp_spans();
    let named =
        |name: &str| -> Vec<&Value> { spans.iter().filter(|s| s["name"] == name).collect() };
    let spawn = named("execute_tool spawn_agent");
    let remote = named("invoke_agent researcher");
    assert_eq!((spawn.len(), remote.len()), (1, 1), "{spans:#?}");
    assert_eq!(remote[0]["traceId"], spawn[0]["traceId"]);
    assert_eq!(remote[0]["parentSpanId"], spawn[0]["spanId"]);
    // The remote agent's own model call nests under it, in the same trace.
    let chats: Vec<&Value> = named("chat scripted")
        .into_iter()
        .filter(|c| c["parentSpanId"] == remote[0]["spanId"])
        .collect();
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0]["traceId"], spawn[0]["traceId"]);
}

#[test]
fn bad_queue_arguments_are_named() {
    let dir = world("", THREE_TOPICS);
    let warren = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("WARREN_CONFIG")
            .env_remove("WARREN_REDIS")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = warren(&["worker"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("warren worker needs a queue: pass --redis URL"),
        "{stderr}"
    );
    let (code, stderr) = warren(&["run", "go", "--redis", "http://example.com"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--redis: expected redis://"), "{stderr}");
    let (code, stderr) = warren(&["worker", "--redis", "redis://127.0.0.1:1", "--queue", "a:b"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--queue: use letters"), "{stderr}");
    // Nobody listens on port 1: a prompt, clear failure (the password stays hidden).
    let started = Instant::now();
    let (code, stderr) = warren(&["worker", "--redis", "redis://:hunter2@127.0.0.1:1"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("cannot connect to queue `warren` at redis://***@127.0.0.1:1"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn remote_agents_share_the_runs_budget() {
    let redis = Redis::start();
    // Three remote researchers; each turn takes two seconds and costs $0.004 (4000
    // input tokens at $1/Mtok). The run's budget of $0.01 is gone after the first
    // turn of all three: the parent, charging each remote turn as its events come,
    // stops them. (Each worker alone sees only its own child's spend and would let
    // it run three turns: $0.036 in all.)
    let mut script = String::from(
        r#"
[[turns]]
profile = "main"
usage = { input_tokens = 0, output_tokens = 0 }
tool_calls = [
  { name = "spawn_agent", arguments = { profile = "researcher", task = "costly one" } },
  { name = "spawn_agent", arguments = { profile = "researcher", task = "costly two" } },
  { name = "spawn_agent", arguments = { profile = "researcher", task = "costly three" } },
]
[[turns]]
profile = "main"
when = "Started job"
usage = { input_tokens = 0, output_tokens = 0 }
tool_calls = [{ name = "await_agents", arguments = { job_ids = "*" } }]
"#,
    );
    for _ in 0..12 {
        script.push_str(
            r#"
[[turns]]
profile = "researcher"
delay_ms = 2000
usage = { input_tokens = 4000, output_tokens = 0 }
tool_calls = [{ name = "list_agents", arguments = {} }]
"#,
        );
    }
    let dir = world("", &script);
    edit_config(
        dir.path(),
        &[
            (
                "script = \"script.toml\"",
                "script = \"script.toml\"\nprice = { input_per_mtok = 1.0, output_per_mtok = 1.0 }",
            ),
            (
                "max_concurrent = 3",
                "max_concurrent = 3\nmax_depth = 2\nbudget_usd = 0.01",
            ),
        ],
    );
    let _workers = [
        Worker::start(dir.path(), &redis, "w1", 3),
        Worker::start(dir.path(), &redis, "w2", 3),
    ];
    let (code, stdout, stderr, events) = run_parent(dir.path(), &redis, "go");
    // The root's own next turn is refused too: the run ends over budget.
    assert_ne!(code, Some(0), "{stdout}\n{stderr}");
    let children = ids(4)[1..].to_vec();
    for child in &children {
        let end = of_type(&events, "agent_finished")
            .into_iter()
            .find(|e| e["agent"] == child.as_str())
            .unwrap_or_else(|| panic!("no end of {child} in {events:?}"));
        assert_eq!(end["state"], "budget_exceeded", "{end}");
        assert!(
            end["error"]
                .as_str()
                .unwrap()
                .starts_with("the run's budget of $0.0100 is used up (spent $0.01"),
            "{end}"
        );
    }
    // What the workers spent, from the jobs' return values: the first turn of each
    // (3 × $0.004), not three turns of each.
    let outcomes = redis.wait_outcomes(3, Duration::from_secs(10));
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    let spent: f64 = outcomes
        .iter()
        .map(|o| o["cost_usd"].as_f64().unwrap())
        .sum();
    assert!(spent < 0.02, "the workers spent ${spent:.4}: {outcomes:?}");
    // The parent's total is what the workers spent, counted once.
    let total = format!("total cost ${spent:.4}");
    assert!(
        stdout.contains(&total) || stderr.contains(&total),
        "expected `{total}`:\n{stdout}\n{stderr}"
    );
}

#[test]
fn the_queue_comes_from_config_or_environment_too() {
    let redis = Redis::start();
    let mut script = one_child_script("topic one", 0, "one is done", "from the queue");
    script.push_str(
        "[[turns]]\nprofile = \"researcher\"\nwhen = \"topic one\"\ntext = \"one again\"\n",
    );
    let dir = world("", &script);
    let _worker = Worker::start(dir.path(), &redis, "w1", 1);
    let run = |env: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_warren"));
        command
            .args(["run", "go", "--quiet"])
            .current_dir(dir.path())
            .env_remove("WARREN_CONFIG")
            .env_remove("WARREN_REDIS");
        if let Some(url) = env {
            command.env("WARREN_REDIS", url);
        }
        command.output().unwrap()
    };
    // `WARREN_REDIS` stands in for --redis.
    assert_eq!(succeeded(&run(Some(&redis.url()))), "from the queue");
    // So does `[queue] redis` in warren.toml.
    edit_config(
        dir.path(),
        &[(
            "[queue]\n",
            &format!("[queue]\nredis = {:?}\n", redis.url()),
        )],
    );
    assert_eq!(succeeded(&run(None)), "from the queue");
    // Both children ran on the worker, not in-process.
    let outcomes = redis.wait_outcomes(2, Duration::from_secs(10));
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(outcomes.iter().all(|o| o["worker"] == "w1"), "{outcomes:?}");
}

#[test]
fn a_worker_needs_no_profiles_and_a_child_keeps_its_parents_tools_and_failures_their_retention() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    // The parent: its root may only read; `analyst` is a profile no worker has.
    std::fs::write(
        dir.path().join("warren.toml"),
        r#"[plugins]
cache = false

[models.scripted]
provider = "scripted"
script = "script.toml"

[queue]
keep_failed_s = 7
attempts = 1

[profiles.main]
tools = ["read_file"]

[profiles.analyst]
description = "Counts"
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("script.toml"),
        r#"
[[turns]]
profile = "main"
tool_calls = [
  { name = "spawn_agent", arguments = { task = "plain child" } },
  { name = "spawn_agent", arguments = { profile = "analyst", task = "numbers" } },
]
[[turns]]
profile = "main"
when = "Started job"
tool_calls = [{ name = "await_agents", arguments = { job_ids = "*" } }]
[[turns]]
profile = "main"
when = "child done"
text = "parent done"
"#,
    )
    .unwrap();
    // The worker: no [profiles] at all; jobs naming none run under `main`.
    let worker_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        worker_dir.path().join("warren.toml"),
        "[plugins]\ncache = false\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n[queue]\ndefault_profile = \"main\"\n",
    )
    .unwrap();
    std::fs::write(
        worker_dir.path().join("script.toml"),
        "[[turns]]\nprofile = \"main\"\ntext = \"child done\"\n",
    )
    .unwrap();
    let _worker = Worker::start(worker_dir.path(), &redis, "plain", 2);
    let (code, stdout, stderr, _) = run_parent(dir.path(), &redis, "go");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "parent done");

    let jobs = redis.jobs();
    let data = |fields: &std::collections::HashMap<String, String>| -> Value {
        serde_json::from_str(&fields["data"]).unwrap()
    };
    let (_, child) = jobs
        .iter()
        .find(|(_, f)| data(f)["task"] == "plain child")
        .expect("the child's job");
    // Under its parent's profile, on a worker as here: exactly the parent's tools.
    assert_eq!(data(child)["tools"], serde_json::json!(["read_file"]));
    assert!(child.contains_key("returnvalue"), "{child:?}");
    let (_, failed) = jobs
        .iter()
        .find(|(_, f)| data(f)["task"] == "numbers")
        .expect("the analyst's job");
    assert!(
        failed["failedReason"].contains("unknown profile"),
        "{failed:?}"
    );
    let opts: Value = serde_json::from_str(&failed["opts"]).unwrap();
    assert_eq!(opts["removeOnFail"]["age"], 7, "{opts}");
}

#[test]
fn an_unknown_default_profile_is_a_config_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("warren.toml"),
        "[plugins]\ncache = false\n[queue]\nredis = \"redis://127.0.0.1:1\"\ndefault_profile = \"reviewer\"\n[profiles.coder]\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["worker"])
        .current_dir(dir.path())
        .env_remove("WARREN_CONFIG")
        .env_remove("WARREN_REDIS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("warren.toml:5")
            && stderr.contains("queue.default_profile")
            && stderr.contains("no profile `reviewer` (defined: main, coder)"),
        "{stderr}"
    );
}

/// `model: inherit` on a worker: a child whose agent file says so runs on its
/// parent's model, as it does in the parent's process, though the worker's default
/// model is another; a worker without that model fails the job (retried, as another
/// worker may have it), naming the model and the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inheriting_child_runs_on_its_parents_model_on_a_worker() {
    use crate::fake_llm::{FakeLlm, Reply};
    let spawn_heir = || {
        Reply::tool_calls(
            &[(
                "spawn_agent",
                serde_json::json!({"profile": "heir", "task": "CHILD", "background": false}),
            )],
            (1, 1),
        )
    };
    // `[models]` entries named as in the config, each its own model id at `server`.
    let models = |server: &FakeLlm, names: &[&str]| -> String {
        names
            .iter()
            .map(|name| {
                format!(
                    "[models.{name}]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"{name}-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n",
                    server.base_url
                )
            })
            .collect()
    };
    // A directory with `warren.toml` (short queue timings, then `config`) and the
    // agent file of `heir`.
    let project = |config: String| {
        let dir = tempfile::tempdir().unwrap();
        let queue = "[plugins]\ncache = false\nbuiltins = false\n[queue]\nlock_ms = 1000\nstalled_interval_ms = 500\nattempts = 2\nshutdown_grace_s = 1\n";
        std::fs::write(dir.path().join("warren.toml"), format!("{queue}{config}")).unwrap();
        std::fs::create_dir(dir.path().join("agents")).unwrap();
        std::fs::write(
            dir.path().join("agents/heir.md"),
            "---\nname: heir\nmodel: inherit\ntools: []\n---\nInherit.\n",
        )
        .unwrap();
        dir
    };
    let parent_config = |server: &FakeLlm| {
        format!(
            "{}[profiles.main]\nmodel = \"lead\"\n",
            models(server, &["lead", "other"])
        )
    };

    // A worker with both models, `other` its default: the child runs on `lead`.
    let server = FakeLlm::start().await;
    server.route("ROOT", spawn_heir());
    server.route("CHILD", Reply::answer("child done", (1, 1)));
    server.route("child done", Reply::answer("root done", (1, 1)));
    let redis = Redis::start();
    let parent = project(parent_config(&server));
    let worker_dir = project(format!(
        "{}[defaults]\nmodel = \"other\"\n",
        models(&server, &["lead", "other"])
    ));
    let _worker = Worker::start(worker_dir.path(), &redis, "both", 1);
    let (code, stdout, stderr, _) =
        tokio::task::block_in_place(|| run_parent(parent.path(), &redis, "ROOT"));
    assert_eq!((code, stdout.trim()), (Some(0), "root done"), "{stderr}");
    let child: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r.body["messages"][0]["content"] == "Inherit.")
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(child, ["lead-model"], "the child's model requests");
    let job = redis
        .jobs()
        .into_iter()
        .map(|(_, fields)| serde_json::from_str::<Value>(&fields["data"]).unwrap())
        .find(|data| data["profile"] == "heir")
        .expect("the child's job");
    assert_eq!(job["model"], "lead");

    // A worker with only `other`: the job fails, naming the model and the worker.
    let server = FakeLlm::start().await;
    server.route("ROOT", spawn_heir());
    server.push(Reply::answer("root done", (1, 1)));
    let redis = Redis::start();
    let parent = project(parent_config(&server));
    let worker_dir = project(models(&server, &["other"]));
    let _worker = Worker::start(worker_dir.path(), &redis, "lacking", 1);
    let (code, _, stderr, events) =
        tokio::task::block_in_place(|| run_parent(parent.path(), &redis, "ROOT"));
    assert_eq!(code, Some(0), "{stderr}");
    let error = of_type(&events, "agent_finished")
        .into_iter()
        .find_map(|e| e["error"].as_str().filter(|e| e.contains("inherit")))
        .unwrap_or_else(|| panic!("{events:?}"))
        .to_string();
    assert!(
        error.contains("failed after 2 attempt(s)")
            && error.contains("model `lead` (inherited from the parent's profile: `model: inherit`) is not under [models] on worker lacking (it has: other)"),
        "{error}"
    );
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.body["messages"][0]["content"] == "Inherit."),
        "the child never ran on another model"
    );
}

/// A child spawned with no profile runs as its parent, on its parent's model: on a
/// worker as in the parent's process, where the parent runs on `--model lead` and the
/// worker's `main` names `other`. And a `[profiles]` table's `model = "inherit"` means
/// what an agent file's does: its children run on their parent's model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_follows_its_parents_model_on_a_worker_as_in_process() {
    use crate::fake_llm::{FakeLlm, Reply};
    let server = FakeLlm::start().await;
    server.route(
        "ROOT",
        Reply::tool_calls(
            &[(
                "spawn_agent",
                serde_json::json!({"task": "AS-PARENT", "background": false}),
            )],
            (1, 1),
        ),
    );
    server.route("AS-PARENT", Reply::answer("as parent done", (1, 1)));
    server.route(
        "as parent done",
        Reply::tool_calls(
            &[(
                "spawn_agent",
                serde_json::json!({"profile": "heir", "task": "HEIR-TASK", "background": false}),
            )],
            (1, 1),
        ),
    );
    server.route("HEIR-TASK", Reply::answer("heir done", (1, 1)));
    server.route("heir done", Reply::answer("root done", (1, 1)));
    let models: String = ["lead", "other"]
        .iter()
        .map(|name| {
            format!(
                "[models.{name}]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"{name}-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n",
                server.base_url
            )
        })
        .collect();
    let config = format!(
        "[plugins]\ncache = false\nbuiltins = false\n[queue]\nlock_ms = 1000\nstalled_interval_ms = 500\n{models}[profiles.main]\nmodel = \"other\"\ntools = []\n[profiles.heir]\nmodel = \"inherit\"\ntools = []\nsystem_prompt = \"Heir.\"\n"
    );
    let output = run_with_one_worker(&config, &["run", "ROOT", "--model", "lead", "-q"]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "root done",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let model_of = |marker: &str| -> Vec<Value> {
        server
            .requests()
            .into_iter()
            .filter(|r| {
                r.body["messages"]
                    .as_array()
                    .and_then(|m| m.iter().find(|m| m["role"] == "user"))
                    .and_then(|m| m["content"].as_str())
                    .is_some_and(|task| task.starts_with(marker))
            })
            .map(|r| r.body["model"].clone())
            .collect()
    };
    assert_eq!(model_of("ROOT"), ["lead-model", "lead-model", "lead-model"]);
    assert_eq!(
        model_of("AS-PARENT"),
        ["lead-model"],
        "the child with no profile"
    );
    assert_eq!(
        model_of("HEIR-TASK"),
        ["lead-model"],
        "the `model = \"inherit\"` child"
    );
}

/// A job larger than `MAX_JOB_DATA_BYTES` (a producer's 8 MiB task): the worker fails
/// it at once, unrecoverably (one attempt of three), naming the limit, without running
/// an agent on it; the next job is served.
#[test]
fn a_job_over_the_size_limit_fails_at_once_and_the_next_is_served() {
    let redis = Redis::start();
    let worker_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        worker_dir.path().join("warren.toml"),
        "[plugins]\ncache = false\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n[profiles.main]\n",
    )
    .unwrap();
    std::fs::write(
        worker_dir.path().join("script.toml"),
        "[[turns]]\nprofile = \"main\"\ntext = \"small done\"\n",
    )
    .unwrap();
    let worker = Worker::start(worker_dir.path(), &redis, "sized", 1);
    let huge = "x".repeat(2 * MAX_JOB_DATA_BYTES);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let queue = bullmq::Queue::with_options(
            "warren",
            bullmq::QueueOptions {
                connection: bullmq::options::RedisConnectionOptions {
                    url: redis.url(),
                    ..Default::default()
                },
                ..bullmq::QueueOptions::default()
            },
        )
        .await
        .unwrap();
        for (id, task) in [("huge", huge.as_str()), ("small", "a small task")] {
            queue
                .add(
                    "agent",
                    serde_json::json!({"task": task, "profile": "main"}),
                )
                .options(bullmq::JobOptions {
                    job_id: Some(id.into()),
                    attempts: Some(3),
                    ..bullmq::JobOptions::default()
                })
                .await
                .unwrap();
        }
    });
    let outcomes = redis.wait_outcomes(1, Duration::from_secs(30));
    assert_eq!(outcomes.len(), 1, "{}", worker.output());
    assert_eq!(outcomes[0]["text"], "small done", "{}", outcomes[0]);
    let jobs = redis.jobs();
    let (_, failed) = jobs.iter().find(|(id, _)| id == "huge").unwrap();
    assert!(
        failed["failedReason"].contains(&format!(
            "the job's data is more than {} bytes of JSON (MAX_JOB_DATA_BYTES)",
            MAX_JOB_DATA_BYTES
        )),
        "{:?}",
        failed.get("failedReason")
    );
    assert_eq!(failed["atm"], "1", "not retried");
}

/// A parent's message reaches its child on a worker: an interrupt cuts the child's
/// waiting model request there, the message is its next input, and its sender is
/// told when it was read, as for a child run in process.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_reaches_a_child_running_on_a_worker() {
    use crate::fake_llm::{FakeLlm, Reply};
    use serde_json::json;
    let server = FakeLlm::start().await;
    server.route(
        "ROOT",
        Reply::tool_calls(
            &[(
                "spawn_agent",
                json!({"profile": "helper", "task": "REMOTE-TASK"}),
            )],
            (1, 1),
        ),
    );
    server.route("REMOTE-TASK", Reply::Hang);
    server.route("REMOTE-NOTE", Reply::answer("REMOTE-HEARD", (1, 1)));
    let hangs = server.hangs.clone();
    server.respond_with(std::sync::Arc::new(move |body: &Value| {
        let newest = body["messages"].as_array()?.last()?.to_string();
        // Started, or queued for a worker.
        if let Some(rest) = newest.split(" job ").nth(1).filter(|_| newest.contains("ed job ")) {
            let id = rest.split(|c: char| !c.is_ascii_hexdigit()).next()?;
            let message = json!({"job_id": id, "message": "REMOTE-NOTE: stop and report", "mode": "interrupt"});
            // Sent once the child's request hangs on its worker.
            return Some(Reply::Gated(
                hangs.clone(),
                Box::new(Reply::tool_calls(&[("message_agent", message)], (1, 1))),
            ));
        }
        if newest.contains("is being cut") {
            return Some(Reply::tool_calls(
                &[("await_agents", json!({"job_ids": "*"}))],
                (1, 1),
            ));
        }
        // The child's answer, then (or with it) the receipt of its reading.
        if body["messages"].to_string().contains("REMOTE-HEARD") {
            return Some(Reply::answer("root done", (1, 1)));
        }
        None
    }));
    let config = format!(
        "[plugins]\ncache = false\nbuiltins = false\n[queue]\nlock_ms = 1000\nstalled_interval_ms = 500\n[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n[profiles.main]\ntools = []\n[profiles.helper]\ntools = []\nsystem_prompt = \"Helper.\"\n",
        server.base_url
    );
    let output = run_with_one_worker(&config, &["run", "ROOT", "-q"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "root done",
        "{stderr}"
    );
    assert!(
        server
            .hang_dropped
            .load(std::sync::atomic::Ordering::SeqCst),
        "the worker's hanging request was not cut"
    );
    let read: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| {
            let messages = r.body["messages"].as_array().cloned().unwrap_or_default();
            messages
                .last()
                .is_some_and(|m| m.to_string().contains("REMOTE-NOTE"))
        })
        .collect();
    assert_eq!(read.len(), 1, "{stderr}");
    let note = read[0].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        note.contains("mode=\\\"interrupt\\\"") && note.contains("from=\\\"main["),
        "{note}"
    );
    // The root was told its message was read, in the worker's turn 2.
    let told = server.requests().iter().any(|r| {
        r.body
            .to_string()
            .contains("was delivered: it is in the request of its turn 2")
    });
    assert!(told, "{stderr}");
}

/// A follow-up to a child that finished on a worker runs it again on a worker, with
/// its whole history and on its own model (not its parent's), and its parent gets
/// its new result as it got the first; its sender is told when it was read.
#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_resumes_a_child_that_finished_on_a_worker_with_its_history() {
    use crate::fake_llm::{FakeLlm, Reply};
    use serde_json::json;
    let server = FakeLlm::start().await;
    server.route(
        "ROOT",
        Reply::tool_calls(
            &[(
                "spawn_agent",
                json!({"profile": "helper", "task": "REMOTE-TASK", "background": false}),
            )],
            (1, 1),
        ),
    );
    server.route("REMOTE-TASK", Reply::answer("FIRST-ANSWER", (1, 1)));
    server.route("FOLLOW-TEXT", Reply::answer("SECOND-ANSWER", (1, 1)));
    server.respond_with(std::sync::Arc::new(move |body: &Value| {
        let newest = body["messages"].as_array()?.last()?.to_string();
        // The await's result may be followed by the receipt of the follow-up.
        if body["messages"].to_string().contains("SECOND-ANSWER") {
            return Some(Reply::answer("ROOT-DONE", (1, 1)));
        }
        if newest.contains("FIRST-ANSWER") {
            let id = crate::messages::finished_job(body)?;
            let follow = json!({"job_id": id, "message": "FOLLOW-TEXT: and the tests?", "mode": "follow_up"});
            return Some(Reply::tool_calls(&[("message_agent", follow)], (1, 1)));
        }
        if let Some(rest) = newest.split("resumed job ").nth(1) {
            let id = rest.split(|c: char| !c.is_ascii_hexdigit()).next()?;
            return Some(Reply::tool_calls(
                &[("await_agents", json!({"job_ids": [id]}))],
                (1, 1),
            ));
        }
        None
    }));
    let config = format!(
        "[plugins]\ncache = false\nbuiltins = false\n[queue]\nlock_ms = 1000\nstalled_interval_ms = 500\n[models.fake]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"fake-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n[models.small]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"small-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n[profiles.main]\ntools = []\nmodel = \"fake\"\n[profiles.helper]\ntools = []\nmodel = \"small\"\nsystem_prompt = \"Helper.\"\n",
        url = server.base_url
    );
    let output = run_with_one_worker(&config, &["run", "ROOT", "-q"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "ROOT-DONE",
        "{stderr}"
    );
    // The follow-up's request, made on the worker: the child's whole history, then
    // the follow-up, marked, on the child's own model.
    let resumed: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.body["messages"].to_string().contains("FOLLOW-TEXT"))
        .filter(|r| r.body["model"] == "small-model")
        .collect();
    assert_eq!(resumed.len(), 1, "{stderr}");
    let history = resumed[0].body["messages"].to_string();
    let task = history.find("REMOTE-TASK").expect("its task");
    let answer = history.find("FIRST-ANSWER").expect("its first answer");
    let follow = history
        .find("mode=\\\"follow_up\\\"")
        .expect("the follow-up, marked");
    assert!(task < answer && answer < follow, "{history}");
    assert!(
        history.contains("Helper."),
        "its own system prompt: {history}"
    );
    // The root got the receipt, then the new result through its await, counting
    // both of the child's turns; it was told the follow-up was read in turn 2.
    let last = server.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("SECOND-ANSWER") && last.contains("2 turns"),
        "{last}"
    );
    assert!(
        last.contains("was delivered: it is in the request of its turn 2"),
        "{last}"
    );
    assert_eq!(server.requests()[0].body["model"], "fake-model");
}

/// A person's message to a sub-agent of a child that runs on a worker (the child
/// spawned it there) reaches it: `warren send` leaves it in the parent's run, which
/// forwards it to the child's worker; the child's run passes it on to the grandchild's
/// job, whose worker delivers it. The interrupt cuts the grandchild's hanging model
/// request, and the message is its next input.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_reaches_a_sub_agent_of_a_child_on_a_worker() {
    use crate::fake_llm::{FakeLlm, Reply};
    use serde_json::json;
    let server = FakeLlm::start().await;
    let spawn = |task: &str| {
        Reply::tool_calls(
            &[(
                "spawn_agent",
                json!({"profile": "helper", "task": task, "background": false}),
            )],
            (1, 1),
        )
    };
    // The parent runs `go`.
    server.route("go", spawn("MID-TASK"));
    server.route("MID-TASK", spawn("LEAF-TASK"));
    server.route("LEAF-TASK", Reply::Hang);
    server.route("LEAF-NOTE", Reply::answer("LEAF-HEARD", (1, 1)));
    server.respond_with(std::sync::Arc::new(|body: &Value| {
        let newest = body["messages"].as_array()?.last()?.to_string();
        if newest.contains("LEAF-HEARD") {
            return Some(Reply::answer("MID-DONE", (1, 1)));
        }
        newest
            .contains("MID-DONE")
            .then(|| Reply::answer("ROOT-DONE", (1, 1)))
    }));
    let config = format!(
        "[plugins]\ncache = false\nbuiltins = false\n[defaults]\nmax_depth = 3\ntimeout_s = 30\n[queue]\nlock_ms = 1000\nstalled_interval_ms = 500\n[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n[profiles.main]\ntools = []\n[profiles.helper]\ntools = []\nsystem_prompt = \"Helper.\"\n",
        server.base_url
    );
    let (parent, worker_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for dir in [&parent, &worker_dir] {
        std::fs::write(dir.path().join("warren.toml"), &config).unwrap();
    }
    let redis = Redis::start();
    let _worker = Worker::start(worker_dir.path(), &redis, "w1", 2);
    let run = run_parent_in_background(parent.path(), &redis, &["--run-id", RUN_ID]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server
        .requests()
        .iter()
        .any(|r| crate::fake_llm::newest(&r.body).contains("LEAF-TASK"))
    {
        assert!(
            Instant::now() < deadline,
            "the grandchild never asked its model"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The grandchild, as the parent's run knows it once its worker's events came
    // through the child's: the third agent its journal registers.
    let journal = parent
        .path()
        .join(format!(".warren/runs/{RUN_ID}/journal.jsonl"));
    let leaf = loop {
        let queued: Vec<String> = std::fs::read_to_string(&journal)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|record| record["type"] == "agent_queued")
            .filter_map(|record| record["agent"].as_str().map(str::to_string))
            .collect();
        if let Some(leaf) = queued.get(2) {
            break leaf.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the parent never saw the grandchild"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let sent = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args([
            "send",
            RUN_ID,
            &leaf,
            "LEAF-NOTE: stop and report",
            "--mode",
            "interrupt",
        ])
        .current_dir(parent.path())
        .env_remove("WARREN_CONFIG")
        .output()
        .unwrap();
    let receipt = String::from_utf8_lossy(&sent.stdout).to_string();
    assert!(
        sent.status.success() && receipt.contains("queued"),
        "{receipt}{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let output = tokio::task::block_in_place(|| run.join().unwrap());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "ROOT-DONE",
        "{stderr}"
    );
    assert!(
        server
            .hang_dropped
            .load(std::sync::atomic::Ordering::SeqCst),
        "the grandchild's hanging request was not cut"
    );
    let read: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| crate::fake_llm::newest(&r.body).contains("LEAF-NOTE"))
        .collect();
    assert_eq!(read.len(), 1, "{stderr}");
    let note = read[0].body["messages"].to_string();
    assert!(
        note.contains("LEAF-TASK"),
        "the grandchild's own request: {note}"
    );
    assert!(
        note.contains("mode=\\\"interrupt\\\"") && note.contains("(a person)"),
        "{note}"
    );
}

/// A follow-up under way on a worker when its parent process is SIGKILLed is not
/// lost: `warren resume` re-attaches to the child's first job and then to its
/// follow-up's job (neither run again), and the root gets the follow-up's answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_on_a_worker_survives_a_sigkill_of_its_parent() {
    use crate::fake_llm::{FakeLlm, Reply};
    use serde_json::json;
    let server = FakeLlm::start().await;
    server.route(
        "go",
        Reply::tool_calls(
            &[(
                "spawn_agent",
                json!({"profile": "helper", "task": "REMOTE-TASK", "background": false}),
            )],
            (1, 1),
        ),
    );
    server.route("REMOTE-TASK", Reply::answer("FIRST-ANSWER", (1, 1)));
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    server.route(
        "FOLLOW-TEXT",
        Reply::Gated(
            gate.clone(),
            Box::new(Reply::answer("SECOND-ANSWER", (1, 1))),
        ),
    );
    server.respond_with(std::sync::Arc::new(move |body: &Value| {
        let newest = body["messages"].as_array()?.last()?.to_string();
        if body["messages"].to_string().contains("SECOND-ANSWER") {
            return Some(Reply::answer("ROOT-DONE", (1, 1)));
        }
        if newest.contains("FIRST-ANSWER") {
            let id = crate::messages::finished_job(body)?;
            let follow = json!({"job_id": id, "message": "FOLLOW-TEXT: and the tests?", "mode": "follow_up"});
            return Some(Reply::tool_calls(&[("message_agent", follow)], (1, 1)));
        }
        let rest = newest.split("resumed job ").nth(1)?;
        let id = rest.split(|c: char| !c.is_ascii_hexdigit()).next()?;
        Some(Reply::tool_calls(
            &[("await_agents", json!({"job_ids": [id]}))],
            (1, 1),
        ))
    }));
    let config = format!(
        "[plugins]\ncache = false\nbuiltins = false\n[queue]\nlock_ms = 1000\nstalled_interval_ms = 500\nparent_timeout_s = 60\n[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n[profiles.main]\ntools = []\n[profiles.helper]\ntools = []\nsystem_prompt = \"Helper.\"\n",
        server.base_url
    );
    let (parent, worker_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for dir in [&parent, &worker_dir] {
        std::fs::write(dir.path().join("warren.toml"), &config).unwrap();
    }
    let redis = Redis::start();
    let _worker = Worker::start(worker_dir.path(), &redis, "w1", 2);
    let mut first = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args([
            "run",
            "go",
            "--redis",
            &redis.url(),
            "--run-id",
            RUN_ID,
            "-q",
        ])
        .current_dir(parent.path())
        .env_remove("WARREN_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the follow-up's job asks the worker's model (which waits).
    let deadline = Instant::now() + Duration::from_secs(30);
    let asked = |marker: &str| {
        server
            .requests()
            .iter()
            .filter(|r| crate::fake_llm::newest(&r.body).contains(marker))
            .count()
    };
    while asked("FOLLOW-TEXT") == 0 {
        assert!(
            Instant::now() < deadline,
            "the follow-up never reached the worker"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let resume = {
        let mut command = Command::new(env!("CARGO_BIN_EXE_warren"));
        command
            .args(["resume", RUN_ID, "--redis", &redis.url(), "-q"])
            .current_dir(parent.path())
            .env_remove("WARREN_CONFIG");
        std::thread::spawn(move || command.output().unwrap())
    };
    std::thread::sleep(Duration::from_millis(500));
    gate.add_permits(1);
    let output = tokio::task::block_in_place(|| resume.join().unwrap());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "ROOT-DONE",
        "{stderr}"
    );
    // Neither of the child's jobs ran again: one request for its task, one for the
    // follow-up; Redis holds both jobs, completed.
    assert_eq!(asked("REMOTE-TASK"), 1, "{stderr}");
    assert_eq!(asked("FOLLOW-TEXT"), 1, "{stderr}");
    // The resumed root did not have to send the follow-up again: it sends one
    // whenever it sees the child's first answer as its newest message.
    assert_eq!(asked("FIRST-ANSWER"), 1, "{stderr}");
    let jobs = redis.jobs();
    let names: Vec<&String> = jobs.iter().map(|j| &j.0).collect();
    assert_eq!(jobs.len(), 2, "{names:?}");
    assert!(names.iter().any(|n| n.ends_with("-f1")), "{names:?}");
}
