//! How a job reads to the model that spawned it: one result block per job, and the
//! numbers in it.

use std::time::Duration;

use super::tree::{Job, Phase};
use crate::outcome::AgentState;

/// Formats a number with thousands separators (`1234567` as `1,234,567`).
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The result block of one job, as the parent model sees it.
pub(crate) fn result_block(job: &Job) -> String {
    match &job.phase {
        Phase::Queued => format!(
            "[{}: QUEUED] {} · waiting for a slot · {} so far",
            job.id,
            job.title(),
            seconds(job.created.elapsed())
        ),
        Phase::Running(started) => format!(
            "[{}: RUNNING] {} · {} so far",
            job.id,
            job.title(),
            seconds(started.elapsed())
        ),
        Phase::Done(outcome) => {
            let tag = match outcome.state {
                AgentState::Ok => "OK",
                AgentState::Cancelled => "CANCELLED",
                AgentState::TimedOut => "TIMEOUT",
                AgentState::Error
                | AgentState::MaxTurns
                | AgentState::BudgetExceeded
                | AgentState::Truncated
                | AgentState::Refused
                | AgentState::InvalidOutput => "ERROR",
            };
            let header = match outcome.state {
                AgentState::Ok => format!(
                    "{} · {} turns · {} tokens · ${:.4} · {}",
                    job.title(),
                    outcome.turns,
                    thousands(outcome.usage.total()),
                    outcome.cost_usd,
                    seconds(outcome.duration)
                ),
                _ => format!("{} · {}", job.title(), outcome.reason()),
            };
            let body = match (&outcome.state, outcome.error.as_deref()) {
                (AgentState::Ok, _) | (_, None) => outcome.text.clone(),
                (_, Some(error)) => {
                    // The header carries the error's first line; the body only what
                    // the error adds to it, then any partial output.
                    let more = error.lines().skip(1).collect::<Vec<_>>().join("\n");
                    let partial = (!outcome.text.is_empty())
                        .then(|| format!("Partial output: {}", outcome.text));
                    [(!more.trim().is_empty()).then_some(more), partial]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join("\n")
                }
            };
            let block = format!("[{}: {tag}] {header}\n{body}", job.id);
            let mut block = block.trim_end().to_string();
            for letter in job.mailbox.undelivered() {
                block.push_str(&format!(
                    "\nNot delivered (it ended first): message #{} from {}: {}",
                    letter.seq,
                    letter.from,
                    crate::term::bounded(&letter.text, 200)
                ));
            }
            block
        }
    }
}

/// `[id: NOT FOUND]`.
pub(crate) fn not_found_block(id: &str) -> String {
    format!("[{id}: NOT FOUND]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunLimits;
    use crate::jobs::tree::Tree;
    use crate::outcome::AgentOutcome;
    use tokio_util::sync::CancellationToken;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(2431), "2,431");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn a_failed_block_says_its_reason_once() {
        let tree = Tree::new(RunLimits::default());
        let root = tree.add_for_tests();
        let child = tree
            .insert(
                Some(&root),
                "coder",
                "t",
                None,
                None,
                CancellationToken::new(),
            )
            .0;
        let failed = |error: &str, text: &str| {
            tree.set_phase(
                &child,
                Phase::Done(AgentOutcome {
                    state: AgentState::MaxTurns,
                    error: Some(error.to_string()),
                    text: text.to_string(),
                    ..AgentOutcome::cancelled_before_start()
                }),
            );
            result_block(&tree.job(&child).unwrap())
        };
        assert_eq!(
            failed("max turns (10) reached", ""),
            format!("[{child}: ERROR] coder · max turns (10) reached")
        );
        assert_eq!(
            failed("max turns (10) reached", "half done"),
            format!("[{child}: ERROR] coder · max turns (10) reached\nPartial output: half done")
        );
        assert_eq!(
            failed("model error\nHTTP 500: busy", ""),
            format!("[{child}: ERROR] coder · model error\nHTTP 500: busy")
        );
    }
}
