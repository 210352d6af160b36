//! The queue at the sizes people run: a tree of 10,101 agents (a root, 100 children,
//! 100 grandchildren each) on two `warren worker`s of the default width, through a
//! real `redis-server`, against the scripted model.

use std::process::Command;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::queue::{Redis, Worker};
use crate::tree_script::{tree_script, tree_script_with};

/// `warren.toml` of the tree: profiles `main`, `lead`, `leaf`, the scripted model,
/// and `queue` (a `[queue]` table's keys, if any).
fn write_config(dir: &Path, queue: &str) {
    std::fs::write(
        dir.join("warren.toml"),
        format!(
            "[plugins]\nbuiltins = false\n\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
             [defaults]\nmax_concurrent = 256\nmax_concurrent_total = 4096\nmax_depth = 2\ntimeout_s = 240\n\n\
             [queue]\n{queue}\n\n[profiles.main]\ntools = []\n[profiles.lead]\ntools = []\n[profiles.leaf]\ntools = []\n"
        ),
    )
    .unwrap();
}

/// `warren ARGS` in `dir`.
fn warren(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(args)
        .current_dir(dir)
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// `warren show RUN`: its header line and how many agents it shows ended ok.
fn shown(dir: &Path, run: &str) -> (String, usize) {
    let show = warren(dir, &["show", run]);
    assert!(
        show.status.success(),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    let shown = String::from_utf8_lossy(&show.stdout).into_owned();
    let ok = shown
        .lines()
        .filter(|l| l.trim_start().starts_with("✓ "))
        .count();
    (shown.lines().next().unwrap_or_default().to_string(), ok)
}

/// Polls Redis every 20 ms until `ready` holds for the count of completed jobs; fails
/// with `failure` after a minute.
fn wait_until(redis: &Redis, failure: &str, ready: impl Fn(usize) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let completed: usize = redis.query(redis::cmd("ZCARD").arg("bull:warren:completed"));
        if ready(completed) {
            return;
        }
        assert!(Instant::now() < deadline, "{failure}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Active lead jobs (their task says `LEAD`) that the worker named `worker` holds:
/// BullMQ keeps the worker's name in the job's `pb` field.
fn leads_held_by(redis: &Redis, worker: &str) -> usize {
    let active: Vec<String> = redis.query(
        redis::cmd("LRANGE")
            .arg("bull:warren:active")
            .arg(0)
            .arg(-1),
    );
    active
        .iter()
        .filter(|id| {
            let (by, data): (Option<String>, Option<String>) = redis.query(
                redis::cmd("HMGET")
                    .arg(format!("bull:warren:{id}"))
                    .arg("pb")
                    .arg("data"),
            );
            by.as_deref() == Some(worker) && data.is_some_and(|data| data.contains("LEAD"))
        })
        .count()
}

/// Every job a parent waits for was once polled with BullMQ's `getState`, which scans
/// the wait list: ten thousand waiting grandchildren kept Redis too busy to renew the
/// workers' locks, and the tree stalled after about 300 model calls. And a worker whose
/// four places all held children waiting for their grandchildren never took those
/// grandchildren. Now the tree completes, and `warren show` counts every agent.
#[test]
fn ten_thousand_agents_on_two_workers_complete_and_every_one_is_shown() {
    let redis = Redis::start_volatile();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    std::fs::write(dir.path().join("script.toml"), tree_script(100, 100)).unwrap();
    // The default width (`--concurrency 4`), as a new user starts them.
    let _workers = [
        Worker::start(dir.path(), &redis, "w1", 4),
        Worker::start(dir.path(), &redis, "w2", 4),
    ];
    let run = warren(
        dir.path(),
        &[
            "run",
            "go",
            "--redis",
            &redis.url(),
            "--quiet",
            "--run-id",
            "big",
        ],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "all done");

    let (header, ok) = shown(dir.path(), "big");
    assert!(
        header.starts_with("run big · ok · 10101 agents"),
        "{header}"
    );
    assert_eq!(ok, 10_101, "agents shown ok");
    // The jobs Redis completed are the tree's, each once.
    let completed: usize = redis.query(redis::cmd("ZCARD").arg("bull:warren:completed"));
    assert_eq!(completed, 10_100);
}

/// A worker killed mid-tree: its children are taken again by the other worker, whose
/// retries cancel the grandchildren the dead attempts had started. Those that had
/// finished are work done: the tree keeps every one of them, settled from its job, so
/// `warren show` counts as many agents ok as Redis completed jobs (once, the tree
/// lost the grandchildren whose ends the dead worker never sent: 110 ok, 151 jobs
/// completed).
#[test]
fn a_worker_killed_mid_tree_loses_no_agent_and_the_tree_agrees_with_redis() {
    let redis = Redis::start_volatile();
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "lock_ms = 1000\nstalled_interval_ms = 500\nattempts = 3",
    );
    std::fs::write(
        dir.path().join("script.toml"),
        tree_script_with(10, 10, 3, 700),
    )
    .unwrap();
    // w1 starts alone, so it takes leads; w2 joins once it holds one.
    let mut first = Worker::start(dir.path(), &redis, "w1", 4);
    let url = redis.url();
    let parent_dir = dir.path().to_path_buf();
    let parent = std::thread::spawn(move || {
        warren(
            &parent_dir,
            &[
                "run", "go", "--redis", &url, "--quiet", "--run-id", "killed",
            ],
        )
    });
    wait_until(&redis, "w1 never took a lead", |_| {
        leads_held_by(&redis, "w1") > 0
    });
    let _second = Worker::start(dir.path(), &redis, "w2", 4);
    // w1 dies once some grandchildren finished and while it still holds a lead whose
    // grandchildren are not all done: however fast this machine runs the tree, the
    // retried lead makes new grandchildren, so more than 110 jobs complete.
    wait_until(
        &redis,
        "no grandchild finished while w1 held a lead",
        |completed| completed >= 15 && leads_held_by(&redis, "w1") > 0,
    );
    first.signal("-KILL");
    first.wait_exit(Duration::from_secs(5));
    let run = parent.join().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "all done");

    let completed: usize = redis.query(redis::cmd("ZCARD").arg("bull:warren:completed"));
    let (header, ok) = shown(dir.path(), "killed");
    assert!(
        completed > 110,
        "w1 died before any retry: {completed} jobs completed"
    );
    assert_eq!(
        ok,
        completed + 1,
        "{header}: agents ok against jobs completed (and the root)"
    );
    // Every job Redis holds is an agent of the tree.
    let agents: usize = header
        .split(" · ")
        .find_map(|part| part.strip_suffix(" agents")?.parse().ok())
        .unwrap_or_else(|| panic!("no agent count in {header}"));
    let jobs = redis.jobs().len();
    assert!(
        agents > jobs,
        "{agents} agents in the tree, {jobs} jobs in Redis"
    );
}
