//! `warren replay`: replays recorded runs with today's configuration and plugins and
//! reports, for each, that it is the same (the tree), where it first differs (the
//! agent's path, the turn, and a diff), or that the recording ends before the run did.

use std::path::{Path, PathBuf};

use crate::host::{Host, RunReport};
use crate::jobs::{Divergence, ReplayTools, StopKind};
use crate::outcome::AgentState;
use crate::term::reportln;

/// What one replay found.
pub(crate) enum Verdict {
    /// Every request, tool result and answer as recorded.
    Same(RunReport),
    /// The recording ends before the run did: the same up to there.
    RecordingEnds(Divergence),
    /// The first difference.
    Differs(Divergence),
}

impl Verdict {
    /// Whether the replay matched everything recorded.
    pub(crate) fn matched(&self) -> bool {
        !matches!(self, Verdict::Differs(_))
    }
}

/// Replays the run recorded at `journal` on `host`.
pub(crate) async fn replay(
    host: &Host,
    journal: &Path,
    tools: ReplayTools,
) -> anyhow::Result<Verdict> {
    let (run, recording) = host.replay(journal, tools, None)?;
    let tree = run.tree.clone();
    let report = run.wait().await;
    if let Some(divergence) = tree.mode.replay().and_then(|r| r.divergence()) {
        return Ok(match divergence.kind {
            StopKind::Differs => Verdict::Differs(divergence),
            StopKind::RecordingEnds => Verdict::RecordingEnds(divergence),
        });
    }
    let root = recording.agent(&recording.root);
    let Some(recorded) = root.and_then(|r| r.finished.as_ref()) else {
        return Ok(Verdict::RecordingEnds(Divergence {
            kind: StopKind::RecordingEnds,
            path: tree.path(&run_root(&report)),
            turn: report.root.turns,
            what: "the recording ends before the root's end: the recorded run had not finished"
                .into(),
            detail: String::new(),
        }));
    };
    let same = recorded.state == report.root.state
        && recorded.text == report.root.text
        && recorded.output == report.root.output;
    if same {
        return Ok(Verdict::Same(report));
    }
    let show = |state: AgentState, text: &str| format!("{}\n{text}\n", state.as_str());
    Ok(Verdict::Differs(Divergence {
        kind: StopKind::Differs,
        path: tree.path(&run_root(&report)),
        turn: report.root.turns,
        what: "the root's answer differs from the recorded one".into(),
        detail: crate::agent::line_diff(
            &show(recorded.state, &recorded.text),
            &show(report.root.state, &report.root.text),
        ),
    }))
}

fn run_root(report: &RunReport) -> crate::jobs::JobId {
    report.agents[0].id.clone()
}

/// Forks the run recorded at `journal` as `fork` says, runs the fork to its end and
/// prints its id, tree and answer; `Err` when its root did not end well.
pub(crate) async fn fork(
    host: &Host,
    journal: &Path,
    tools: ReplayTools,
    fork: crate::jobs::Fork,
) -> anyhow::Result<()> {
    let from = fork.from.clone();
    let (run, recording) = host.replay(journal, tools, Some(fork))?;
    let id = run.tree.run_id.clone();
    eprintln!(
        "fork {id} of run {} from agent {from}: that agent's subtree runs live, the rest from the recording",
        recording.run
    );
    let report = run.wait().await;
    reportln!(
        "fork {id} of run {} from agent {from}: the root ended {}",
        recording.run,
        report.root.state.as_str()
    )?;
    reportln!("{}", tree(&report))?;
    reportln!("{}", report.root.text)?;
    eprintln!(
        "compare it with the recorded run: warren diff {} {id}",
        recording.run
    );
    anyhow::ensure!(
        report.root.state == AgentState::Ok,
        "the fork's root ended {}: {}",
        report.root.state.as_str(),
        report.root.reason()
    );
    Ok(())
}

/// Prints one replay's verdict in full: the tree, or where and how it differs.
pub(crate) fn print(name: &str, verdict: &Verdict) -> anyhow::Result<()> {
    match verdict {
        Verdict::Same(report) => {
            reportln!(
                "replay of {name}: the same ({} agent(s), every request and tool result as recorded)",
                report.agents.len()
            )?;
            reportln!("{}", tree(report))
        }
        Verdict::RecordingEnds(divergence) => reportln!(
            "replay of {name}: the same as far as the recording goes; at {} turn {}: {}",
            divergence.path,
            divergence.turn,
            divergence.what
        ),
        Verdict::Differs(divergence) => {
            reportln!(
                "replay of {name}: differs at {} turn {}: {}",
                divergence.path,
                divergence.turn,
                divergence.what
            )?;
            if divergence.detail.is_empty() {
                Ok(())
            } else {
                reportln!("{}", divergence.detail.trim_end())
            }
        }
    }
}

/// The replayed tree: one line per agent, children indented under their parent.
fn tree(report: &RunReport) -> String {
    let mut lines = Vec::new();
    let depth_of = |job: &crate::host::AgentReport| {
        let mut depth = 0;
        let mut at = job.parent.clone();
        while let Some(parent) = at {
            depth += 1;
            at = report
                .agents
                .iter()
                .find(|j| j.id == parent)
                .and_then(|j| j.parent.clone());
        }
        depth
    };
    for job in &report.agents {
        let turns = job.outcome.as_ref().map_or(0, |outcome| outcome.turns);
        let state = job.state();
        lines.push(format!(
            "{}{} [{}] {state}, {turns} turn(s)",
            "  ".repeat(depth_of(job)),
            job.title(),
            job.id
        ));
    }
    lines.join("\n")
}

/// The journals under `dir`: every `*/journal.jsonl` and `*.jsonl`, sorted.
pub(crate) fn journals_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?;
    let mut found = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let inner = path.join(crate::journal::writer::JOURNAL_FILE);
        if inner.is_file() {
            found.push(inner);
        } else if path.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
            found.push(path);
        }
    }
    found.sort();
    anyhow::ensure!(
        !found.is_empty(),
        "no journals in {} (a run directory with a journal.jsonl, or a .jsonl file)",
        dir.display()
    );
    Ok(found)
}

/// The one-line form of a verdict, for `--all`.
pub(crate) fn line(name: &str, verdict: &anyhow::Result<Verdict>) -> String {
    match verdict {
        Ok(Verdict::Same(report)) => format!("same     {name} ({} agents)", report.agents.len()),
        Ok(Verdict::RecordingEnds(d)) => {
            format!(
                "same     {name} (up to where the recording ends, at {} turn {})",
                d.path, d.turn
            )
        }
        Ok(Verdict::Differs(d)) => {
            format!("DIFFERS  {name} at {} turn {}: {}", d.path, d.turn, d.what)
        }
        Err(error) => format!("ERROR    {name}: {error:#}"),
    }
}
