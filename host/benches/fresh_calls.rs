//! Fresh-sandbox calls of the interpreted plugins (Python through componentize-py,
//! JavaScript through componentize-js) beside the Rust one, with where the time goes:
//! building the store, instantiating (memory images, tables, start functions), the
//! guest's own work, and dropping the store.
//!
//! Each interpreted plugin's p50 is printed beside the Rust plugin's, measured in the
//! same run, and beside the 300 µs target, with the ratios.
//!
//! Run with: `cargo bench --bench fresh_calls` (or `-- python` for one language; set
//! `CALLS` for longer runs, e.g. under `perf`).

#[allow(dead_code)] // the bench uses some of the guests only
#[path = "../../tests/all/guests.rs"]
mod guests;
#[path = "support/profile.rs"]
mod profile;

use std::sync::Arc;
use std::time::{Duration, Instant};

use profile::{bench_profile, load_plugin};
use warren::{Sandbox, ToolAccess};

const CALLS: usize = 400;
/// What a fresh call of an interpreted plugin's small tool should cost at the median.
const TARGET: Duration = Duration::from_micros(300);
fn main() -> anyhow::Result<()> {
    let which = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let runtime = tokio::runtime::Runtime::new()?;
    let mut rust_p50 = None;
    runtime.block_on(async {
        type Build = fn() -> std::path::PathBuf;
        let languages: [(&str, Build, &str, &str); 3] = [
            (
                "rust",
                || guests::guests().hostile.clone(),
                "echo",
                r#"{"text":"the fox and the dog"}"#,
            ),
            (
                "python",
                || guests::python_plugin().clone(),
                "text_stats",
                r#"{"text":"the fox and the dog"}"#,
            ),
            (
                "javascript",
                || guests::js_plugin().clone(),
                "markdown_to_text",
                r##"{"markdown":"# the **fox**"}"##,
            ),
        ];
        let cache_dir = guests::wasm_dir().join("bench-cache");
        let sandbox = Arc::new(Sandbox::new()?);
        println!("{}", sandbox.memory_slots());
        for (language, build, tool, arguments) in languages {
            if which.as_deref().is_some_and(|w| w != language) {
                continue;
            }
            let file = build();
            let registry = load_plugin(sandbox.clone(), &file, &cache_dir).await?;
            let access = ToolAccess::new(bench_profile(&["*"], Vec::new())?)?;
            eprintln!("{language}: calling");
            let mut samples = Vec::new();
            let mut before = warren::sandbox_phase_totals();
            let calls = std::env::var("CALLS")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(CALLS);
            for i in 0..calls + 20 {
                let started = Instant::now();
                registry.call(&access, tool, arguments).await?;
                if i >= 20 {
                    samples.push(started.elapsed());
                } else {
                    before = warren::sandbox_phase_totals();
                }
            }
            samples.sort();
            let p = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
            let phases = warren::sandbox_phase_totals() - before;
            let p50 = p(0.5);
            println!(
                "{language:<12} call p50 {:>8.1} µs  p99 {:>8.1} µs   mean: {phases}",
                us(p50),
                us(p(0.99)),
            );
            match rust_p50 {
                None => rust_p50 = Some(p50),
                Some(rust) => println!(
                    "{:<12} {:.1}x the Rust plugin's p50; {:.2}x the {} µs target ({})",
                    "",
                    us(p50) / us(rust),
                    us(p50) / us(TARGET),
                    TARGET.as_micros(),
                    if p50 <= TARGET { "met" } else { "not met" }
                ),
            }
        }
        Ok(())
    })
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
