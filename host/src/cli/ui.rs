//! Progress for `warren run`: a live agent tree on a terminal, plain lines otherwise.
//!
//! The live view redraws in place (ANSI cursor movement) ten times a second: one line
//! per agent, nested under its parent, with a spinner, profile, what it is doing
//! (thinking, or the current tool), turns, tokens, cost and elapsed time; finished
//! agents show their state; the root's streamed text is shown below the tree while it
//! runs (the final frame drops it: the answer goes to stdout once).
//!
//! Every frame is cut to the terminal's width (so no line wraps and the cursor
//! arithmetic holds, resizes included) and ends by clearing the rest of the screen (so
//! a frame shorter than the last leaves nothing behind). Log lines go through
//! [`LiveStderr`](crate::term::LiveStderr), which erases the frame before writing and lets the next tick draw it
//! again below them.

use std::io::Write;
use std::sync::PoisonError;

use crate::events::{AgentIntro, Answered, Event, EventRecord};
use crate::jobs::run_state::{Activity, AgentProgress, RunState};
use crate::jobs::Phase;
use crate::outcome::AgentState;
use crate::sandbox::ToolOutcome;
use crate::term::{terminal_height, terminal_width, DRAWN};

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// Characters of the root's streamed text kept under the tree.
const TEXT_TAIL: usize = 240;

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProgressMode {
    /// The live tree on a terminal, plain lines otherwise.
    Auto,
    /// The live tree.
    Tty,
    /// One line per event that matters.
    Plain,
    /// Nothing.
    None,
}

/// `line` cut to `width` characters.
fn fit(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        line.to_string()
    } else {
        let mut cut: String = line.chars().take(width.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// The state of every agent, fed by events, and the root's streamed text.
#[derive(Debug, Default)]
pub(crate) struct AgentTree {
    /// Where each agent stands (the fold the web view shares).
    state: RunState,
    root_text: String,
    frame: usize,
    /// A request's prompt, shown under the tree while a person is asked here; the
    /// tree is not redrawn meanwhile.
    prompt: Option<String>,
}

impl AgentTree {
    /// Applies one event.
    pub(crate) fn apply(&mut self, record: &EventRecord) {
        self.state.apply(record);
        if let Event::TextDelta { agent, text } = &record.event {
            if self.state.root() == Some(agent.as_str()) {
                self.root_text.push_str(text);
                let chars = self.root_text.chars().count();
                if chars > TEXT_TAIL {
                    self.root_text = self.root_text.chars().skip(chars - TEXT_TAIL).collect();
                }
            }
        }
    }

    /// The tree as lines, parents before their children.
    pub(crate) fn lines(&self) -> Vec<String> {
        let now_ms = crate::events::now_ms();
        let mut out = Vec::new();
        for root in self.state.agents().filter(|a| a.parent.is_none()) {
            self.push_lines(&root.id, "", true, true, now_ms, &mut out);
        }
        out
    }

    fn push_lines(
        &self,
        id: &str,
        prefix: &str,
        last: bool,
        top: bool,
        now_ms: u64,
        out: &mut Vec<String>,
    ) {
        let Some(agent) = self.state.agent(id) else {
            return;
        };
        let branch = if top {
            ""
        } else if last {
            "└─ "
        } else {
            "├─ "
        };
        out.push(format!(
            "{prefix}{branch}{}",
            self.agent_line(agent, now_ms)
        ));
        let children = self.state.children(id);
        let child_prefix = if top {
            String::new()
        } else {
            format!("{prefix}{}", if last { "   " } else { "│  " })
        };
        for (i, child) in children.iter().enumerate() {
            let last = i + 1 == children.len();
            self.push_lines(child, &child_prefix, last, false, now_ms, out);
        }
    }

    /// One agent's line: its id, profile, state or what it does, and its figures.
    fn agent_line(&self, agent: &AgentProgress, now_ms: u64) -> String {
        let id = &agent.id;
        let status = match agent.duration_ms {
            Some(duration_ms) => {
                let mark = if agent.state == AgentState::Ok.as_str() {
                    '✓'
                } else {
                    '✗'
                };
                format!(
                    "{mark} {} · {} turns · {} tok · ${:.4} · {:.1} s",
                    agent.state,
                    agent.turns,
                    agent.tokens(),
                    agent.cost_usd,
                    duration_ms as f64 / 1000.0
                )
            }
            None => {
                let elapsed = agent
                    .started_ms
                    .map_or(0.0, |s| now_ms.saturating_sub(s) as f64 / 1000.0);
                let doing = doing(agent);
                format!(
                    "{} {doing} · {} turns · {} tok · ${:.4} · {elapsed:.1} s",
                    SPINNER[self.frame % SPINNER.len()],
                    agent.turns,
                    agent.tokens(),
                    agent.cost_usd
                )
            }
        };
        let name = match &agent.description {
            Some(label) => format!("{} ({label})", agent.profile),
            None => agent.profile.clone(),
        };
        let mail = match agent.messages.saturating_sub(agent.messages_read) {
            _ if agent.messages == 0 => String::new(),
            0 => format!(" · ✉ {} read", agent.messages),
            unread => format!(" · ✉ {} ({unread} unread)", agent.messages),
        };
        format!("{id} {name} {status}{mail}")
    }

    /// The tree in at most `rows` lines: whole when it fits, else collapsed to the
    /// root, the count of agents in each state, and the running and failed agents
    /// first, as many as fit.
    pub(crate) fn lines_within(&self, rows: usize) -> Vec<String> {
        let total = self.state.agents().count();
        if total <= rows {
            return self.lines();
        }
        let now_ms = crate::events::now_ms();
        let (mut running, mut failed, mut ok, mut queued) = (Vec::new(), Vec::new(), 0, 0);
        let mut root = None;
        for agent in self.state.agents() {
            match (agent.parent.is_none(), agent.duration_ms, agent.state) {
                (true, ..) => root = Some(agent),
                (_, None, "queued") => queued += 1,
                (_, None, _) => running.push(agent),
                (_, Some(_), state) if state == AgentState::Ok.as_str() => ok += 1,
                (_, Some(_), _) => failed.push(agent),
            }
        }
        let mut out: Vec<String> = root
            .map(|r| self.agent_line(r, now_ms))
            .into_iter()
            .collect();
        out.push(format!(
            "{total} agents: {} running · {queued} queued · {ok} ok · {} failed (too many to show: the running and failed first; `warren show` lists all)",
            running.len(),
            failed.len()
        ));
        let room = rows.saturating_sub(out.len() + 1);
        let shown: Vec<&AgentProgress> =
            running.iter().chain(&failed).take(room).copied().collect();
        out.extend(
            shown
                .iter()
                .map(|a| format!("├─ {}", self.agent_line(a, now_ms))),
        );
        let hidden = running.len() + failed.len() - shown.len();
        out.push(format!(
            "└─ … {} more not shown ({hidden} running or failed, {ok} ok, {queued} queued)",
            total - out.len() + 1
        ));
        out
    }

    /// Redraws the tree in place on stderr (a terminal).
    pub(crate) fn redraw(&mut self) -> std::io::Result<()> {
        self.draw(true)
    }

    /// Shows `prompt` under the tree (`None`: none), drawn at once. `typed`: a line
    /// was typed at the last prompt, so the cursor is a line lower.
    pub(crate) fn prompt(&mut self, prompt: Option<String>, typed: bool) -> std::io::Result<()> {
        if typed && self.prompt.is_some() {
            *DRAWN.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        }
        self.prompt = prompt;
        self.draw(true)
    }

    /// Whether a prompt waits for a line (the tree is then not redrawn).
    pub(crate) fn prompting(&self) -> bool {
        self.prompt.is_some()
    }

    /// The last frame: the tree without the streamed text (the answer follows on
    /// stdout), left on the screen.
    pub(crate) fn finish(&mut self) -> std::io::Result<()> {
        self.draw(false)?;
        *DRAWN.lock().unwrap_or_else(PoisonError::into_inner) = 0;
        Ok(())
    }

    fn draw(&mut self, with_text: bool) -> std::io::Result<()> {
        self.frame += 1;
        let width = terminal_width();
        let text: Vec<String> = match with_text && !self.root_text.trim().is_empty() {
            true => std::iter::once(String::new())
                .chain(self.root_text.lines().map(|l| format!("  {l}")))
                .collect(),
            false => Vec::new(),
        };
        // A frame taller than the terminal cannot be redrawn in place: the tree is
        // collapsed to what fits under the text and prompt.
        let below = text.len() + self.prompt.as_ref().map_or(0, |p| p.lines().count());
        let rows =
            terminal_height().map_or(usize::MAX, |rows| rows.saturating_sub(below + 1).max(4));
        let mut lines = self.lines_within(rows);
        lines.extend(text);
        let mut drawn = DRAWN.lock().unwrap_or_else(PoisonError::into_inner);
        let mut frame = String::new();
        if *drawn > 0 {
            frame.push_str(&format!("\x1b[{}A\r", *drawn));
        }
        for line in &lines {
            frame.push_str("\x1b[2K");
            frame.push_str(&fit(line, width.saturating_sub(1).max(1)));
            frame.push('\n');
        }
        frame.push_str("\x1b[J");
        *drawn = lines.len();
        // The prompt's last line ends where the person types: no newline after it.
        if let Some(prompt) = &self.prompt {
            let prompt: Vec<&str> = prompt.split('\n').collect();
            for (i, line) in prompt.iter().enumerate() {
                frame.push_str(&fit(line, width.saturating_sub(1).max(1)));
                if i + 1 < prompt.len() {
                    frame.push('\n');
                }
            }
            *drawn += prompt.len() - 1;
        }
        let mut err = std::io::stderr().lock();
        err.write_all(frame.as_bytes())?;
        err.flush()?;
        Ok(())
    }
}

/// The plain, append-only line for an event, if it is worth one.
pub(crate) fn plain_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::AgentQueued(AgentIntro {
            agent,
            parent,
            profile,
            task,
            label,
            ..
        }) => {
            format!(
                "[{agent}] queued {} (parent {}): {task}",
                crate::jobs::title(profile, label.as_deref()),
                parent.as_deref().unwrap_or("-")
            )
        }
        Event::AgentStarted(AgentIntro {
            agent,
            profile,
            task,
            label,
            ..
        }) => format!(
            "[{agent}] started {}: {task}",
            crate::jobs::title(profile, label.as_deref())
        ),
        Event::ToolCallFinished {
            agent,
            tool,
            outcome,
            duration_ms,
            summary,
            ..
        } => {
            if *outcome == ToolOutcome::Ok {
                format!("[{agent}] {tool} ok ({duration_ms} ms)")
            } else {
                format!("[{agent}] {tool} {outcome} ({duration_ms} ms): {summary}")
            }
        }
        Event::AgentFinished {
            agent,
            state,
            turns,
            cost_usd,
            duration_ms,
            error,
            ..
        } => format!(
            "[{agent}] finished {state} · {turns} turns · ${cost_usd:.4} · {:.1} s{}",
            *duration_ms as f64 / 1000.0,
            error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
        ),
        Event::AgentMessage {
            agent,
            seq,
            from,
            mode,
            text,
        } => format!(
            "[{agent}] message #{seq} from {from} ({}): {}",
            mode.as_str(),
            crate::events::summarize(text)
        ),
        Event::AgentMessageDelivered { agent, seq, turn } => {
            format!("[{agent}] message #{seq} delivered (turn {turn})")
        }
        Event::InputRequested(_) | Event::InputAnswered(_) => person_line(event)?,
        Event::Lagged { missed } => format!("(progress fell behind: {missed} events not shown)"),
        _ => return None,
    })
}

/// What a running agent is doing, as its line says it.
fn doing(agent: &crate::jobs::run_state::AgentProgress) -> String {
    if let Some(request) = &agent.request {
        let state = request.kind.waiting_state();
        return format!("⏸ {state} {} ({})", request.tool, request.id);
    }
    match &agent.activity {
        Activity::Queued => Phase::Queued.name().to_string(),
        Activity::Starting => "starting".to_string(),
        Activity::Thinking | Activity::Done => "thinking".to_string(),
        Activity::Tool(tool) => format!("⚙ {tool}"),
    }
}

/// The plain line of a request for a person, or of its answer.
fn person_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::InputRequested(request) => format!(
            "[{}] {} {} (request {}): `warren approve RUN {}` answers it",
            request.agent,
            request.kind.waiting_state(),
            request.tool,
            request.id,
            request.id
        ),
        Event::InputAnswered(Answered {
            agent,
            request,
            answer,
        }) => format!(
            "[{agent}] request {request}: {:?} by {}{}",
            answer.verdict,
            answer.by,
            match answer.text.is_empty() {
                true => String::new(),
                false => format!(": {}", crate::events::summarize(&answer.text)),
            }
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::queued;

    /// Children sit under their parent in the order they appeared, however the
    /// events of different branches interleave, and an agent seen twice (queued,
    /// then started) is listed once.
    #[test]
    fn the_tree_nests_children_in_order_of_appearance() {
        let mut tree = AgentTree::default();
        for event in [
            queued("r", None),
            queued("a", Some("r")),
            queued("b", Some("r")),
            queued("a1", Some("a")),
            Event::AgentStarted(AgentIntro {
                agent: "a".into(),
                parent: Some("r".into()),
                profile: "p".into(),
                task: String::new(),
                label: None,
                mode: None,
            }),
        ] {
            tree.apply(&EventRecord {
                ts_ms: 0,
                run: "r".into(),
                event,
            });
        }
        let shape: Vec<String> = tree
            .lines()
            .iter()
            .map(|line| line.split(" p ").next().unwrap().to_string())
            .collect();
        assert_eq!(shape, ["r", "├─ a", "│  └─ a1", "└─ b"]);
    }

    /// A tree taller than the terminal collapses to the root, the counts per state
    /// and the running and failed agents first, within the rows it has.
    #[test]
    fn a_tree_taller_than_the_terminal_shows_counts_and_the_running_and_failed_first() {
        use crate::outcome::AgentOutcome;
        let mut tree = AgentTree::default();
        let mut events = vec![queued("r", None)];
        let started = |id: &str| {
            Event::AgentStarted(AgentIntro {
                agent: id.into(),
                parent: Some("r".into()),
                profile: "p".into(),
                task: String::new(),
                label: None,
                mode: None,
            })
        };
        for i in 0..30 {
            let id = format!("c{i:02}");
            events.push(queued(&id, Some("r")));
            if i < 25 {
                events.push(started(&id));
            }
            let state = match i {
                0..10 => Some(AgentState::Ok),
                10..13 => Some(AgentState::Error),
                _ => None,
            };
            if let Some(state) = state {
                let outcome = AgentOutcome {
                    state,
                    ..AgentOutcome::cancelled_before_start()
                };
                events.push(Event::agent_finished(&id, &outcome));
            }
        }
        for event in events {
            tree.apply(&EventRecord {
                ts_ms: 0,
                run: "r".into(),
                event,
            });
        }
        assert_eq!(tree.lines_within(40).len(), 31, "it fits: whole");
        let lines = tree.lines_within(10);
        assert_eq!(lines.len(), 10, "{lines:#?}");
        assert!(lines[0].starts_with("r p "), "{lines:#?}");
        assert!(
            lines[1].starts_with("31 agents: 12 running · 5 queued · 10 ok · 3 failed"),
            "{lines:#?}"
        );
        // The running ones (c13 to c24) first, as many as fit.
        let shown: Vec<&str> = lines[2..9].iter().map(|l| &l[7..10]).collect();
        assert_eq!(
            shown,
            ["c13", "c14", "c15", "c16", "c17", "c18", "c19"],
            "{lines:#?}"
        );
        assert!(
            lines[9].contains("23 more not shown (8 running or failed, 10 ok, 5 queued)"),
            "{lines:#?}"
        );
    }
}
