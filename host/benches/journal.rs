//! What the run journal itself costs per sub-agent, in host CPU: the records of the
//! peer workload (`bench/peer-swarm`: a root spawns 1,000 researchers in ten rounds of
//! 100, each reads one file in two model turns, the root awaits each round) are built
//! and journaled as a run makes them, over the 2.4 s such a run takes, and the CPU
//! time of every thread of this process (the journal's writer thread included) is
//! compared with the same run's when the records are not made (the journal off). The end-to-end
//! figure (`bench/peer-swarm/run.sh --journal-cost N`) varies by several per cent from
//! one run to the next, more than the journal costs; this one is the journal alone.
//! The records are made inside the crate (`warren::journal_peer_workload`), whose
//! record types are its own; the journal's creation (once per run, against 1,000
//! agents' records) is timed with them.
//!
//! Run with: `cargo bench --bench journal [-- RUNS]`

use warren::journal_peer_workload;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or(Ok(5), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let mut costs = Vec::new();
    let (mut bytes, mut agents) = (0, 1.0);
    for run in 0..runs {
        // The same run with the journal off, then on: the difference is the journal's.
        let run_id = format!("run{run}");
        let cpu = cpu_ns();
        journal_peer_workload(None, &run_id).await?;
        let off = cpu_ns() - cpu;
        let cpu = cpu_ns();
        agents = journal_peer_workload(Some(dir.path()), &run_id).await? as f64;
        let on = cpu_ns() - cpu;
        bytes = std::fs::metadata(dir.path().join(format!("{run_id}/journal.jsonl")))?.len();
        costs.push((on as f64 - off as f64) / agents / 1000.0);
        println!(
            "run {run}: {:.1} µs of CPU per sub-agent with the journal, {:.1} µs without",
            on as f64 / agents / 1000.0,
            off as f64 / agents / 1000.0
        );
    }
    costs.sort_by(f64::total_cmp);
    println!(
        "journal: {:.1} µs of host CPU per sub-agent (median of {runs}), {:.1} KB of journal each",
        costs[costs.len() / 2],
        bytes as f64 / agents / 1000.0
    );
    Ok(())
}

/// CPU time of every thread of this process so far, in nanoseconds (from each
/// thread's `schedstat`).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}
