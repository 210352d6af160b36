//! How long `warren resume` takes to continue a run whose journal holds 1,000 finished
//! sub-agents and an unfinished root: the root replays its recorded turns (re-spawning
//! its 1,000 children, each delivering its recorded outcome without running) and asks
//! its model the one turn that was not recorded. Target: under 1 s.
//!
//! Run with: `cargo bench --bench resume`

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use warren::{Config, Host};

const CHILDREN: usize = 1000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // The root spawns its children in four replies of 250 (a reply runs at most 256
    // calls), awaits them and answers; each child answers after 100 ms.
    let mut script = String::new();
    for (reply, when) in ["bench", "job", "job", "job"].iter().enumerate() {
        let _ = writeln!(
            script,
            "[[turns]]\nprofile = \"main\"\nwhen = \"{when}\"\ntool_calls = ["
        );
        for i in reply * 250..(reply + 1) * 250 {
            let _ = writeln!(script, "  {{ name = \"spawn_agent\", arguments = {{ profile = \"worker\", task = \"CHILD {i}\" }} }},");
        }
        script.push_str("]\n\n");
    }
    script.push_str("[[turns]]\nprofile = \"main\"\nwhen = \"job\"\ntool_calls = [{ name = \"await_agents\", arguments = { job_ids = \"*\" } }]\n\n");
    script.push_str("[[turns]]\nprofile = \"main\"\nwhen = \"OK]\"\ntext = \"all done\"\n\n");
    for _ in 0..CHILDREN {
        script.push_str("[[turns]]\nprofile = \"worker\"\nwhen = \"CHILD\"\ndelay_ms = 100\ntext = \"done\"\n\n");
    }
    std::fs::write(dir.path().join("script.toml"), script)?;
    std::fs::write(
        dir.path().join("warren.toml"),
        "[models.fake]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
             [defaults]\nmax_concurrent = 100\nmax_concurrent_total = 100\ntimeout_s = 600\n\n\
             [profiles.main]\ntools = []\n\n[profiles.worker]\ntools = []\n",
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
        .start_with_run_id("main", "bench", run_id)?
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

    // A new host, as a new process would be, resumes it; its model has one turn left
    // to give, the root's last.
    std::fs::write(
        dir.path().join("script.toml"),
        "[[turns]]\nprofile = \"main\"\ntext = \"all done\"\n",
    )?;
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
            Err(error) => return Err(error.into()),
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
