//! A tree of 10,101 agents — a root spawning 100 `lead`s that each spawn 100
//! `leaf`s, every agent waiting for its own — against the zero-latency scripted
//! model, run by the `warren` binary in-process and through a real `redis-server`
//! (no persistence) across 1, 2 and 4 `warren worker`s of the default width (4).
//! The shape is the one people report (Claude Code workflows of 1,000 agents a run,
//! Modal and E2B users past 10,000): wide enough that the queue's wait list holds
//! thousands of jobs, deep enough that workers hold parents waiting on children.
//!
//! For each it prints the wall time, children per second, the host's CPU per child
//! and peak RSS, each worker's, Redis's memory per job and after the run, and the
//! journal's bytes per agent; then how long `warren show` and `warren runs` take on
//! the 10,101-agent run, and `warren resume` of one killed (SIGKILL) part way, and
//! the tree on two workers with one killed (SIGKILL) part way; then,
//! in the same run, BullMQ's own throughput on this Redis
//! (`tests/fixtures/bullmq-client/noop_bench.mjs`: 20,000 no-op jobs, four workers)
//! as the ratio the queue path is measured against.
//!
//! Run with: `cargo bench --bench tree_10k` (needs `redis-server`, and `node`/`npm`
//! for BullMQ's figure; scripts/install-deps installs them).

#[path = "support/cluster.rs"]
mod cluster;
#[allow(dead_code)] // the bench uses the npm installer only
#[path = "../../tests/all/guests.rs"]
mod guests;
#[allow(dead_code)] // the bench uses the plain tree only
#[path = "../../tests/all/tree_script.rs"]
mod tree_script;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cluster::{Redis, Used, Worker};

/// Children of the root, and of each child.
const WIDTH: usize = 100;
/// Agents in the tree: the root, its children and theirs.
const AGENTS: usize = 1 + WIDTH + WIDTH * WIDTH;
/// Agents that are someone's child.
const CHILDREN: usize = AGENTS - 1;
/// The places of one worker (`warren worker`'s default `--concurrency`).
const WORKER_WIDTH: usize = 4;

/// One run of the tree.
struct Figures {
    wall: Duration,
    host: Used,
    workers: Vec<Used>,
    redis_after: u64,
    redis_added: u64,
    journal_bytes: u64,
}

/// `warren.toml` and the script of the tree in `dir`.
fn write_project(dir: &Path) -> anyhow::Result<()> {
    std::fs::write(
        dir.join("warren.toml"),
        "[plugins]\nbuiltins = false\n\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
         [defaults]\nmax_concurrent = 256\nmax_concurrent_total = 4096\nmax_depth = 2\nmax_agents = 20000\ntimeout_s = 600\n\n\
         [queue]\n\n[profiles.main]\ntools = []\n[profiles.lead]\ntools = []\n[profiles.leaf]\ntools = []\n",
    )?;
    std::fs::write(
        dir.join("script.toml"),
        tree_script::tree_script(WIDTH, WIDTH),
    )?;
    Ok(())
}

/// Runs the tree once, with `workers` workers (none: in-process).
fn run_tree(redis: &Redis, workers: usize) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    write_project(dir.path())?;
    redis::cmd("FLUSHALL").query::<()>(&mut redis.connect()?)?;
    let before = redis.used_memory()?;
    let names: Vec<String> = (1..=workers).map(|n| format!("w{n}")).collect();
    let started: Vec<Worker> = names
        .iter()
        .map(|name| Worker::start(dir.path(), redis, name, WORKER_WIDTH))
        .collect::<anyhow::Result<_>>()?;
    let mut command = warren(
        dir.path(),
        &["run", "go", "--quiet", "--run-id", "big"],
        Stdio::piped(),
    );
    if workers > 0 {
        command.args(["--redis", &redis.url]);
    }
    let began = Instant::now();
    let mut child = command.spawn()?;
    let (status, host) = Used::wait(&mut child)?;
    let wall = began.elapsed();
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            std::io::Read::read_to_string(&mut pipe, &mut stderr)?;
        }
        anyhow::bail!("the {workers}-worker run failed: {stderr}");
    }
    let used: Vec<Used> = started
        .iter()
        .map(|worker| Used::of(worker.0.id()))
        .collect::<anyhow::Result<_>>()?;
    let after = redis.used_memory()?;
    drop(started);
    let journal = dir.path().join(".warren/runs/big/journal.jsonl");
    Ok(Figures {
        wall,
        host,
        workers: used,
        redis_after: after,
        redis_added: after.saturating_sub(before),
        journal_bytes: std::fs::metadata(journal)?.len(),
    })
}

/// `warren ARGS` in `dir`, quiet, its output discarded (piped, with `stderr`).
fn warren(dir: &Path, args: &[&str], stderr: Stdio) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warren"));
    command
        .args(args)
        .current_dir(dir)
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(stderr);
    command
}

/// `warren show RUN`'s lines in `dir`.
fn shown(dir: &Path, run: &str) -> anyhow::Result<String> {
    let output = warren(dir, &["show", run], Stdio::null())
        .stdout(Stdio::piped())
        .output()?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `warren ARGS` in `dir`, to its end: how long it took (it must succeed).
fn timed(dir: &Path, args: &[&str]) -> anyhow::Result<Duration> {
    let began = Instant::now();
    let output = warren(dir, args, Stdio::piped()).output()?;
    let took = began.elapsed();
    anyhow::ensure!(
        output.status.success(),
        "warren {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(took)
}

/// The views on a 10,101-agent run, in-process: `warren show` and `warren runs` of
/// a finished one, and `warren resume` of one killed when about a third of its
/// agents were journaled. Prints the figures.
fn views() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    write_project(dir.path())?;
    std::fs::write(
        dir.path().join("script.toml"),
        tree_script::resumable_tree_script(WIDTH, WIDTH),
    )?;
    timed(
        dir.path(),
        &["run", "TREE-GO", "--quiet", "--run-id", "big"],
    )?;
    let show = timed(dir.path(), &["show", "big"])?;
    let runs = timed(dir.path(), &["runs"])?;
    let run = ["run", "TREE-GO", "--quiet", "--run-id", "killed"];
    let mut victim = warren(dir.path(), &run, Stdio::null()).spawn()?;
    let journal = dir.path().join(".warren/runs/killed/journal.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    // About a third of a finished run's journal (1 KiB per agent).
    while std::fs::metadata(&journal).map_or(0, |m| m.len()) < (AGENTS as u64 * 1024) / 3 {
        anyhow::ensure!(Instant::now() < deadline, "the run to kill never got going");
        std::thread::sleep(Duration::from_millis(2));
    }
    victim.kill()?;
    victim.wait()?;
    let at = std::fs::metadata(&journal)?.len();
    let resume = timed(dir.path(), &["resume", "killed", "--quiet"])?;
    let header = shown(dir.path(), "killed")?
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    println!(
        "views       warren show {:>5.0} ms  warren runs {:>5.0} ms  warren resume of a run killed at {} KiB of journal {:>5.0} ms to its end ({header})",
        ms(show),
        ms(runs),
        at / 1024,
        ms(resume),
    );
    Ok(())
}

/// Two workers, one killed with SIGKILL a third of the way through the tree (short
/// locks, three attempts, as `tests/all/queue_scale.rs` kills one at 111 agents):
/// the tree must complete, and `warren show` count as many agents ok as Redis
/// completed jobs (and the root). Prints the figures.
fn worker_killed(redis: &Redis) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    write_project(dir.path())?;
    let config = dir.path().join("warren.toml");
    let text = std::fs::read_to_string(&config)?.replace(
        "[queue]\n",
        "[queue]\nlock_ms = 1000\nstalled_interval_ms = 500\nattempts = 3\n",
    );
    std::fs::write(&config, text)?;
    std::fs::write(
        dir.path().join("script.toml"),
        tree_script::tree_script_with(WIDTH, WIDTH, 3, 0),
    )?;
    redis::cmd("FLUSHALL").query::<()>(&mut redis.connect()?)?;
    let mut first = Worker::start(dir.path(), redis, "w1", WORKER_WIDTH)?;
    let second = Worker::start(dir.path(), redis, "w2", WORKER_WIDTH)?;
    let began = Instant::now();
    let run = [
        "run", "go", "--quiet", "--run-id", "killed", "--redis", &redis.url,
    ];
    let mut parent = warren(dir.path(), &run, Stdio::null()).spawn()?;
    let completed = || -> anyhow::Result<usize> {
        let count = redis::cmd("ZCARD")
            .arg("bull:warren:completed")
            .query(&mut redis.connect()?)?;
        Ok(count)
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    while completed()? < CHILDREN / 3 {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the tree never got a third of the way"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let at = completed()?;
    first.0.kill()?;
    first.0.wait()?;
    let status = parent.wait()?;
    let wall = began.elapsed();
    anyhow::ensure!(
        status.success(),
        "the tree did not complete after a worker was killed"
    );
    let done = completed()?;
    drop(second);
    let ok = shown(dir.path(), "killed")?
        .lines()
        .filter(|line| line.trim_start().starts_with("✓ "))
        .count();
    println!(
        "worker kill w1 SIGKILLed at {at} jobs completed; the tree completed in {:>6.0} ms; Redis completed {done} jobs, `warren show` counts {ok} agents ok ({})",
        ms(wall),
        if ok == done + 1 { "they agree, with the root" } else { "THEY DISAGREE" }
    );
    Ok(())
}

/// BullMQ's no-op throughput with four workers on `redis`, in jobs per second.
fn bullmq_noop(redis: &Redis) -> anyhow::Result<f64> {
    let client = guests::root().join("tests/fixtures/bullmq-client");
    if !client.join("node_modules/bullmq").exists() {
        guests::npm_ci(&client, "npm is needed for BullMQ's own figure");
    }
    let output = Command::new("node")
        .arg(client.join("noop_bench.mjs"))
        .env("REDIS_URL", &redis.url)
        .env("JOBS", "20000")
        .env("WORKERS", "4")
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "noop_bench.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    line["jobs_per_s"]
        .as_f64()
        .ok_or_else(|| anyhow::anyhow!("noop_bench.mjs printed {line}"))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() -> anyhow::Result<()> {
    let redis = Redis::start()?;
    println!("a tree of {AGENTS} agents (1 + {WIDTH} + {WIDTH}x{WIDTH}), zero-latency scripted model; workers of width {WORKER_WIDTH}");
    let mut local_wall = None;
    let mut best_rate: f64 = 0.0;
    for workers in [0, 1, 2, 4] {
        let figures = run_tree(&redis, workers)?;
        let rate = CHILDREN as f64 / figures.wall.as_secs_f64();
        let label = match workers {
            0 => "in-process".to_string(),
            1 => "1 worker".to_string(),
            n => format!("{n} workers"),
        };
        println!(
            "{label:<11} wall {:>8.0} ms  {rate:>6.0} children/s  host CPU per child {:>6.3} ms  host peak RSS {:>6} MiB  journal {:>4} B/agent",
            ms(figures.wall),
            ms(figures.host.cpu) / CHILDREN as f64,
            figures.host.peak_rss_kib / 1024,
            figures.journal_bytes / AGENTS as u64,
        );
        if workers == 0 {
            local_wall = Some(figures.wall);
            continue;
        }
        best_rate = best_rate.max(rate);
        let cpu: Duration = figures.workers.iter().map(|w| w.cpu).sum();
        let peaks: Vec<String> = figures
            .workers
            .iter()
            .map(|w| format!("{}", w.peak_rss_kib / 1024))
            .collect();
        let added = local_wall.map_or(0.0, |local| {
            (ms(figures.wall) - ms(local)) / CHILDREN as f64
        });
        println!(
            "            workers' CPU per child {:>6.3} ms  workers' peak RSS {} MiB  Redis {:>5} B/job added, {:>6} KiB after  wall added per child {added:>+6.3} ms",
            ms(cpu) / CHILDREN as f64,
            peaks.join(" / "),
            figures.redis_added / CHILDREN as u64,
            figures.redis_after / 1024,
        );
    }
    views()?;
    worker_killed(&redis)?;
    redis::cmd("FLUSHALL").query::<()>(&mut redis.connect()?)?;
    match bullmq_noop(&redis) {
        Ok(noop) => println!(
            "BullMQ no-op jobs, 4 workers, this Redis: {noop:>6.0} jobs/s (BullMQ's published figure: about 41,000/s on its machine); warren's best {best_rate:.0} children/s is {:.1}% of it",
            100.0 * best_rate / noop
        ),
        Err(error) => println!("BullMQ's own figure not measured: {error:#}"),
    }
    Ok(())
}
