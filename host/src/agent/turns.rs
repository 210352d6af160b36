//! The loop of one agent: model turns, tool calls (several in one turn run
//! concurrently), children's results pushed in before each turn, and the outcome.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, info_span, Instrument};

use crate::events::Event;
use crate::journal::Drained;
use crate::llm::{
    AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason, Message, Provider,
    StreamEvent, ToolCall, ToolDefinition,
};
use crate::outcome::{AgentOutcome, AgentState};

use super::conversation::{Conversation, Progress, Stage};
use super::inbox::unless_interrupted;
use super::replay::{record_response, replayed_response, Delivered};
use super::runtime::Agent;
use super::spans::{record_input, record_output};
use super::typed_output::{drop_response_format, Settled, TypedAnswer};
use crate::jobs::mode::AgentMode;

/// The system prompt of a sub-agent whose profile has none.
pub(crate) const SUBAGENT_PROMPT: &str = "You are a sub-agent: another agent gave you one scoped task. Focus on that task only, \
use your tools to do it, and finish with a concise report of what you found or did. Say plainly what you could not do \
and why. Your final message is all your parent will see.";

/// Why an agent stops before its answer: its end state and the reason.
type Stop = (AgentState, String);

/// What the finish policy decided when the model answered without tool calls.
enum Finish {
    /// The agent ends: `Ok` with its answer, or how it failed.
    Ended(Result<(), (AgentState, String)>),
    /// The typed answer was invalid and the model was asked again.
    Reasked,
    /// Children still ran: their results were added for the next turn.
    Drained(Drained),
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

impl Agent {
    /// Runs the loop to its end from `stage`. The job's start and finish are its
    /// owner's to record ([`JobHandle`](crate::jobs::JobHandle)). Returns the outcome
    /// and, when a follow-up may resume the agent, the conversation to resume.
    pub(crate) async fn run(&self, stage: Stage) -> (AgentOutcome, Option<Conversation>) {
        let span = info_span!(
            parent: self.parent_span.as_ref().and_then(tracing::Span::id),
            "invoke_agent",
            otel.name = format!("invoke_agent {}", self.profile.name),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %self.profile.name,
            gen_ai.agent.id = %self.place.id,
            gen_ai.conversation.id = %self.place.tree.run_id,
            warren.depth = self.depth,
            warren.traceparent = self.traceparent.as_deref(),
            warren.run.id = %self.place.tree.run_id,
            warren.agent.state = tracing::field::Empty,
            input.value = tracing::field::Empty,
            output.value = tracing::field::Empty,
            gen_ai.input.messages = tracing::field::Empty,
            gen_ai.output.messages = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        if let (Stage::Start(task), true) = (&stage, crate::telemetry::exporting()) {
            record_input(&span, task);
        }
        async {
            let started = Instant::now();
            let opened = match stage {
                Stage::Start(task) => {
                    warn_profile_notes_once(&self.profile);
                    self.record_spec(&task);
                    self.open(task)
                }
                Stage::Again(mut conversation) => {
                    conversation.progress.output = None;
                    Ok(*conversation)
                }
            };
            let (ended, conversation) = match opened {
                Ok(mut conversation) => (
                    self.converse_within_limits(&mut conversation).await,
                    Some(conversation),
                ),
                Err(stop) => (Err(stop), None),
            };
            self.conclude(ended, conversation, started.elapsed())
        }
        .instrument(span)
        .await
    }

    /// The end of one run of the loop: its outcome (logged and traced), and the
    /// conversation to rest with when a follow-up may resume the agent; an agent that
    /// ends for good ends its remaining children too.
    fn conclude(
        &self,
        ended: Result<(), Stop>,
        mut conversation: Option<Conversation>,
        ran: Duration,
    ) -> (AgentOutcome, Option<Conversation>) {
        let (state, error) = match ended {
            Ok(()) => (AgentState::Ok, None),
            Err((state, error)) => (state, Some(error)),
        };
        if let Some(conversation) = conversation.as_ref().filter(|_| state == AgentState::Ok) {
            self.leave_history(conversation);
        }
        let mut progress = match &mut conversation {
            Some(conversation) => std::mem::take(&mut conversation.progress),
            None => Progress::default(),
        };
        progress.active += ran;
        let rests = state == AgentState::Ok && self.may_rest(&progress);
        if !rests {
            // Whatever ended this agent for good ends its remaining children too.
            self.place.children_cancel.cancel();
        }
        if state != AgentState::Ok {
            tracing::Span::current().record("error.type", state.as_str());
        }
        info!(
            state = state.as_str(),
            turns = progress.turns,
            cost = progress.cost_usd,
            "agent finished"
        );
        let outcome = AgentOutcome {
            state,
            text: progress.text.clone(),
            output: progress.output.clone().filter(|_| state == AgentState::Ok),
            error,
            turns: progress.turns,
            usage: progress.usage,
            cost_usd: progress.cost_usd,
            duration: self.replayed_duration().unwrap_or(progress.active),
        };
        let span = tracing::Span::current();
        span.record("warren.agent.state", state.as_str());
        if crate::telemetry::exporting() {
            record_output(&span, &outcome);
        }
        let rest = conversation.filter(|_| rests).map(|mut conversation| {
            conversation.progress = progress;
            conversation
        });
        (outcome, rest)
    }

    /// [`Agent::converse`], ended early by a cancellation or by `timeout_s` (less
    /// the wall time a resumed agent already spent).
    async fn converse_within_limits(
        &self,
        conversation: &mut Conversation,
    ) -> Result<(), (AgentState, String)> {
        // A resumed agent's earlier wall time counts against its limit, as does the
        // time it ran before a follow-up woke it.
        let spent =
            self.place.tree.mode.earlier_time(&self.place.id) + conversation.progress.active;
        let body = self.converse(conversation);
        tokio::pin!(body);
        let limit = Duration::from_secs(self.limits.timeout_s).saturating_sub(spent);
        tokio::select! {
            biased;
            _ = self.place.cancel.cancelled() => Err((AgentState::Cancelled, "cancelled".to_string())),
            ended = tokio::time::timeout(limit, &mut body) => ended.unwrap_or_else(|_| Err((
                AgentState::TimedOut,
                format!("timed out after {} s (timeout_s)", self.limits.timeout_s),
            ))),
        }
    }

    /// The conversation: turn after turn until the model answers with no tool calls
    /// and no child runs (the finish policy), or a limit ends it.
    async fn converse(&self, conversation: &mut Conversation) -> Result<(), (AgentState, String)> {
        let (model, provider) = self.provider()?;
        let Conversation {
            request,
            progress,
            typed,
        } = conversation;
        let mut drained = None;
        let mut interrupts = self.place.mailbox.interrupts();
        loop {
            // An interrupt sent from here on cuts this turn; its message is read now
            // or at the next boundary.
            interrupts.borrow_and_update();
            let (notified, receipts) = self.before_turn(request, progress.turns + 1).await;
            let delivered = Delivered {
                notified,
                receipts,
                drained: drained.take(),
            };
            self.check_limits(progress)?;
            if self.recorded_as_cut(progress.turns + 1) {
                // Resumed or replayed: an interrupt cut this turn, which has no
                // response; its message is read in the next, as it was.
                progress.turns += 1;
                continue;
            }
            let turn = self.turn(&provider, request, progress, delivered);
            let Some(response) = unless_interrupted(&mut interrupts, turn).await else {
                tracing::info!(agent = %self.place.id, "an interrupt cut the model request");
                continue;
            };
            let response = response?;
            if let Some(ended) = unusable_turn(&response.finish, &response.message, model) {
                return Err(ended);
            }
            let calls = response.message.tool_calls.clone();
            request.messages.push(Message::Assistant(response.message));
            let reported = typed.as_ref().and_then(|t| t.report(&calls)).is_some();
            if calls.is_empty() || reported {
                match self
                    .finish_policy(typed.as_mut(), &calls, request, progress)
                    .await
                {
                    // A follow-up keeps it going: it reads it in its next turn.
                    Finish::Ended(Ok(()))
                        if self.place.mailbox.has_follow_up(progress.turns + 1) => {}
                    Finish::Ended(ended) => return ended,
                    Finish::Reasked => {}
                    Finish::Drained(waited) => drained = Some(waited),
                }
                continue;
            }
            let run = self.run_tool_calls(&calls, progress.turns, request);
            if unless_interrupted(&mut interrupts, run).await.is_none() {
                self.interrupted_calls(&calls, request);
            }
        }
    }

    /// The profile's model and its provider.
    pub(super) fn provider(&self) -> Result<(&str, Arc<dyn Provider>), Stop> {
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
        Ok((model, provider))
    }

    /// Whether another turn may start: `max_turns`, the run's budget and this
    /// agent's cost cap.
    fn check_limits(&self, progress: &Progress) -> Result<(), (AgentState, String)> {
        if progress.turns >= self.limits.max_turns {
            return Err((
                AgentState::MaxTurns,
                format!("max turns ({}) reached", self.limits.max_turns),
            ));
        }
        if let Some(reason) = self.place.tree.budget.used_up() {
            return Err((AgentState::BudgetExceeded, reason));
        }
        if let Some(cap) = self
            .limits
            .max_cost_usd
            .filter(|cap| progress.cost_usd >= *cap)
        {
            return Err((
                AgentState::BudgetExceeded,
                format!(
                    "this agent's cost cap of ${cap:.4} is used up (spent ${:.4}; max_cost_usd)",
                    progress.cost_usd
                ),
            ));
        }
        Ok(())
    }

    /// One turn: the model's response (replayed or resumed from the journal when it
    /// is there, else asked), counted, charged, announced and recorded.
    async fn turn(
        &self,
        provider: &Arc<dyn Provider>,
        request: &mut ChatRequest,
        progress: &mut Progress,
        delivered: Delivered,
    ) -> Result<ChatResponse, (AgentState, String)> {
        progress.turns += 1;
        self.place.tree.events.publish(Event::TurnStarted {
            agent: self.place.id.0.clone(),
            turn: progress.turns,
        });
        let replayed = match self.mode() {
            AgentMode::Replayed(replay, agent) => {
                self.replayed_turn((replay, agent), &**provider, request, progress.turns)?
            }
            AgentMode::Resumed(agent) => agent
                .and_then(|r| r.response(progress.turns))
                .map(replayed_response),
            AgentMode::Live | AgentMode::ForkLive => None,
        };
        // A resumed response's cost was counted when the run resumed; a replay
        // counts each as recorded, so budgets end it where they did. A fork's journal
        // holds its replayed turns too: it is a whole run.
        let fresh = replayed.is_none() || self.place.tree.mode.charges_recorded();
        let response = match replayed {
            Some(response) => response,
            None => self.ask(provider, request).await?,
        };
        progress.usage = progress.usage + response.usage;
        progress.cost_usd += response.cost_usd;
        if fresh {
            self.place.tree.budget.charge(response.cost_usd);
        }
        self.place.tree.events.publish(Event::Usage {
            agent: self.place.id.0.clone(),
            turns: progress.turns,
            input_tokens: progress.usage.input_tokens,
            output_tokens: progress.usage.output_tokens,
            cost_usd: progress.cost_usd,
        });
        progress.text = response.message.text.clone();
        if fresh {
            // Written before any of its tool calls runs, and synced with the start
            // of the first that could have an effect (see `traced_call`).
            self.place.tree.record(|| {
                record_response(
                    &self.place.id,
                    progress.turns,
                    request,
                    &response,
                    delivered,
                )
            });
        }
        Ok(response)
    }

    /// The model answered with no tool calls (or reported its typed answer): the
    /// answer is checked against the output schema, then children still running
    /// are awaited before the agent may end.
    async fn finish_policy(
        &self,
        typed: Option<&mut TypedAnswer>,
        calls: &[ToolCall],
        request: &mut ChatRequest,
        progress: &mut Progress,
    ) -> Finish {
        if let Some(typed) = typed {
            match typed.settle(calls, &progress.text, request).await {
                Settled::Valid(value) => {
                    progress.text = value.to_string();
                    progress.output = Some(value);
                }
                Settled::Reasked => return Finish::Reasked,
                Settled::Invalid { error, raw } => {
                    progress.text = raw;
                    return Finish::Ended(Err((AgentState::InvalidOutput, error)));
                }
            }
        }
        match self.drain_children(request, progress.turns + 1).await {
            Ok(waited) => Finish::Drained(waited),
            Err(ended) => Finish::Ended(ended),
        }
    }

    /// Runs turn `turn`'s tool calls (concurrently where they may be) and adds their
    /// results to `request`.
    async fn run_tool_calls(&self, calls: &[ToolCall], turn: u32, request: &mut ChatRequest) {
        let recorded = |call: &ToolCall| {
            self.place
                .tree
                .mode
                .recorded(&self.place.id)
                .and_then(|r| r.tool(turn, &call.id))
                .cloned()
        };
        for (call, content, is_error) in
            super::turn_limits::run_calls(calls, |call| self.execute(call, turn, recorded(call)))
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

    /// One model turn: `request` sent as it stands, its text streamed to the event bus.
    async fn ask(
        &self,
        provider: &std::sync::Arc<dyn crate::llm::Provider>,
        request: &mut ChatRequest,
    ) -> Result<crate::llm::ChatResponse, (AgentState, String)> {
        // Streamed text goes to the event bus as it arrives.
        let (bus, agent) = (self.place.tree.events.clone(), self.place.id.0.clone());
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
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = provider.provider_name(),
            gen_ai.request.model = provider.model(),
            gen_ai.agent.id = %self.place.id,
            gen_ai.conversation.id = %self.place.tree.run_id,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
            gen_ai.system = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        if crate::telemetry::genai_compat() {
            chat_span.record("gen_ai.system", provider.provider_name());
        }
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
                let usage = &response.usage;
                chat_span.record("gen_ai.usage.input_tokens", usage.input_tokens);
                chat_span.record("gen_ai.usage.output_tokens", usage.output_tokens);
                chat_span.record(
                    "gen_ai.usage.cache_read.input_tokens",
                    usage.cached_input_tokens,
                );
            }
            Err(error) => {
                chat_span.record("error.type", error.kind());
            }
        }
        response.map_err(|e| (AgentState::Error, e.to_string()))
    }

    pub(super) fn system_prompt(&self) -> String {
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
                self.runtime.config.each_profile(),
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
    pub(super) fn tool_names(&self) -> Vec<String> {
        let plugin = self.runtime.registry.names_for(&self.profile);
        let spawn = self.runtime.spawn_tools.iter().map(|t| t.name.as_str());
        let spawn = spawn.filter(|_| self.can_spawn());
        let ask = Some(crate::config::ASK_TOOL).filter(|t| self.profile.tools.allows(t));
        plugin
            .into_iter()
            .chain(spawn)
            .chain(ask)
            .map(String::from)
            .collect()
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
        tools.extend(super::approval::ask_definition(&self.profile));
        tools
    }
}
