//! What Redis adds to a sub-agent: the same children run in-process and through a
//! real `redis-server` (started here on a free port, no persistence) to `warren
//! worker` processes, against a zero-latency scripted model. Each child makes one
//! model turn with one tool call (the fixture's `echo`, in a fresh sandbox) and one
//! answering turn.
//!
//! - latency: one child, spawn to result in the parent, repeated; p50 and p99;
//! - throughput: many children at once over one and over two workers.
//!
//! Run with: `cargo bench --bench queue` (needs `redis-server` on PATH).

#[allow(dead_code)] // the queue bench measures in-process; tree_10k uses the rest
#[path = "support/cluster.rs"]
mod cluster;
#[allow(dead_code)] // the bench uses only the fixture, not the bundled plugins
#[path = "../../tests/all/guests.rs"]
mod guests;
#[path = "support/runs.rs"]
mod runs;

use std::path::Path;
use std::time::{Duration, Instant};

use cluster::{Redis, Worker};

use warren::{Config, Host};

/// `warren.toml` for `dir`: the fixture plugin, the scripted model, profiles `main`
/// and `worker`, and the queue when `redis` is given.
fn write_config(dir: &Path, redis: Option<&Redis>) -> anyhow::Result<()> {
    let hostile = guests::guests().hostile.display().to_string();
    let queue = redis.map_or(String::new(), |r| {
        format!("[queue]\nredis = {:?}\n\n", r.url)
    });
    let config = format!(
        "[plugins]\nfiles = [{hostile:?}]\n\n[models.fake]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
         [defaults]\nmax_concurrent = 200\nmax_concurrent_total = 200\ntimeout_s = 600\n\n{queue}[profiles.main]\ntools = []\n\n\
         [profiles.worker]\ntools = [\"echo\"]\n"
    );
    std::fs::write(dir.join("warren.toml"), config)?;
    Ok(())
}

/// A parent in a fresh directory: its root spawns `children` children in one turn and
/// awaits them all. In-process, the same script holds the children's turns.
async fn parent(
    children: usize,
    redis: Option<&Redis>,
) -> anyhow::Result<(Host, tempfile::TempDir)> {
    parent_of_runs(children, 1, redis).await
}

/// [`parent`] with the turns of `runs` such runs, one after the other.
async fn parent_of_runs(
    children: usize,
    runs: usize,
    redis: Option<&Redis>,
) -> anyhow::Result<(Host, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    write_config(dir.path(), redis)?;
    let mut script = runs::root_turns(children).repeat(runs);
    if redis.is_none() {
        script += &runs::child_turns(children * runs, 0);
    }
    std::fs::write(dir.path().join("script.toml"), script)?;
    let host = Host::load(Config::load(&dir.path().join("warren.toml"))?).await?;
    Ok((host, dir))
}

/// Runs the parent's root to the end; its wall time.
async fn run(host: &Host, children: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let report = host.start("main", "bench", None)?.wait().await;
    let elapsed = started.elapsed();
    runs::ensure_all_ok(&report, children)?;
    Ok(elapsed)
}

/// One child per run, `n` runs of one host after its first: p50 and p99 of the run's
/// wall time, and the first run's (which pays the host's first sandboxed call), in ms.
async fn latency(n: usize, redis: Option<&Redis>) -> anyhow::Result<(f64, f64, f64)> {
    let (host, _dir) = parent_of_runs(1, n + 1, redis).await?;
    let first = run(&host, 1).await?.as_secs_f64() * 1e3;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        times.push(run(&host, 1).await?.as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[n / 2], times[(n * 99 / 100).min(n - 1)], first))
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let redis = Redis::start()?;
        // The workers' directory: enough children's turns for every run below.
        let workers = tempfile::tempdir()?;
        write_config(workers.path(), Some(&redis))?;
        std::fs::write(
            workers.path().join("script.toml"),
            runs::child_turns(3000, 0),
        )?;

        // Warm the compile cache, the allocator and the connections.
        let (host, _dir) = parent(10, None).await?;
        run(&host, 10).await?;
        let w1 = Worker::start(workers.path(), &redis, "w1", 100)?;
        let (host, _dir) = parent(10, Some(&redis)).await?;
        run(&host, 10).await?;

        let runs = 50;
        let (local50, local99, local_first) = latency(runs, None).await?;
        let (remote50, remote99, remote_first) = latency(runs, Some(&redis)).await?;
        println!(
            "one child, spawn to result, n={runs}:  in-process p50 {local50:>7.2} ms  p99 {local99:>7.2} ms   through Redis p50 {remote50:>7.2} ms  p99 {remote99:>7.2} ms   (+{:.2} ms per job at p50)",
            remote50 - local50
        );
        println!(
            "  a new host's first run:             in-process {local_first:>7.2} ms             through Redis {remote_first:>7.2} ms"
        );

        let children = 500;
        let (host, _dir) = parent(children, None).await?;
        let local = run(&host, children).await?;
        println!(
            "{children} children in-process:              {:>8.1} ms total  {:>7.0} children/s",
            local.as_secs_f64() * 1e3,
            children as f64 / local.as_secs_f64()
        );
        let (host, _dir) = parent(children, Some(&redis)).await?;
        let one = run(&host, children).await?;
        println!(
            "{children} children through Redis, 1 worker:  {:>8.1} ms total  {:>7.0} children/s",
            one.as_secs_f64() * 1e3,
            children as f64 / one.as_secs_f64()
        );
        let w2 = Worker::start(workers.path(), &redis, "w2", 100)?;
        let (host, _dir) = parent(children, Some(&redis)).await?;
        let two = run(&host, children).await?;
        println!(
            "{children} children through Redis, 2 workers: {:>8.1} ms total  {:>7.0} children/s",
            two.as_secs_f64() * 1e3,
            children as f64 / two.as_secs_f64()
        );
        drop((w1, w2));
        Ok(())
    })
}
