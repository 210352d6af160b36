//! What the sub-agent benches share: the scripted model's turns, and the check that
//! a run went as scripted.

use std::fmt::Write as _;

use warren::{AgentState, RunReport};

/// Spawns one model reply may make: a reply runs at most
/// `MAX_TOOL_CALLS_PER_REPLY` (256) tool calls.
const SPAWNS_PER_TURN: usize = 250;

/// The root's turns: spawn `children` `worker` sub-agents ("CHILD i"), at most
/// [`SPAWNS_PER_TURN`] per turn, await them all, answer.
pub(crate) fn root_turns(children: usize) -> String {
    let mut script = String::new();
    // The root's first requests take these turns in order (they match any input).
    for first in (0..children).step_by(SPAWNS_PER_TURN) {
        script.push_str("[[turns]]\nprofile = \"main\"\ntool_calls = [\n");
        for i in first..children.min(first + SPAWNS_PER_TURN) {
            let _ = writeln!(script, "  {{ name = \"spawn_agent\", arguments = {{ profile = \"worker\", task = \"CHILD {i}\" }} }},");
        }
        script.push_str("]\n\n");
    }
    // After its spawns ("Started job …" or, past max_concurrent, "Queued job …").
    script.push_str("[[turns]]\nprofile = \"main\"\nwhen = \"ed job \"\ntool_calls = [{ name = \"await_agents\", arguments = { job_ids = \"*\" } }]\n\n");
    script.push_str("[[turns]]\nprofile = \"main\"\nwhen = \"OK]\"\ntext = \"all done\"\n\n");
    // If children finish before the root's second turn, their notifications come
    // first; the root answers, is told the others still run, and gets their results.
    script.push_str(
        "[[turns]]\nprofile = \"main\"\nwhen = \"still running\"\ntext = \"all done\"\n\n",
    );
    script
}

/// The turns of `children` `worker` sub-agents: an `echo` call, then the answer,
/// each after `latency_ms`.
pub(crate) fn child_turns(children: usize, latency_ms: u64) -> String {
    let mut script = String::new();
    for _ in 0..children {
        let _ = writeln!(script, "[[turns]]\nprofile = \"worker\"\nwhen = \"CHILD\"\ndelay_ms = {latency_ms}\ntool_calls = [{{ name = \"echo\", arguments = {{ bench = 1 }} }}]\n");
        let _ = writeln!(script, "[[turns]]\nprofile = \"worker\"\nwhen = \"bench\"\ndelay_ms = {latency_ms}\ntext = \"done\"\n");
    }
    script
}

/// Fails unless the root and each of its `children` ended ok.
pub(crate) fn ensure_all_ok(report: &RunReport, children: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        report.root.state == AgentState::Ok,
        "run failed: {:?}",
        report.root
    );
    anyhow::ensure!(
        report.agents.len() == children + 1,
        "expected {} agents, got {}",
        children + 1,
        report.agents.len()
    );
    let failed: Vec<_> = report
        .agents
        .iter()
        .filter(|a| {
            !a.outcome
                .as_ref()
                .is_some_and(|o| o.state == AgentState::Ok)
        })
        .map(|a| (&a.id, a.state()))
        .collect();
    anyhow::ensure!(failed.is_empty(), "children failed: {failed:?}");
    Ok(())
}
