//! The built-in code-running tools, `run_python` and `run_js`, as an agent meets them:
//! the time it waits for one call of `print(sum(range(1000)))` (and the same in
//! JavaScript), p50 and p99 over 1,000 calls, each in a fresh instance; the host CPU
//! each call costs in total (every thread of the process, whatever runs ahead of a
//! call included); the cold start (the first call after loading, compiled code cached
//! on disk); and, in the same run, a `python3 -c` and a `node -e` process doing the
//! same, with the ratios.
//!
//! Run with: `cargo bench --bench code_tools` (`CALLS=N` for another count).

#[path = "support/profile.rs"]
mod profile;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use profile::bench_profile;
use warren::{Config, Sandbox, ToolAccess, ToolRegistry};

const CALLS: usize = 1000;
const SPAWNS: usize = 100;
/// The pause before each call (a model turn is far longer).
const GAP: Duration = Duration::from_millis(5);

/// One language: its tool, the code, the targets (p50, p99) and the native command.
struct Language {
    name: &'static str,
    builtin: &'static str,
    tool: &'static str,
    code: &'static str,
    p50_target: Duration,
    p99_target: Option<Duration>,
    native: (&'static str, &'static [&'static str]),
}

const LANGUAGES: [Language; 2] = [
    Language {
        name: "python",
        builtin: "run-python",
        tool: "run_python",
        code: "print(sum(range(1000)))",
        p50_target: Duration::from_millis(1),
        p99_target: Some(Duration::from_millis(5)),
        native: ("python3", &["-c", "print(sum(range(1000)))"]),
    },
    Language {
        name: "javascript",
        builtin: "run-js",
        tool: "run_js",
        code: "let s = 0; for (let i = 0; i < 1000; i++) s += i; console.log(s)",
        p50_target: Duration::from_micros(500),
        p99_target: None,
        native: (
            "node",
            &[
                "-e",
                "let s = 0; for (let i = 0; i < 1000; i++) s += i; console.log(s)",
            ],
        ),
    },
];

fn main() -> anyhow::Result<()> {
    let which = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let calls = std::env::var("CALLS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(CALLS);
    let runtime = tokio::runtime::Runtime::new()?;
    // In a task of the runtime, as an agent's loop calls its tools (a call made from
    // outside the runtime would also time waking a worker for the refill).
    runtime.block_on(async { tokio::spawn(measure(which, calls)).await? })
}

/// The figures of each language (`which` alone when given), `calls` calls each.
async fn measure(which: Option<String>, calls: usize) -> anyhow::Result<()> {
    let sandbox = Arc::new(Sandbox::new()?);
    println!("{}", sandbox.memory_slots());
    let cache_dir = std::env::temp_dir().join("warren-bench-code-tools");
    let access = ToolAccess::new(bench_profile(&["run_python", "run_js"], Vec::new())?)?;
    for language in LANGUAGES {
        if which.as_deref().is_some_and(|w| w != language.name) {
            continue;
        }
        let arguments = serde_json::json!({ "code": language.code }).to_string();
        // Only this language's plugin, compiled into the bench's own cache.
        let config = Config::builder(std::env::temp_dir())
            .set("plugins.builtins", vec![language.builtin])
            .set("plugins.cache_dir", cache_dir.to_string_lossy().as_ref())
            .build()?;
        let load = || ToolRegistry::for_config(sandbox.clone(), &config);
        // Compiled once (or found in the cache), so the cold start below loads it
        // from disk as a new process would.
        load()
            .await?
            .call(&access, language.tool, &arguments)
            .await?;
        let started = Instant::now();
        let registry = load().await?;
        let answer = registry.call(&access, language.tool, &arguments).await?;
        let cold = started.elapsed();
        assert!(answer.contains("499500"), "{answer}");

        let mut samples = Vec::with_capacity(calls);
        let mut faults = 0;
        let phases_before = warren::sandbox_phase_totals();
        let cpu_before = cpu(libc::RUSAGE_SELF);
        for _ in 0..calls {
            // An agent's calls come between model turns: the gap lets what is
            // made ahead of a call (counted in the CPU figure) finish first.
            tokio::time::sleep(GAP).await;
            let (started, faults_before) = (Instant::now(), page_faults());
            registry.call(&access, language.tool, &arguments).await?;
            samples.push(started.elapsed());
            faults += page_faults() - faults_before;
        }
        let cpu_per_call = (cpu(libc::RUSAGE_SELF) - cpu_before) / calls as u32;
        let phases = warren::sandbox_phase_totals() - phases_before;
        eprintln!(
            "{:<23} mean on the call's path: {phases}; {:.1} page faults",
            "",
            faults as f64 / calls as f64
        );
        let (p50, p99) = quantiles(&mut samples);
        println!(
                "{:<12} {:<10} n={calls}  p50 {:>8.1} µs  p99 {:>8.1} µs  host CPU per call {:>8.1} µs  cold start {:>6.1} ms",
                language.name,
                language.tool,
                us(p50),
                us(p99),
                us(cpu_per_call),
                cold.as_secs_f64() * 1e3
            );
        let met = |value: Duration, target: Duration| {
            format!(
                "{:.2}x the {} µs target ({})",
                value.as_secs_f64() / target.as_secs_f64(),
                us(target),
                if value <= target { "met" } else { "not met" }
            )
        };
        print!("{:<23} p50 {}", "", met(p50, language.p50_target));
        if let Some(target) = language.p99_target {
            print!("; p99 {}", met(p99, target));
        }
        println!();

        let (program, args) = language.native;
        match native(program, args) {
                Some((spawn_p50, spawn_cpu)) => println!(
                    "{:<23} `{program} {}` process: p50 {:>8.1} µs, CPU {:>8.1} µs; the sandboxed call waits {:.1}x less and costs {:.1}x less CPU",
                    "",
                    args[0],
                    us(spawn_p50),
                    us(spawn_cpu),
                    spawn_p50.as_secs_f64() / p50.as_secs_f64(),
                    spawn_cpu.as_secs_f64() / cpu_per_call.as_secs_f64(),
                ),
                None => println!("{:<23} `{program}` is not installed: no process figure", ""),
            }
    }
    anyhow::Ok(())
}

/// p50 and p99 of `samples`.
fn quantiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99))
}

/// `program args` run [`SPAWNS`] times: the p50 wall time and the mean CPU (user and
/// system of the child) per run; `None` when it cannot be run.
fn native(program: &str, args: &[&str]) -> Option<(Duration, Duration)> {
    let mut samples = Vec::with_capacity(SPAWNS);
    let before = cpu(libc::RUSAGE_CHILDREN);
    for _ in 0..SPAWNS {
        let started = Instant::now();
        let output = Command::new(program).args(args).output().ok()?;
        samples.push(started.elapsed());
        assert!(String::from_utf8_lossy(&output.stdout).contains("499500"));
    }
    let cpu = (cpu(libc::RUSAGE_CHILDREN) - before) / SPAWNS as u32;
    Some((quantiles(&mut samples).0, cpu))
}

/// The process's page faults so far (minor and major): between two calls nothing
/// else runs, so the difference across a call is the faults on its path.
fn page_faults() -> i64 {
    let usage = rusage(libc::RUSAGE_SELF);
    usage.ru_minflt + usage.ru_majflt
}

fn rusage(who: libc::c_int) -> libc::rusage {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    #[allow(unsafe_code)]
    unsafe {
        libc::getrusage(who, usage.as_mut_ptr());
        usage.assume_init()
    }
}

/// User and system CPU time of `who` so far.
fn cpu(who: libc::c_int) -> Duration {
    let usage = rusage(who);
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
