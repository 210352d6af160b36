//! Recorded model turns: the journal record of a response, a recorded response
//! turned back into the model's answer (a resumed run does not ask a turn the
//! journal holds), and, in a replay (`warren replay`), the check that each request
//! and tool result is the recorded one, with a readable diff where it is not.
//!
//! What "the same" means in a replay: requests are matched per agent and turn (an
//! agent is the recorded child its parent spawned with the same profile and task),
//! never by the run's global order, and each agent is given its children's results
//! at the turns the recording gave them, whatever order its children end in now. A
//! request matches when the digest of the body that would be sent equals the
//! recorded one; a tool result when its outcome and text do.

use crate::jobs::mode::AgentMode;
use crate::jobs::{Divergence, Replay, StopKind};
use crate::journal::resume::{RecordedAgent, RecordedResponse, RecordedTool};
use crate::journal::{Drained, Record, RecordedCall};
use crate::llm::{AssistantMessage, ChatRequest, ChatResponse, FinishReason, Provider, ToolCall};
use crate::outcome::AgentState;
use crate::sandbox::{CallFigures, ToolOutcome};

use super::line_diff::line_diff;
use super::runtime::Agent;

/// What a turn's request was given besides the last turn's tool results: children's
/// results delivered by notification, or after trying to finish while they ran.
#[derive(Debug, Default)]
pub(super) struct Delivered {
    /// Children whose results came in a notification before the turn.
    pub notified: Vec<String>,
    /// Receipts of its messages given before the turn, by number.
    pub receipts: Vec<u64>,
    /// Children waited for when the agent tried to finish.
    pub drained: Option<Drained>,
}

/// The journal record of turn `turn`'s `response` to `request`.
pub(super) fn record_response(
    agent: &crate::jobs::JobId,
    turn: u32,
    request: &ChatRequest,
    response: &crate::llm::ChatResponse,
    delivered: Delivered,
) -> Record {
    let message = &response.message;
    Record::ModelResponse {
        agent: agent.0.clone(),
        turn,
        request_messages: request.messages.len(),
        notified: delivered.notified,
        receipts: delivered.receipts,
        drained: delivered.drained,
        request_digest: response.request_digest.clone(),
        text: message.text.clone(),
        reasoning: message.reasoning.clone(),
        refusal: message.refusal.clone(),
        provider_blocks: message.provider_blocks.clone(),
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| RecordedCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })
            .collect(),
        finish: match &response.finish {
            FinishReason::Stop => "stop".into(),
            FinishReason::ToolCalls => "tool_calls".into(),
            FinishReason::Length => "length".into(),
            FinishReason::ContentFilter => "content_filter".into(),
            FinishReason::Other(other) => other.clone(),
        },
        input_tokens: response.usage.input_tokens,
        cached_input_tokens: response.usage.cached_input_tokens,
        output_tokens: response.usage.output_tokens,
        cost_usd: response.cost_usd,
    }
}

/// A recorded response as the model's answer again (a resumed run asks nothing it
/// has an answer to).
pub(super) fn replayed_response(recorded: &RecordedResponse) -> crate::llm::ChatResponse {
    crate::llm::ChatResponse {
        message: AssistantMessage {
            text: recorded.text.clone(),
            tool_calls: recorded
                .tool_calls
                .iter()
                .map(|call| ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                })
                .collect(),
            reasoning: recorded.reasoning.clone(),
            refusal: recorded.refusal.clone(),
            provider_blocks: recorded.provider_blocks.clone(),
        },
        finish: match recorded.finish.as_str() {
            "stop" => FinishReason::Stop,
            "tool_calls" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_string()),
        },
        usage: recorded.usage,
        cost_usd: recorded.cost_usd,
        request_digest: recorded.request_digest.clone(),
    }
}

impl Agent {
    /// What the run's mode means for this agent, asked once per decision.
    pub(super) fn mode(&self) -> AgentMode<'_> {
        self.place.tree.mode.agent(&self.place.id)
    }

    /// In a replay, the recorded answer to turn `turn` once `request` is found to be
    /// the recorded one; a different request, or a turn the recording does not have,
    /// stops the replay there. An agent whose recorded run failed at this turn (its
    /// model call did) ends as it did. In a fork, the agent runs live from such a
    /// point instead (`Ok(None)`: ask the model).
    pub(super) fn replayed_turn(
        &self,
        (replay, agent): (&Replay, Option<&RecordedAgent>),
        provider: &dyn Provider,
        request: &ChatRequest,
        turn: u32,
    ) -> Result<Option<ChatResponse>, (AgentState, String)> {
        if replay.fork.is_some() {
            let recorded = agent.and_then(|a| a.response(turn));
            let same = recorded.is_some_and(|r| {
                r.request_digest.is_none() || r.request_digest == provider.request_digest(request)
            });
            return Ok(match recorded.filter(|_| same) {
                Some(recorded) => Some(replayed_response(recorded)),
                None => {
                    tracing::info!(agent = %self.place.id, turn, "the fork leaves the recording here: live from this turn");
                    replay.go_live(&self.place.id.0);
                    None
                }
            });
        }
        let Some(agent) = agent else {
            return Err(self.stop_replay(
                StopKind::Differs,
                turn,
                "this agent is not in the recording (its parent spawned it with another profile or task)".into(),
                String::new(),
            ));
        };
        let Some(recorded) = agent.response(turn) else {
            return Err(match &agent.finished {
                Some(outcome) if outcome.state != AgentState::Ok => {
                    // It ended here in the recording too (its model call failed, or a
                    // limit or cancel ended it): the same end.
                    (outcome.state, outcome.error.clone().unwrap_or_default())
                }
                Some(outcome) => self.stop_replay(
                    StopKind::Differs,
                    turn,
                    format!(
                        "the recording has no turn {turn}: the agent answered after {} turn(s)",
                        outcome.turns
                    ),
                    String::new(),
                ),
                None => self.stop_replay(
                    StopKind::RecordingEnds,
                    turn,
                    "the recording ends here: the recorded run had not finished".into(),
                    String::new(),
                ),
            });
        };
        if let (Some(was), Some(now)) = (&recorded.request_digest, provider.request_digest(request))
        {
            if *was != now {
                return Err(self.stop_replay(
                    StopKind::Differs,
                    turn,
                    "the request to the model differs from the recorded one".into(),
                    request_diff(agent, recorded, request, provider.model()),
                ));
            }
        }
        Ok(Some(replayed_response(recorded)))
    }

    /// In a replay, `call`'s result: run again and compared with the recorded one
    /// (`--tools rerun`, and always for spawn tools, which re-create the children), or
    /// the recorded one (`--tools recorded`). A result that differs, or a call the
    /// recording has no result for, stops the replay there.
    pub(super) async fn replayed_call(
        &self,
        replay: &Replay,
        call: &ToolCall,
        turn: u32,
        recorded: Option<RecordedTool>,
    ) -> Result<String, String> {
        if replay.fork.is_some() && recorded.as_ref().is_none_or(|r| r.finished.is_none()) {
            // Not in the recording: the fork runs it (a person approving it first
            // where its rule says).
            let refusal = self.approval(call, turn).await;
            let work = self.work(call, turn);
            return self.traced_call(call, work, None, refusal).await;
        }
        let Some((outcome, content)) = recorded.and_then(|r| r.finished) else {
            return Err(self.stop_without_result(call, turn));
        };
        let recorded_result = if outcome == ToolOutcome::Ok {
            Ok(content)
        } else {
            Err(content)
        };
        let spawn = super::spawn_tools::is_spawn_tool(&call.name);
        // What the recorded run observed of its children (their states in
        // `list_agents`) is a recorded fact: served as recorded, not observed again.
        // So is a message's receipt: the message itself is left for its agent as the
        // recording delivered it.
        let observed =
            call.name == "list_agents" || super::spawn_tools::is_message_tool(&call.name);
        if (replay.tools == crate::jobs::ReplayTools::Recorded && !spawn) || observed {
            self.send_waking_follow_up(call);
            return self.served_as_recorded(call, outcome, recorded_result);
        }
        // So is a background spawn's place in the queue: the child is spawned again, and
        // the answer says it was queued (or started) as the recorded answer said.
        let queued_as = (call.name == "spawn_agent")
            .then(|| recorded_result.as_ref().ok())
            .flatten()
            .map(|text| text.starts_with(super::spawn_tools::QUEUED_ANSWER_START));
        // A call run again is approved as the recording's person answered.
        let refusal = self.approval(call, turn).await;
        let result = self
            .traced_call(
                call,
                self.spawn_tool_placed(&call.name, &call.arguments, queued_as),
                None,
                refusal,
            )
            .await;
        // In a fork, a new result is where this agent may leave the recording: its
        // next request then differs, and it runs live from there.
        if result != recorded_result && replay.fork.is_none() {
            let text = |r: &Result<String, String>| match r {
                Ok(text) => format!("ok:\n{text}"),
                Err(text) => format!("error:\n{text}"),
            };
            self.stop_replay(
                StopKind::Differs,
                turn,
                format!(
                    "the result of `{}` (call {}) differs from the recorded one",
                    call.name, call.id
                ),
                line_diff(&text(&recorded_result), &text(&result)),
            );
        }
        result
    }

    /// A recorded `message_agent` call that woke an agent resting after it finished:
    /// the follow-up is left for it now, as the recorded run left it, so the agent
    /// rests and wakes where it did (its first result reached its parent first).
    fn send_waking_follow_up(&self, call: &ToolCall) {
        if !super::spawn_tools::is_message_tool(&call.name) {
            return;
        }
        let Ok(args) = serde_json::from_str::<serde_json::Value>(&call.arguments) else {
            return;
        };
        let (Some(to), Some(text)) = (args["job_id"].as_str(), args["message"].as_str()) else {
            return;
        };
        let to = crate::jobs::JobId(to.to_string());
        let Some(agent) = self.place.tree.mode.recorded(&to) else {
            return;
        };
        let me = Some(self.place.id.0.as_str());
        let waking = agent.letters.iter().find(|letter| {
            agent.woken_by(letter) && letter.sender.as_deref() == me && letter.text == text
        });
        if let Some(letter) = waking {
            let letter = crate::jobs::mailbox::Letter::recorded(letter, 0);
            self.runtime
                .scheduler
                .leave_as_recorded(&self.place.tree, &to, letter);
        }
    }

    /// Stops the replay at `call`, which the recording has no result for: the recording
    /// differs if this agent finished in it, else it ends here. Returns the message.
    fn stop_without_result(&self, call: &ToolCall, turn: u32) -> String {
        let recorded = self.place.tree.mode.recorded(&self.place.id);
        let (kind, what) = match recorded.and_then(|a| a.finished.as_ref()) {
            Some(_) => (
                StopKind::Differs,
                format!(
                    "the recording has no call `{}` ({}) at this turn",
                    call.name, call.id
                ),
            ),
            None => (
                StopKind::RecordingEnds,
                format!(
                    "the recording ends here: call `{}` ({}) had no recorded result",
                    call.name, call.id
                ),
            ),
        };
        self.stop_replay(kind, turn, what, String::new()).1
    }

    /// A call's recorded result, served as the recording gave it (no guest runs) and
    /// journaled as served: a fork's journal is a whole run, the call in it.
    fn served_as_recorded(
        &self,
        call: &ToolCall,
        outcome: ToolOutcome,
        recorded_result: Result<String, String>,
    ) -> Result<String, String> {
        self.place.tree.record(|| Record::ToolStarted {
            agent: self.place.id.0.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        // Served from the recording: no guest ran in this run, so no fuel.
        self.place.tree.record(|| {
            let content = match &recorded_result {
                Ok(text) | Err(text) => text.clone(),
            };
            Record::ToolFinished {
                agent: self.place.id.0.clone(),
                call_id: call.id.clone(),
                outcome,
                figures: CallFigures::of(&content, None),
                content,
                duration_ms: 0,
            }
        });
        recorded_result
    }

    /// In a replay, the wall time the recording gives this agent, so the result
    /// block its parent reads (which shows it) is the recorded one.
    pub(super) fn replayed_duration(&self) -> Option<std::time::Duration> {
        match self.mode() {
            AgentMode::Replayed(_, Some(agent)) => Some(agent.finished.as_ref()?.duration),
            _ => None,
        }
    }

    /// Notes where this agent left the recording (the first such point ends the
    /// whole replay) and returns how the agent ends.
    fn stop_replay(
        &self,
        kind: StopKind,
        turn: u32,
        what: String,
        detail: String,
    ) -> (AgentState, String) {
        let Some(replay) = self.place.tree.mode.replay() else {
            return (AgentState::Error, format!("replay stopped: {what}"));
        };
        let first = replay.stop(Divergence {
            kind,
            path: self.place.tree.path(&self.place.id),
            turn,
            what: what.clone(),
            detail,
        });
        if first {
            self.place.tree.cancel.cancel();
        }
        (AgentState::Error, format!("replay stopped: {what}"))
    }
}

/// The recorded and the new request side by side where they differ: the system
/// prompt, the tool definitions, and otherwise what can be told of the messages.
fn request_diff(
    agent: &RecordedAgent,
    recorded: &RecordedResponse,
    request: &ChatRequest,
    model: &str,
) -> String {
    let mut parts = Vec::new();
    if agent.system != request.system && !agent.system.is_empty() {
        parts.push(format!(
            "system prompt:\n{}",
            line_diff(&agent.system, &request.system)
        ));
    }
    if let Some(tools) = &agent.tool_defs {
        let was: String = tools
            .iter()
            .map(|t| tool_line(&t.name, &t.description, &t.input_schema))
            .collect();
        let now: String = request
            .tools
            .iter()
            .map(|t| tool_line(&t.name, &t.description, &t.input_schema))
            .collect();
        if was != now {
            parts.push(format!("tool definitions:\n{}", line_diff(&was, &now)));
        }
    }
    if parts.is_empty() {
        let mut note = String::from(
            "the system prompt and the tool definitions are as recorded: the messages or the model's settings differ",
        );
        if recorded.request_messages != request.messages.len() {
            note.push_str(&format!(
                " (the recorded request had {} messages, this one has {})",
                recorded.request_messages,
                request.messages.len()
            ));
        }
        note.push_str(&format!(
            "; model: recorded `{}`, now `{model}`",
            agent.model.as_deref().unwrap_or("?")
        ));
        if let Some(last) = request.messages.last() {
            let text = format!("{last:?}");
            let cut: String = text.chars().take(2000).collect();
            note.push_str(&format!("\nthe request's last message now: {cut}"));
        }
        parts.push(note);
    }
    parts.join("\n")
}

/// One line per tool: its name, description and schema.
fn tool_line(name: &str, description: &str, schema: &serde_json::Value) -> String {
    format!("{name}: {description} {schema}\n")
}
