//! Using warren as a library: load a configuration, run a root agent, read the report.
//!
//! Run with: `cargo run --example library` (after `scripts/build-plugins`); it runs the
//! offline demo in examples/demo/.

use std::path::Path;

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/demo/warren.toml");
        let config = warren::Config::load(&path)?;
        let host = warren::Host::load(config).await?;
        let run = host.start("main", "Summarise the energy notes.", None)?;
        println!("started run with root agent {}", run.root);
        let report = run.wait().await;
        println!("{}\n", report.root.text);
        for job in &report.agents {
            let parent = job
                .parent
                .as_ref()
                .map_or("-".to_string(), ToString::to_string);
            println!("{} (parent {parent}) {}: {}", job.id, job.profile, job.task);
        }
        println!("total cost ${:.4}", report.cost_usd);
        Ok(())
    })
}
