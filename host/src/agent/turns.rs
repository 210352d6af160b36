//! The loop of one agent: model turns, tool calls (several in one turn run
//! concurrently), children's results pushed in before each turn, and the outcome.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tracing::{info, info_span, Instrument};

use crate::events::{bounded, Event, RESULT_CHARS};
use crate::jobs::{not_found_block, result_block, JobId, Phase};
use crate::journal::{Drained, Record, RecordedToolDef};
use crate::llm::{
    AssistantMessage, ChatRequest, EventSink, FinishReason, Message, Requester, StreamEvent,
    ToolCall, ToolDefinition, Usage,
};
use crate::outcome::{AgentOutcome, AgentState};

use super::replay::{record_response, replayed_response, Delivered};
use super::runtime::Agent;
use super::typed_output::{drop_response_format, Settled, TypedAnswer};

/// The system prompt of a sub-agent whose profile has none.
pub const SUBAGENT_PROMPT: &str = "You are a sub-agent: another agent gave you one scoped task. Focus on that task only, \
use your tools to do it, and finish with a concise report of what you found or did. Say plainly what you could not do \
and why. Your final message is all your parent will see.";

/// What the loop has done so far (kept outside it, so a timeout or a cancellation
/// still reports turns, usage and the last text).
#[derive(Default)]
struct Progress {
    turns: u32,
    usage: Usage,
    cost_usd: f64,
    text: String,
    /// A typed answer, once checked.
    output: Option<serde_json::Value>,
}

/// Logs what a user must know about a profile (tools with no sandboxed equivalent, a
/// model name that means nothing here) once per process, when its first agent starts,
/// rather than at every load of a large agent collection.
fn warn_profile_notes_once(profile: &crate::config::Profile) {
    static WARNED: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let notes: Vec<String> = profile
        .notes
        .iter()
        .filter(|n| n.warns())
        .map(ToString::to_string)
        .collect();
    if notes.is_empty() {
        return;
    }
    let mut warned = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if warned.insert(profile.name.clone()) {
        for note in notes {
            tracing::warn!(profile = %profile.name, "{note}");
        }
    }
}

/// How a turn's response ends the agent, if it does: an answer that lost its end or
/// was withheld is not success, and no call of a turn cut by the output limit is run,
/// since the limit falls wherever it falls, mid-arguments included (half the arguments
/// of a `write_file` would write half a file).
fn unusable_turn(
    finish: &FinishReason,
    message: &AssistantMessage,
    model: &str,
) -> Option<(AgentState, String)> {
    match (finish, &message.refusal, message.tool_calls.as_slice()) {
        (_, Some(refusal), []) => Some((AgentState::Refused, format!("refused: {refusal}"))),
        (FinishReason::Length, _, []) => Some((
            AgentState::Truncated,
            format!("truncated at max_tokens: the answer hit the model's output limit (raise max_tokens in [models.{model}])"),
        )),
        // Generation stops at the limit, so the call it cut is the last one made.
        (FinishReason::Length, _, [.., cut]) => Some((
            AgentState::Truncated,
            format!(
                "truncated at max_tokens: the arguments of the `{}` call were cut at the model's output limit, so no tool of that turn was run (raise max_tokens in [models.{model}])",
                cut.name
            ),
        )),
        (FinishReason::ContentFilter, None, []) => Some((
            AgentState::Refused,
            "refused: the provider's content filter withheld the answer".into(),
        )),
        _ => None,
    }
}

/// What an agent was asked, on its span: the GenAI conventions' messages and the plain
/// input trace UIs show, bounded. Only built when spans are exported.
fn record_input(span: &tracing::Span, task: &str) {
    let asked = bounded(task, RESULT_CHARS);
    span.record("input.value", asked.as_str());
    span.record(
        "gen_ai.input.messages",
        serde_json::json!([{"role": "user", "parts": [{"type": "text", "content": asked}]}])
            .to_string(),
    );
}

/// What an agent answered (or why it failed), on its span, as [`record_input`].
fn record_output(span: &tracing::Span, outcome: &AgentOutcome) {
    let answer = match &outcome.error {
        Some(error) if outcome.text.is_empty() => error.as_str(),
        _ => outcome.text.as_str(),
    };
    let answer = bounded(answer, RESULT_CHARS);
    span.record("output.value", answer.as_str());
    span.record(
        "gen_ai.output.messages",
        serde_json::json!([{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": outcome.state.as_str()}])
            .to_string(),
    );
}

impl Agent {
    /// Runs the loop to its end. The job's start and finish are its owner's to record
    /// ([`JobHandle`](crate::jobs::JobHandle)).
    pub(crate) async fn run(&self, task: String) -> AgentOutcome {
        let span = info_span!(
            parent: self.parent_span.as_ref().and_then(tracing::Span::id),
            "invoke_agent",
            otel.name = format!("invoke_agent {}", self.profile.name),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %self.profile.name,
            gen_ai.agent.id = %self.id,
            warren.depth = self.depth,
            warren.traceparent = self.traceparent.as_deref(),
            warren.run.id = %self.tree.run_id,
            warren.agent.state = tracing::field::Empty,
            input.value = tracing::field::Empty,
            output.value = tracing::field::Empty,
            gen_ai.input.messages = tracing::field::Empty,
            gen_ai.output.messages = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        if crate::telemetry::exporting() {
            record_input(&span, &task);
        }
        async {
            let started = Instant::now();
            warn_profile_notes_once(&self.profile);
            let tools = self.tool_names();
            self.tree.record_tool_set(&tools, || Record::ToolSet {
                tools: self
                    .tool_definitions()
                    .into_iter()
                    .map(|t| RecordedToolDef {
                        name: t.name,
                        description: t.description,
                        input_schema: (*t.input_schema).clone(),
                    })
                    .collect(),
            });
            self.tree.record(|| Record::AgentSpec {
                agent: self.id.0.clone(),
                message: task.clone(),
                model: self.profile.model.clone(),
                tools,
                max_turns: self.limits.max_turns,
                timeout_s: self.limits.timeout_s,
                max_cost_usd: self.limits.max_cost_usd,
                depth: self.depth,
                system: self.system_prompt(),
            });
            self.tree.events.publish(Event::AgentSpec {
                agent: self.id.0.clone(),
                model: self.profile.model.clone(),
                max_turns: self.limits.max_turns,
                timeout_s: self.limits.timeout_s,
                max_cost_usd: self.limits.max_cost_usd,
                depth: self.depth,
            });
            let mut progress = Progress::default();
            let ended = {
                let body = self.converse(task, &mut progress);
                tokio::pin!(body);
                // A resumed agent's earlier wall time counts against its limit.
                let spent = self.tree.earlier_time(&self.id);
                let limit = Duration::from_secs(self.limits.timeout_s).saturating_sub(spent);
                tokio::select! {
                    biased;
                    _ = self.cancel.cancelled() => Err((AgentState::Cancelled, "cancelled".to_string())),
                    ended = tokio::time::timeout(limit, &mut body) => ended.unwrap_or_else(|_| Err((
                        AgentState::TimedOut,
                        format!("timed out after {} s (timeout_s)", self.limits.timeout_s),
                    ))),
                }
            };
            // Whatever ended this agent ends its remaining children too.
            self.children_cancel.cancel();
            let (state, error) = match ended {
                Ok(()) => (AgentState::Ok, None),
                Err((state, error)) => (state, Some(error)),
            };
            if state != AgentState::Ok {
                tracing::Span::current().record("error.type", state.as_str());
            }
            info!(state = state.as_str(), turns = progress.turns, cost = progress.cost_usd, "agent finished");
            let outcome = AgentOutcome {
                state,
                text: progress.text,
                output: progress.output.filter(|_| state == AgentState::Ok),
                error,
                turns: progress.turns,
                usage: progress.usage,
                cost_usd: progress.cost_usd,
                duration: self.replayed_duration().unwrap_or_else(|| started.elapsed()),
            };
            let span = tracing::Span::current();
            span.record("warren.agent.state", state.as_str());
            if crate::telemetry::exporting() {
                record_output(&span, &outcome);
            }
            outcome
        }
        .instrument(span)
        .await
    }

    async fn converse(
        &self,
        task: String,
        progress: &mut Progress,
    ) -> Result<(), (AgentState, String)> {
        let model = self.profile.model.as_deref().ok_or_else(|| {
            (
                AgentState::Error,
                format!(
                    "profile `{}` has no model: add a [models.NAME] table and set `model`",
                    self.profile.name
                ),
            )
        })?;
        let provider = self
            .runtime
            .providers
            .get(model)
            .cloned()
            .ok_or_else(|| (AgentState::Error, format!("no model `{model}`")))?;
        // The history lives in the request, which every turn sends as it stands.
        let mut request = ChatRequest {
            system: self.system_prompt(),
            messages: vec![Message::User(task)],
            tools: self.tool_definitions(),
            requester: Requester {
                profile: self.profile.name.clone(),
                agent_id: self.id.0.clone(),
            },
            answer_schema: None,
        };
        let mut typed = TypedAnswer::new(self.profile.output_schema.as_ref(), &*provider);
        if let Some(typed) = &typed {
            typed.prepare(&mut request);
        }
        let mut drained = None;
        loop {
            let (notified, notes) = self.finished_children_notes(progress.turns + 1).await;
            if !notes.is_empty() {
                request.messages.push(Message::User(format!(
                    "<agent_notifications>\nThese background sub-agents finished:\n\n{notes}\n</agent_notifications>"
                )));
            }
            let delivered = Delivered {
                notified,
                drained: drained.take(),
            };
            if progress.turns >= self.limits.max_turns {
                return Err((
                    AgentState::MaxTurns,
                    format!("max turns ({}) reached", self.limits.max_turns),
                ));
            }
            if let Some(budget) = self
                .tree
                .limits
                .budget_usd
                .filter(|_| self.tree.over_budget())
            {
                return Err((
                    AgentState::BudgetExceeded,
                    format!("the run's budget of ${budget:.4} is used up (spent ${:.4}; defaults.budget_usd)", self.tree.spent()),
                ));
            }
            if let Some(cap) = self
                .limits
                .max_cost_usd
                .filter(|cap| progress.cost_usd >= *cap)
            {
                return Err((
                    AgentState::BudgetExceeded,
                    format!("this agent's cost cap of ${cap:.4} is used up (spent ${:.4}; max_cost_usd)", progress.cost_usd),
                ));
            }
            progress.turns += 1;
            self.tree.events.publish(Event::TurnStarted {
                agent: self.id.0.clone(),
                turn: progress.turns,
            });
            let replayed = if self.replaying() {
                self.replayed_turn(&*provider, &request, progress.turns)?
            } else if self.tree.replay.is_some() {
                None // a fork's live agent
            } else {
                self.tree
                    .recorded(&self.id)
                    .and_then(|r| r.response(progress.turns))
                    .map(replayed_response)
            };
            let fresh = replayed.is_none();
            let response = match replayed {
                Some(response) => response,
                None => self.ask(&provider, &mut request).await?,
            };
            progress.usage = progress.usage + response.usage;
            progress.cost_usd += response.cost_usd;
            if fresh || self.tree.replay.is_some() {
                // A resumed response's cost was counted when the run resumed; a
                // replay counts each as recorded, so budgets end it where they did.
                self.tree.charge(response.cost_usd);
            }
            self.tree.events.publish(Event::Usage {
                agent: self.id.0.clone(),
                turns: progress.turns,
                input_tokens: progress.usage.input_tokens,
                output_tokens: progress.usage.output_tokens,
                cost_usd: progress.cost_usd,
            });
            progress.text = response.message.text.clone();
            if fresh || self.tree.replay.is_some() {
                // Written before any of its tool calls runs, and synced with the start
                // of the first that could have an effect (see `traced_call`). A fork's
                // journal holds its replayed turns too: it is a whole run.
                self.tree.record(|| {
                    record_response(&self.id, progress.turns, &request, &response, delivered)
                });
            }
            if let Some(ended) = unusable_turn(&response.finish, &response.message, model) {
                return Err(ended);
            }
            let calls = response.message.tool_calls.clone();
            request.messages.push(Message::Assistant(response.message));
            let reported = typed.as_ref().and_then(|t| t.report(&calls)).is_some();
            if calls.is_empty() || reported {
                if let Some(typed) = typed.as_mut() {
                    match typed.settle(&calls, &progress.text, &mut request) {
                        Settled::Valid(value) => {
                            progress.text = value.to_string();
                            progress.output = Some(value);
                        }
                        Settled::Reasked => continue,
                        Settled::Invalid { error, raw } => {
                            progress.text = raw;
                            return Err((AgentState::InvalidOutput, error));
                        }
                    }
                }
                match self.drain_children(&mut request, progress.turns + 1).await {
                    Ok(waited) => drained = Some(waited),
                    Err(ended) => return ended,
                }
                continue;
            }
            let turn = progress.turns;
            let recorded = |call: &ToolCall| {
                self.tree
                    .recorded(&self.id)
                    .and_then(|r| r.tool(turn, &call.id))
                    .cloned()
            };
            for (call, content, is_error) in super::turn_limits::run_calls(&calls, |call| {
                self.execute(call, turn, recorded(call))
            })
            .await
            {
                request.messages.push(Message::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content,
                    is_error,
                });
            }
        }
    }

    /// One model turn: `request` sent as it stands, its text streamed to the event bus.
    async fn ask(
        &self,
        provider: &std::sync::Arc<dyn crate::llm::Provider>,
        request: &mut ChatRequest,
    ) -> Result<crate::llm::ChatResponse, (AgentState, String)> {
        // Streamed text goes to the event bus as it arrives.
        let (bus, agent) = (self.tree.events.clone(), self.id.0.clone());
        let sink = EventSink::new(move |event| {
            if let StreamEvent::TextDelta(text) = event {
                bus.publish(Event::TextDelta {
                    agent: agent.clone(),
                    text,
                });
            }
        });
        let chat_span = info_span!(
            "chat",
            otel.name = format!("chat {}", provider.model()),
            gen_ai.operation.name = "chat",
            gen_ai.request.model = provider.model(),
            gen_ai.agent.id = %self.id,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let mut response = provider
            .chat(request, &sink)
            .instrument(chat_span.clone())
            .await;
        if let Err(error) = &response {
            if drop_response_format(request, error, provider.model()) {
                response = provider
                    .chat(request, &sink)
                    .instrument(chat_span.clone())
                    .await;
            }
        }
        match &response {
            Ok(response) => {
                chat_span.record("gen_ai.usage.input_tokens", response.usage.input_tokens);
                chat_span.record("gen_ai.usage.output_tokens", response.usage.output_tokens);
            }
            Err(error) => {
                chat_span.record("error.type", error.kind());
            }
        }
        response.map_err(|e| (AgentState::Error, e.to_string()))
    }

    /// The model answered without tool calls: ends the conversation (`Err(Ok)`)
    /// unless children still run, whose results (and any not yet delivered) are then
    /// awaited and added to `request` for turn `next` (`Ok`: whom it named running and
    /// whose results it was given). A replay waits for the children the recording
    /// did at that turn, and names those it named.
    async fn drain_children(
        &self,
        request: &mut ChatRequest,
        next: u32,
    ) -> Result<Drained, Result<(), (AgentState, String)>> {
        let recorded = self
            .replaying()
            .then(|| {
                self.tree
                    .recorded(&self.id)?
                    .response(next)?
                    .drained
                    .clone()
            })
            .flatten();
        let waited = match recorded {
            Some(waited) => waited,
            None => {
                let children = self.tree.children(&self.id);
                let running: Vec<String> = children
                    .iter()
                    .filter(|job| !matches!(job.phase, Phase::Done(_)))
                    .map(|job| job.id.0.clone())
                    .collect();
                if running.is_empty() {
                    return Err(Ok(()));
                }
                // Report the running children and any finished ones not yet
                // reported, in one message, so no separate notification follows.
                let delivered = children
                    .into_iter()
                    .filter(|job| !job.delivered)
                    .map(|job| job.id.0)
                    .collect();
                Drained { running, delivered }
            }
        };
        let pending: Vec<JobId> = waited.delivered.iter().cloned().map(JobId).collect();
        let blocks = self.await_jobs(&pending, None, false).await;
        request.messages.push(Message::User(format!(
            "You were about to finish while sub-agents were still running ({}). Nothing is abandoned: \
             these are their results. Take them into account and give your final answer.\n\n{blocks}",
            waited.running.join(", ")
        )));
        Ok(waited)
    }

    /// Result blocks of children that finished and were not yet reported before turn
    /// `turn`, with their ids; in a replay, those the recording reported then, once
    /// they finish.
    async fn finished_children_notes(&self, turn: u32) -> (Vec<String>, String) {
        if self.replaying() {
            if let Some(recorded) = self.tree.recorded(&self.id).and_then(|r| r.response(turn)) {
                if recorded.notified.is_empty() {
                    return (Vec::new(), String::new());
                }
                let ids: Vec<JobId> = recorded.notified.iter().cloned().map(JobId).collect();
                let blocks = self.await_jobs(&ids, None, false).await;
                return (recorded.notified.clone(), blocks);
            }
        }
        let jobs = self.tree.take_finished_undelivered(&self.id);
        let ids = jobs.iter().map(|job| job.id.0.clone()).collect();
        let blocks = jobs
            .iter()
            .map(result_block)
            .collect::<Vec<_>>()
            .join("\n\n");
        (ids, blocks)
    }

    /// Waits for `ids` (all, or the first with `any`), up to `timeout`, and returns
    /// their result blocks.
    pub(crate) async fn await_jobs(
        &self,
        ids: &[JobId],
        timeout: Option<Duration>,
        any: bool,
    ) -> String {
        let mut waits = Vec::new();
        for id in ids {
            if let Some(job) = self
                .tree
                .job(id)
                .filter(|j| j.parent.as_ref() == Some(&self.id))
            {
                let mut done = job.done.clone();
                waits.push(Box::pin(async move {
                    let _ = done.wait_for(|finished| *finished).await;
                }));
            }
        }
        if !waits.is_empty() {
            let wait = async move {
                if any {
                    futures_util::future::select_all(waits).await;
                } else {
                    join_all(waits).await;
                }
            };
            match timeout {
                Some(limit) => {
                    let _ = tokio::time::timeout(limit, wait).await;
                }
                None => wait.await,
            }
        }
        ids.iter()
            .map(|id| {
                match self
                    .tree
                    .job(id)
                    .filter(|j| j.parent.as_ref() == Some(&self.id))
                {
                    Some(job) => {
                        if matches!(job.phase, Phase::Done(_)) {
                            self.tree.mark_delivered(id);
                        }
                        result_block(&job)
                    }
                    None => not_found_block(&id.0),
                }
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    fn system_prompt(&self) -> String {
        // A sub-agent whose profile has no prompt of its own still learns its role.
        let own = if self.profile.system_prompt.trim().is_empty() && self.depth > 0 {
            SUBAGENT_PROMPT.to_string()
        } else {
            self.profile.system_prompt.clone()
        };
        let mut parts = vec![own];
        parts.extend(self.extra_prompt.clone());
        let profiles = &self.runtime.config.profiles;
        if self.can_spawn() && !profiles.is_empty() {
            parts.push(super::spawn_profiles::spawn_profiles_block(
                profiles.values(),
            ));
        }
        parts
            .into_iter()
            .filter(|p| !p.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The tools this agent's model is offered: its profile's plugin tools, then the spawn
    /// tools when it may spawn.
    pub(crate) fn tool_definitions(&self) -> Vec<ToolDefinition> {
        self.tool_definitions_with(&self.runtime.spawn_tools)
    }

    /// The names of the tools this agent's model is offered.
    fn tool_names(&self) -> Vec<String> {
        let plugin = self.runtime.registry.names_for(&self.profile);
        let spawn = self.runtime.spawn_tools.iter().map(|t| t.name.as_str());
        let spawn = spawn.filter(|_| self.can_spawn());
        plugin.into_iter().chain(spawn).map(String::from).collect()
    }

    /// The profile's plugin tools, then `spawn_tools` when this agent may spawn.
    pub(crate) fn tool_definitions_with(
        &self,
        spawn_tools: &[ToolDefinition],
    ) -> Vec<ToolDefinition> {
        let mut tools: Vec<ToolDefinition> = self
            .runtime
            .registry
            .definitions_for(&self.profile)
            .collect();
        if self.can_spawn() {
            tools.extend_from_slice(spawn_tools);
        }
        tools
    }
}
