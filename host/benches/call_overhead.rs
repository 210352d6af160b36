//! Per-call cost of a fresh sandbox plus a trivial tool call, beside spawning a native
//! process that does the same trivial work (echo its arguments).
//!
//! Run with: `cargo bench --bench call_overhead` (prints p50/p99 and the ratio).

#[allow(dead_code)] // the bench uses some of the guests only
#[path = "../../tests/all/guests.rs"]
mod guests;
#[path = "support/profile.rs"]
mod profile;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use profile::{bench_profile, load_plugin};
use warren::{Sandbox, ToolAccess};

const SANDBOX_CALLS: usize = 2_000;
const NATIVE_CALLS: usize = 500;
const ARGUMENTS: &str = r#"{"n":1}"#;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let (p50, p99) = (percentile(&samples, 0.50), percentile(&samples, 0.99));
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<34} n={:<5} p50 {:>9.1} µs  p99 {:>9.1} µs  mean {:>9.1} µs",
        samples.len(),
        us(p50),
        us(p99),
        us(mean)
    );
    p50
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() -> anyhow::Result<()> {
    let hostile = guests::guests().hostile.clone();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let sandbox = Arc::new(Sandbox::new()?);
        println!("{}", sandbox.memory_slots());
        let cache_dir = tempfile::tempdir()?;
        for label in ["load, cold (compile + cache write)", "load, cached"] {
            let started = Instant::now();
            load_plugin(sandbox.clone(), &hostile, cache_dir.path()).await?;
            println!(
                "{label:<34} {:>9.1} ms",
                started.elapsed().as_secs_f64() * 1e3
            );
        }
        let registry = load_plugin(sandbox, &hostile, cache_dir.path()).await?;
        // A small file for the C plugin's checksum tool.
        let input_dir = tempfile::tempdir()?;
        std::fs::write(input_dir.path().join("input.txt"), "the fox and the dog")?;
        let grant = warren::FsGrant {
            host: input_dir.path().canonicalize()?,
            guest: "/bench".into(),
            mode: warren::FsMode::ReadOnly,
        };
        let profile = bench_profile(&["*"], vec![grant])?;
        let access = ToolAccess::new(profile)?;
        for _ in 0..100 {
            registry.call(&access, "echo", ARGUMENTS).await?;
        }
        let mut samples = Vec::with_capacity(SANDBOX_CALLS);
        for _ in 0..SANDBOX_CALLS {
            let started = Instant::now();
            let output = registry.call(&access, "echo", ARGUMENTS).await?;
            samples.push(started.elapsed());
            assert_eq!(output, ARGUMENTS);
        }
        let sandbox_p50 = report("sandbox: fresh store + echo call", samples);

        let mut samples = Vec::with_capacity(NATIVE_CALLS);
        for _ in 0..NATIVE_CALLS {
            let started = Instant::now();
            let output = Command::new("echo").arg(ARGUMENTS).output()?;
            samples.push(started.elapsed());
            assert!(output.status.success());
        }
        let native_p50 = report("native: spawn `echo` process", samples);
        println!(
            "sandbox call is {:.1}x faster than a process spawn (p50)",
            us(native_p50) / us(sandbox_p50)
        );

        // Per language: first start (compile), cached start, and per-call cost of a
        // small text tool, each call in a fresh sandbox.
        let languages = [
            ("rust (hostile echo)", hostile.clone(), "echo", r#"{"text":"the fox and the dog"}"#),
            ("python (componentize-py)", guests::python_plugin().clone(), "text_stats", r#"{"text":"the fox and the dog"}"#),
            ("c (wasi-libc + adapter)", guests::c_plugin(env!("CARGO_BIN_EXE_warren")).clone(), "checksum", r#"{"path":"/bench/input.txt"}"#),
            ("javascript (componentize-js)", guests::js_plugin().clone(), "markdown_to_text", r##"{"markdown":"# the **fox**"}"##),
        ];
        println!();
        for (language, file, tool, arguments) in languages {
            let size_mb = std::fs::metadata(&file)?.len() as f64 / 1e6;
            let cache_dir = tempfile::tempdir()?;
            let mut starts = Vec::new();
            for _ in 0..2 {
                let started = Instant::now();
                load_plugin(Arc::new(Sandbox::new()?), &file, cache_dir.path()).await?;
                starts.push(started.elapsed());
            }
            let registry = load_plugin(Arc::new(Sandbox::new()?), &file, cache_dir.path()).await?;
            let mut samples = Vec::new();
            for i in 0..220 {
                let started = Instant::now();
                registry.call(&access, tool, arguments).await?;
                if i >= 20 {
                    samples.push(started.elapsed());
                }
            }
            samples.sort();
            println!(
                "{language:<30} {size_mb:>5.1} MB  first start {:>8.1} ms  cached start {:>6.1} ms  call p50 {:>8.1} µs  p99 {:>8.1} µs",
                starts[0].as_secs_f64() * 1e3,
                starts[1].as_secs_f64() * 1e3,
                us(percentile(&samples, 0.5)),
                us(percentile(&samples, 0.99)),
            );
        }
        Ok(())
    })
}
