//! Progress of agents someone follows (an MCP call's progress messages, an A2A task's
//! status), one line per change of an agent it follows, e.g.
//! `[a3f9c1 researcher] turn 2 · calling read_file · 1,234 tokens · $0.0012`.

use std::collections::BTreeMap;

use super::thousands;
use crate::events::{AgentIntro, Event};

/// What one followed agent is doing.
#[derive(Default)]
struct AgentView {
    /// Its profile.
    profile: String,
    /// The model turn it is on (0 before the first).
    turn: u32,
    /// The tool it is calling, if any.
    tool: Option<String>,
    /// Tokens used so far.
    tokens: u64,
    /// Dollars spent so far.
    cost_usd: f64,
}

/// The agents a call follows, and how many progress messages it sent.
#[derive(Default)]
pub(crate) struct CallProgress {
    /// By agent id.
    agents: BTreeMap<String, AgentView>,
    /// Messages produced so far: the `progress` value, which must only increase.
    count: u64,
}

impl CallProgress {
    /// Takes in `event`; returns the progress value and message it is worth, if any
    /// (an agent's limits, streamed text and lost-event markers are not).
    pub(crate) fn update(&mut self, event: &Event) -> Option<(f64, String)> {
        let agent = event.agent()?.to_string();
        let view = self.agents.entry(agent.clone()).or_default();
        let status = match event {
            Event::AgentQueued(AgentIntro { profile, .. }) => {
                view.profile.clone_from(profile);
                "queued".to_string()
            }
            Event::AgentStarted(AgentIntro { profile, .. }) => {
                view.profile.clone_from(profile);
                "started".to_string()
            }
            Event::TurnStarted { turn, .. } => {
                view.turn = *turn;
                view.tool = None;
                view.status()
            }
            Event::ToolCallStarted { tool, .. } => {
                view.tool = Some(tool.clone());
                view.status()
            }
            Event::ToolCallFinished { .. } => {
                view.tool = None;
                view.status()
            }
            Event::Usage {
                turns,
                input_tokens,
                output_tokens,
                cost_usd,
                ..
            } => {
                view.turn = view.turn.max(*turns);
                view.tokens = input_tokens.saturating_add(*output_tokens);
                view.cost_usd = *cost_usd;
                view.status()
            }
            Event::AgentFinished {
                state,
                turns,
                input_tokens,
                output_tokens,
                cost_usd,
                ..
            } => {
                view.tokens = input_tokens.saturating_add(*output_tokens);
                view.cost_usd = *cost_usd;
                format!(
                    "{state} · {turns} turns · {} tokens · ${cost_usd:.4}",
                    thousands(view.tokens)
                )
            }
            Event::AgentMessage { seq, mode, .. } => {
                format!("message #{seq} sent to it ({})", mode.as_str())
            }
            Event::AgentMessageDelivered { seq, turn, .. } => {
                format!("message #{seq} delivered at turn {turn}")
            }
            Event::InputRequested(_) | Event::InputAnswered(_) => person(event)?,
            Event::AgentSpec { .. } | Event::TextDelta { .. } | Event::Lagged { .. } => {
                return None
            }
        };
        self.count += 1;
        let label = if view.profile.is_empty() {
            agent
        } else {
            format!("{agent} {}", view.profile)
        };
        Some((self.count as f64, format!("[{label}] {status}")))
    }
}

/// A request for a person, or its answer, as a progress message.
fn person(event: &Event) -> Option<String> {
    Some(match event {
        Event::InputRequested(request) => format!(
            "waiting for a person: {} `{}` (request {})",
            match request.kind {
                crate::events::RequestKind::Approval => "approve",
                crate::events::RequestKind::Question => "answer",
            },
            request.tool,
            request.id
        ),
        Event::InputAnswered(answered) => format!(
            "request {} answered by {}",
            answered.request, answered.answer.by
        ),
        _ => return None,
    })
}

impl AgentView {
    /// `turn 2 · calling read_file · 1,234 tokens · $0.0012`.
    fn status(&self) -> String {
        let mut parts = Vec::new();
        if self.turn > 0 {
            parts.push(format!("turn {}", self.turn));
        }
        if let Some(tool) = &self.tool {
            parts.push(format!("calling {tool}"));
        }
        parts.push(format!("{} tokens", thousands(self.tokens)));
        parts.push(format!("${:.4}", self.cost_usd));
        parts.join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_follow_turns_tools_and_usage() {
        let mut progress = CallProgress::default();
        let agent = || "a3f9c1".to_string();
        let mut messages = Vec::new();
        for event in [
            Event::AgentStarted(AgentIntro {
                agent: agent(),
                parent: Some("root".into()),
                profile: "researcher".into(),
                task: "t".into(),
                label: None,
                mode: None,
            }),
            Event::TurnStarted {
                agent: agent(),
                turn: 2,
            },
            Event::TextDelta {
                agent: agent(),
                text: "hm".into(),
            },
            Event::Usage {
                agent: agent(),
                turns: 2,
                input_tokens: 1000,
                output_tokens: 234,
                cost_usd: 0.0012,
            },
            Event::ToolCallStarted {
                agent: agent(),
                call_id: "c".into(),
                tool: "read_file".into(),
                arguments: "{}".into(),
            },
        ] {
            messages.extend(progress.update(&event));
        }
        assert_eq!(
            messages,
            [
                (1.0, "[a3f9c1 researcher] started".to_string()),
                (
                    2.0,
                    "[a3f9c1 researcher] turn 2 · 0 tokens · $0.0000".into()
                ),
                (
                    3.0,
                    "[a3f9c1 researcher] turn 2 · 1,234 tokens · $0.0012".into()
                ),
                (
                    4.0,
                    "[a3f9c1 researcher] turn 2 · calling read_file · 1,234 tokens · $0.0012"
                        .into()
                ),
            ]
        );
    }
}
