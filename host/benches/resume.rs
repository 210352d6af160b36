//! How long `warren resume` takes to continue a run whose journal holds 1,000 finished
//! sub-agents and an unfinished root: the root replays its recorded turns (re-spawning
//! its 1,000 children, each delivering its recorded outcome without running) and asks
//! its model the one turn that was not recorded. Target: under 1 s.
//!
//! Run with: `cargo bench --bench resume`

#[allow(dead_code)] // the bench uses the root's turns only
#[path = "support/runs.rs"]
mod runs;

use std::time::{Duration, Instant};

use warren::{Config, Host};

const CHILDREN: usize = 1000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut script = runs::root_turns(CHILDREN);
    for _ in 0..CHILDREN {
        script.push_str("[[turns]]\nprofile = \"worker\"\nwhen = \"CHILD\"\ntext = \"done\"\n\n");
    }
    std::fs::write(dir.path().join("script.toml"), script)?;
    std::fs::write(
        dir.path().join("warren.toml"),
        format!(
            "[models.fake]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
             [defaults]\nmax_concurrent = {CHILDREN}\nmax_concurrent_total = {CHILDREN}\ntimeout_s = 600\n\n\
             [profiles.main]\ntools = []\n\n[profiles.worker]\ntools = []\n"
        ),
    )?;
    let config_path = dir.path().join("warren.toml");
    let run_id = "resume-bench";
    let journal = dir
        .path()
        .join(format!(".warren/runs/{run_id}/journal.jsonl"));

    // The run, to its end; then its journal is cut before the root's last response,
    // as if its process had died while the root's final turn was being asked for.
    let host = Host::load(Config::load(&config_path)?).await?;
    let started = Instant::now();
    let report = host
        .start_with_run_id("main", "bench", None, Some(run_id), None)?
        .wait()
        .await;
    let ran = started.elapsed();
    anyhow::ensure!(
        report.agents.len() == CHILDREN + 1,
        "the run did not spawn them all"
    );
    drop(host);
    let text = std::fs::read_to_string(&journal)?;
    let lines: Vec<&str> = text.lines().collect();
    let root = &report.agents[0].id;
    let cut = lines
        .iter()
        .rposition(|l| {
            l.contains("\"model_response\"") && l.contains(&format!("\"agent\":\"{root}\""))
        })
        .ok_or_else(|| anyhow::anyhow!("no root response in the journal"))?;
    std::fs::write(&journal, lines[..cut].join("\n") + "\n")?;
    let finished = lines[..cut]
        .iter()
        .filter(|l| l.contains("\"agent_finished\""))
        .count();

    // A new host, as a new process would be, resumes it.
    let host = Host::load(Config::load(&config_path)?).await?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let started = Instant::now();
    let run = loop {
        // The first run's journal closes as its last task ends.
        match host.resume(run_id, false) {
            Ok(run) => break run,
            Err(error) if Instant::now() < deadline && error.to_string().contains("held") => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(error) => return Err(error),
        }
    };
    let report = run.wait().await;
    let resumed = started.elapsed();
    anyhow::ensure!(
        report.root.state == warren::AgentState::Ok && report.root.text == "all done",
        "the resumed run failed: {:?}",
        report.root
    );
    println!(
        "run of {CHILDREN} sub-agents: {:.0} ms",
        ran.as_secs_f64() * 1000.0
    );
    println!(
        "resume of a journal with {finished} finished sub-agents and an unfinished root: {:.0} ms (target: under 1000 ms; {:.2}x the target)",
        resumed.as_secs_f64() * 1000.0,
        resumed.as_secs_f64()
    );
    Ok(())
}
