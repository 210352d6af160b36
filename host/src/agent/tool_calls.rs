//! One tool call of an agent: run in its `execute_tool` span between its start and
//! finish events and journal records, or, in a resumed run, answered from the journal
//! (a call in doubt is run again only where that cannot repeat an effect).

use std::time::Instant;

use tracing::{info_span, Instrument};

use crate::config::ASK_TOOL;
use crate::journal::resume::RecordedTool;
use crate::journal::{Fact, Journaling, Record};
use crate::llm::ToolCall;
use crate::sandbox::{CallFigures, ToolOutcome};

use super::runtime::Agent;
use super::spawn_tools;
use crate::jobs::mode::AgentMode;

/// The result of a call that had started when the run's process died and whose
/// end was not recorded, when running it again could repeat an effect.
pub(crate) const IN_DOUBT: &str = "this call was running when warren's process stopped, and its result was not recorded: \
it may or may not have taken effect. It was not run again, because it could write files or reach the network. \
Check its effect before repeating it.";

/// The result of a `message_agent` call that had started when the run's process died
/// and whose receipt was not recorded.
pub(crate) const MESSAGE_IN_DOUBT: &str = "this message_agent call was running when warren's process stopped, and its receipt was not recorded. \
It was not sent again: a message that was accepted was on disk before any receipt, and reaches its agent after the resume.";

impl Agent {
    /// Runs `call`, or, in a resumed run, reuses its recorded result: a call whose
    /// end was recorded is not run again, and one that had started with no recorded
    /// end (in doubt) runs again only where that cannot repeat an effect (see
    /// [`CapabilitySet::replay_safe`](crate::policy::CapabilitySet::replay_safe)).
    /// Spawn tools run again: a spawn re-registers its recorded child, whose own
    /// records say what it still has to do.
    /// In a replay, see [`Agent::replayed_call`].
    pub(super) async fn execute(
        &self,
        call: &ToolCall,
        turn: u32,
        recorded: Option<RecordedTool>,
    ) -> Result<String, String> {
        match self.mode() {
            AgentMode::Replayed(replay, _) => {
                return self.replayed_call(replay, call, turn, recorded).await;
            }
            // A fork's live agent: whatever the recording holds, it runs.
            AgentMode::ForkLive => {
                let refusal = self.approval(call, turn).await;
                let work = self.work(call, turn);
                return self.traced_call(call, work, None, refusal).await;
            }
            AgentMode::Live | AgentMode::Resumed(_) => {}
        }
        if !spawn_tools::runs_again_on_resume(&call.name) {
            match recorded.as_ref().map(|r| &r.finished) {
                Some(Some((outcome, content))) => {
                    return if *outcome == ToolOutcome::Ok {
                        Ok(content.clone())
                    } else {
                        Err(content.clone())
                    };
                }
                // A question is asked again: its recorded request (and answer, if one
                // came) make it the same question.
                Some(None)
                    if call.name != ASK_TOOL
                        && (spawn_tools::is_message_tool(&call.name)
                            || !self.access.profile.capabilities.replay_safe()) =>
                {
                    tracing::warn!(agent = %self.place.id, tool = %call.name, "a call in doubt is not run again");
                    let doubt = match spawn_tools::is_message_tool(&call.name) {
                        true => MESSAGE_IN_DOUBT,
                        false => IN_DOUBT,
                    };
                    self.place.tree.record(|| Record::ToolFinished {
                        agent: self.place.id.0.clone(),
                        call_id: call.id.clone(),
                        outcome: ToolOutcome::InDoubt,
                        content: doubt.to_string(),
                        duration_ms: 0,
                        figures: CallFigures::of(doubt, None),
                    });
                    return Err(doubt.to_string());
                }
                _ => {}
            }
        }
        // A call its approval rule names waits for a person first (a resumed run's
        // recorded answer stands).
        let refusal = self.approval(call, turn).await;
        self.traced_call(call, self.work(call, turn), recorded.as_ref(), refusal)
            .await
    }

    /// What runs a host-side call: a spawn tool, or `ask_person` (not polled for
    /// other tools).
    pub(super) async fn work(&self, call: &ToolCall, turn: u32) -> Result<String, String> {
        match call.name.as_str() {
            ASK_TOOL => self.ask_person(call, turn).await,
            name => self.spawn_tool(name, &call.arguments).await,
        }
    }

    /// Runs one tool call inside its `execute_tool` span, between its start and finish
    /// events: a spawn tool (when this agent may spawn) or `ask_person` (when offered)
    /// is answered by `spawn`, any other name goes to the registry under this agent's
    /// capabilities. `spawn` is not polled for other tools. A call with a `refusal`
    /// (a person denied it) does not run: the refusal is its result, outcome denied.
    pub(crate) async fn traced_call(
        &self,
        call: &ToolCall,
        spawn: impl std::future::Future<Output = Result<String, String>>,
        recorded: Option<&RecordedTool>,
        refusal: Option<String>,
    ) -> Result<String, String> {
        let span = info_span!(
            "execute_tool",
            otel.name = format!("execute_tool {}", call.name),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %call.name,
            gen_ai.tool.call.id = %call.id,
            gen_ai.conversation.id = %self.place.tree.run_id,
            warren.fuel_used = tracing::field::Empty,
            warren.memory_peak_bytes = tracing::field::Empty,
            warren.output_bytes = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        self.record_start(call, recorded).await;
        let started = Instant::now();
        let (result, outcome, figures) = match refusal {
            Some(refusal) => {
                let figures = CallFigures::of(&refusal, None);
                (Err(refusal), ToolOutcome::Denied, figures)
            }
            None => self.dispatch(call, spawn).instrument(span.clone()).await,
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        if outcome != ToolOutcome::Ok {
            span.record("error.type", outcome.as_str());
        }
        // What the sandboxed call cost, where a guest ran.
        if let Some(fuel) = figures.fuel_used {
            span.record("warren.fuel_used", fuel);
        }
        if let Some(peak) = figures.memory_peak_bytes {
            span.record("warren.memory_peak_bytes", peak);
        }
        span.record("warren.output_bytes", figures.output_bytes);
        // Written in order, so on disk at the latest with the next model response
        // (at once for a call that could have had an effect: its end is what keeps
        // it from being in doubt after a crash); not again for a spawn tool a
        // resumed run repeats.
        let effect = spawn_tools::is_message_tool(&call.name)
            || (!spawn_tools::is_spawn_tool(&call.name)
                && !self.access.profile.capabilities.replay_safe());
        let journaling = match (recorded.is_none_or(|r| r.finished.is_none()), effect) {
            (false, _) => Journaling::Not,
            (true, true) => Journaling::Written,
            (true, false) => Journaling::Queued,
        };
        let record = Record::ToolFinished {
            agent: self.place.id.0.clone(),
            call_id: call.id.clone(),
            outcome,
            content: match &result {
                Ok(text) | Err(text) => text.clone(),
            },
            duration_ms,
            figures,
        };
        let tool = &call.name;
        let finished = Fact::ToolCallFinished { record, tool };
        self.place.tree.happened_as(finished, journaling).await;
        result
    }

    /// The call's start, in the journal and then announced: on disk before it runs
    /// when it could have an effect; not again in a journal that has it (a resumed
    /// run).
    async fn record_start(&self, call: &ToolCall, recorded: Option<&RecordedTool>) {
        // A plugin call that could have an effect is on disk (its model response
        // with it) before it runs: one with no recorded end may have happened. A call
        // that can have none needs no sync (if its record is lost it is simply run
        // again), and a spawn tool's effect is a job, journaled in its own right.
        let started = Fact::Recorded(Record::ToolStarted {
            agent: self.place.id.0.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let journaling = if recorded.is_some() {
            // Its start is in the journal already (a resumed run).
            Journaling::Not
        } else if !spawn_tools::is_message_tool(&call.name)
            && (spawn_tools::is_spawn_tool(&call.name)
                || self.access.profile.capabilities.replay_safe())
        {
            Journaling::Queued
        } else {
            Journaling::Durably
        };
        self.place.tree.happened_as(started, journaling).await;
    }

    /// Runs the call: a spawn tool (when this agent may spawn) by `spawn`, any other
    /// name in the registry; its result, outcome and what it used.
    async fn dispatch(
        &self,
        call: &ToolCall,
        spawn: impl std::future::Future<Output = Result<String, String>>,
    ) -> (Result<String, String>, ToolOutcome, CallFigures) {
        let host_side = (self.can_spawn() && spawn_tools::is_spawn_tool(&call.name))
            || (call.name == ASK_TOOL && self.profile.tools.allows(ASK_TOOL));
        if host_side {
            let result = spawn.await;
            let outcome = if result.is_ok() {
                ToolOutcome::Ok
            } else {
                ToolOutcome::InvalidInput
            };
            // Host-side: no guest ran, so no fuel to report.
            let figures = match &result {
                Ok(text) | Err(text) => CallFigures::of(text, None),
            };
            return (result, outcome, figures);
        }
        let measured = self
            .runtime
            .registry
            .call_measured(&self.access, &call.name, &call.arguments)
            .await;
        match measured.result {
            Ok(output) => (Ok(output), ToolOutcome::Ok, measured.figures),
            Err(error) => (Err(error.to_string()), error.kind(), measured.figures),
        }
    }
}
