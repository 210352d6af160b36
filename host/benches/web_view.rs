//! The web view with 1,000 agents: a scripted run (offline, no API key) whose root
//! spawns 1,000 sub-agents, 100 at a time, watched live in headless chromium from its
//! start. Prints how long after the run's last event the page showed it, how long the
//! page spent drawing while the run went, and how long drawing the finished run
//! whole takes on a fresh load.
//!
//! Needs what the web tests need (python3 with venv, chromium: `scripts/install-deps`).
//!
//! Run with: `cargo bench --bench web_view`

#[allow(dead_code)] // the bench reads only the address
#[path = "../../tests/all/browser.rs"]
mod browser;
#[allow(dead_code)] // the bench uses only the repository root
#[path = "../../tests/all/guests.rs"]
mod guests;

use std::fmt::Write as _;
use std::sync::Mutex;

/// Sub-agents in the run.
const CHILDREN: usize = 1000;
/// Spawns per root turn (one reply runs at most 256 tool calls).
const SPAWNS_PER_TURN: usize = 250;

/// The script: the root waits three seconds (the browser connects meanwhile), spawns
/// the children over four turns, awaits them and answers; each child answers after
/// 100 ms.
fn script() -> String {
    let mut script = String::new();
    for turn in 0..CHILDREN / SPAWNS_PER_TURN {
        let delay = if turn == 0 { 3000 } else { 200 };
        let _ = writeln!(
            script,
            "[[turns]]\nprofile = \"main\"\ndelay_ms = {delay}\ntool_calls = ["
        );
        for i in turn * SPAWNS_PER_TURN..(turn + 1) * SPAWNS_PER_TURN {
            let _ = writeln!(
                script,
                "  {{ name = \"spawn_agent\", arguments = {{ profile = \"worker\", description = \"child {i}\", task = \"CHILD {i}\" }} }},"
            );
        }
        script.push_str("]\n\n");
    }
    script.push_str("[[turns]]\nprofile = \"main\"\ntool_calls = [{ name = \"await_agents\", arguments = { job_ids = \"*\" } }]\n\n");
    script.push_str("[[turns]]\nprofile = \"main\"\ntext = \"all done\"\n\n");
    for _ in 0..CHILDREN {
        script.push_str(
            "[[turns]]\nprofile = \"worker\"\nwhen = \"CHILD\"\ndelay_ms = 100\ntext = \"done\"\n\n",
        );
    }
    script
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("script.toml"), script())?;
    std::fs::write(
        dir.path().join("warren.toml"),
        "[models.fake]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
         [defaults]\nmax_concurrent = 100\nmax_concurrent_total = 100\ntimeout_s = 600\nmax_turns = 10\n\n\
         [profiles.main]\ntools = []\n\n[profiles.worker]\ntools = []\n",
    )?;
    let served =
        browser::Served::start(dir.path(), &["run", "--progress", "none", "--web", "bench"]);
    let figures = Mutex::new(None);
    browser::browse("bench", &served.url, "web-view-bench.png", |line| {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
            *figures.lock().unwrap() = Some(value);
        }
    });
    drop(served);
    let figures = figures
        .into_inner()
        .unwrap()
        .ok_or_else(|| anyhow::anyhow!("the browser printed no figures"))?;
    let ms = |key: &str| figures[key].as_f64().unwrap_or(f64::NAN);
    println!(
        "{} agents, watched live: the run's last event shown {:.0} ms after it happened; \
         {} redraws, {:.1} ms drawing in all, the longest {:.1} ms",
        figures["agents"],
        ms("last_event_to_shown_ms"),
        figures["live_renders"],
        ms("live_render_total_ms"),
        ms("live_render_max_ms"),
    );
    println!(
        "{} agents, the finished run loaded fresh: snapshot drawn in {:.1} ms; \
         {:.0} ms from reload to the whole tree on screen",
        figures["agents"],
        ms("snapshot_render_ms"),
        ms("reload_to_tree_ms"),
    );
    Ok(())
}
