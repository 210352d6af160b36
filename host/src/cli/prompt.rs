//! The terminal's answers to a run's requests for a person: while one waits, the live
//! tree shows it under the agents with a prompt and is redrawn only when an event
//! changes it, not ten times a second (a draw clears what was typed and not yet
//! entered, though the terminal keeps it); the line typed answers it (`y` approves once, `a`
//! approves the tool for the rest of the run, `n REASON` denies; a question takes the
//! line as its answer), and the tree goes on. The same request answered elsewhere
//! (`warren approve`, the web view) takes the prompt away.

use std::io::BufRead as _;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::events::{PersonAnswer, PersonRequest, RequestKind, Verdict};
use crate::jobs::Tree;

/// The requests of one run, answered from this terminal.
pub(super) struct Prompter {
    tree: Arc<Tree>,
    changed: watch::Receiver<u64>,
    lines: mpsc::Receiver<String>,
    /// The request the prompt shows.
    shown: Option<PersonRequest>,
}

impl Prompter {
    /// Reads standard input (a terminal) on a thread of its own, line by line.
    pub(super) fn new(tree: Arc<Tree>) -> Prompter {
        let (send, lines) = mpsc::channel(4);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if send.blocking_send(line).is_err() {
                    break;
                }
            }
        });
        let mut changed = tree.requests.watch();
        // A request may have opened before this: look at once.
        changed.mark_changed();
        Prompter {
            tree,
            changed,
            lines,
            shown: None,
        }
    }

    /// Waits until the requests change or a line is typed; returns the prompt to
    /// show now (`None`: nothing waits), and whether a line was typed (its newline
    /// moved the cursor).
    pub(super) async fn next(&mut self) -> (Option<String>, bool) {
        let typed = tokio::select! {
            changed = self.changed.changed() => {
                if changed.is_err() {
                    std::future::pending::<()>().await;
                }
                false
            }
            line = self.lines.recv() => match line {
                Some(line) => {
                    self.answer(&line);
                    true
                }
                None => std::future::pending().await,
            },
        };
        (self.refresh(), typed)
    }

    /// The first waiting request, as the prompt shows it.
    fn refresh(&mut self) -> Option<String> {
        self.shown = self.tree.requests.pending().into_iter().next();
        self.shown.as_ref().map(prompt)
    }

    /// Answers the shown request with `line` (nothing shown: the line is dropped).
    fn answer(&mut self, line: &str) {
        let Some(request) = self.shown.take() else {
            return;
        };
        let line = line.trim();
        let (verdict, text) = match request.kind {
            RequestKind::Question => (Verdict::Answer, line.to_string()),
            RequestKind::Approval => match line.split_once(' ').unwrap_or((line, "")) {
                ("y" | "yes", _) => (Verdict::Approve, String::new()),
                ("a" | "always", _) => (Verdict::ApproveTool, String::new()),
                ("n" | "no", reason) => (Verdict::Deny, reason.trim().to_string()),
                // Anything else asks again.
                _ => return,
            },
        };
        let answer = PersonAnswer {
            verdict,
            text,
            by: "terminal".into(),
        };
        if let Err(why) = self.tree.requests.answer(&request.id, answer) {
            tracing::info!(request = %request.id, %why, "the terminal's answer came too late");
        }
    }
}

/// The prompt for `request`: what it asks and how to answer.
fn prompt(request: &PersonRequest) -> String {
    let described = super::approve::described(request);
    let how = match request.kind {
        RequestKind::Approval => "y approve · a always (this tool, this run) · n REASON deny",
        RequestKind::Question => "type the answer",
    };
    format!("⏸ {described}\n{how} › ")
}
