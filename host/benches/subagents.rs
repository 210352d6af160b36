//! Host overhead of sub-agents against a zero-latency scripted model: 1000 children,
//! each one turn with one tool call (the fixture's `echo`, in a fresh sandbox) and one
//! answering turn; peak RSS and RSS per concurrently running sub-agent; and parallel
//! efficiency of N children with model latency L at concurrency N.
//!
//! Run with: `cargo bench --bench subagents`

#[allow(dead_code)] // the bench uses only the fixture, not the bundled plugins
#[path = "../../tests/all/guests.rs"]
mod guests;
#[path = "support/runs.rs"]
mod runs;

use std::path::Path;
use std::time::{Duration, Instant};

use warren::{Config, Host};

/// `VmRSS` or `VmHWM` of this process, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// A config and script in `dir`: the root spawns `children` workers in one turn,
/// each worker calls `echo` once (after `latency_ms`) and then answers (after `latency_ms`).
fn write_world(
    dir: &Path,
    children: usize,
    concurrency: usize,
    latency_ms: u64,
) -> anyhow::Result<Config> {
    let hostile = guests::guests().hostile.display().to_string();
    let script = runs::root_turns(children) + &runs::child_turns(children, latency_ms);
    std::fs::write(dir.join("script.toml"), script)?;
    let config = format!(
        "[plugins]\nfiles = [{hostile:?}]\n\n[models.fake]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
         [defaults]\nmax_concurrent = {concurrency}\nmax_concurrent_total = {concurrency}\ntimeout_s = 600\n\n[profiles.main]\ntools = []\n\n\
         [profiles.worker]\ntools = [\"echo\"]\n"
    );
    std::fs::write(dir.join("warren.toml"), config)?;
    Ok(Config::load(&dir.join("warren.toml"))?)
}

async fn run(
    children: usize,
    concurrency: usize,
    latency_ms: u64,
) -> anyhow::Result<(Duration, u64)> {
    let dir = tempfile::tempdir()?;
    let config = write_world(dir.path(), children, concurrency, latency_ms)?;
    let host = Host::load(config).await?;
    let baseline = status_kib("VmRSS:");
    let started = Instant::now();
    let run = host.start("main", "bench", None)?;
    // Sample RSS while the children run.
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(baseline));
    let sampled = peak.clone();
    let sampler = tokio::spawn(async move {
        loop {
            sampled.fetch_max(status_kib("VmRSS:"), std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    let report = run.wait().await;
    let elapsed = started.elapsed();
    sampler.abort();
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    runs::ensure_all_ok(&report, children)?;
    Ok((elapsed, peak.saturating_sub(baseline)))
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Warm the compile cache and the allocator.
        run(10, 10, 0).await?;
        // Memory first, before earlier runs have grown the heap.
        let (_, grown) = run(256, 256, 200).await?;
        println!(
            "256 sub-agents running at once (200 ms model latency): RSS grew {:.1} MiB, {:.1} KiB per running sub-agent; peak RSS {:.1} MiB",
            grown as f64 / 1024.0,
            grown as f64 / 256.0,
            status_kib("VmHWM:") as f64 / 1024.0
        );
        for concurrency in [1, 100] {
            let (elapsed, _) = run(1000, concurrency, 0).await?;
            println!(
                "1000 sub-agents, concurrency {concurrency:>3}, zero-latency model: {:>7.1} ms total, {:>6.1} µs host overhead per sub-agent",
                elapsed.as_secs_f64() * 1e3,
                elapsed.as_secs_f64() * 1e6 / 1000.0
            );
        }
        for n in [3, 10, 50] {
            let latency = 300;
            let (elapsed, _) = run(n, n, latency).await?;
            // Each child makes two model calls; the ideal wall time is their latency.
            let ideal = Duration::from_millis(2 * latency);
            println!(
                "{n:>2} children × 2 turns of {latency} ms at concurrency {n:>2}: {:>6.1} ms (ideal {:>4} ms), parallel efficiency {:>5.1}%",
                elapsed.as_secs_f64() * 1e3,
                ideal.as_millis(),
                100.0 * ideal.as_secs_f64() / elapsed.as_secs_f64()
            );
        }
        Ok(())
    })
}
