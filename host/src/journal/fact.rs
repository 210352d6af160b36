//! [`Fact`]: a moment of a run that is both journaled and published on the event bus
//! (a job queued, started and finished, an agent's spec, a tool call's start and end),
//! told once by whoever saw it, as its journal record. Its event is made here from
//! that record ([`Record::event`]), live and when a journal is read back, so the bus
//! and the journal cannot tell a moment two ways.

use super::record::Record;
use crate::events::{summarize, AgentIntro, Event};

/// How a fact's record is journaled (`Tree::happened_as`), its event published after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Journaling {
    /// Not at all (a resumed run's journal has it already).
    Not,
    /// Queued for the writer, not waited for.
    Queued,
    /// Waited for until written, not synced
    /// ([`Journal::record_written`](super::Journal::record_written)).
    Written,
    /// Waited for until on disk ([`Journal::record_durably`](super::Journal::record_durably)).
    Durably,
}

/// A moment of a run, built once as its journal record: journaled and published in
/// one call on the run's tree (`Tree::happened`), its event made from the record.
#[derive(Clone, Debug)]
pub(crate) enum Fact<'a> {
    /// A moment whose record holds all its event says: `agent_queued`, `agent_spec`,
    /// `tool_started`, `agent_finished`.
    Recorded(Record),
    /// A job started: its record names it, its event introduces it.
    AgentStarted(&'a AgentIntro),
    /// A tool call ended: its `tool_finished` record, and the tool its event names
    /// (which the record does not).
    ToolCallFinished {
        /// The record.
        record: Record,
        /// Which tool.
        tool: &'a str,
    },
}

impl Fact<'_> {
    /// The event the fact is published as (texts shortened for the bus).
    pub(crate) fn event(&self) -> Option<Event> {
        match self {
            Fact::Recorded(record) => record.event(""),
            Fact::AgentStarted(intro) => Some(Event::AgentStarted(announced(intro))),
            Fact::ToolCallFinished { record, tool } => record.event(tool),
        }
    }

    /// The record the fact is journaled as.
    pub(crate) fn into_record(self) -> Record {
        match self {
            Fact::Recorded(record) | Fact::ToolCallFinished { record, .. } => record,
            Fact::AgentStarted(intro) => Record::AgentStarted {
                agent: intro.agent.clone(),
            },
        }
    }
}

impl Record {
    /// The event this record is published as when it is journaled live (texts
    /// shortened for the bus): the one mapping of a record to its event, which a
    /// journal read back is shown by too. `None` for a record no event stands for,
    /// for a root's `agent_queued` (the root is announced when it starts), and for
    /// `agent_started`, whose event needs the job's introduction ([`Fact::AgentStarted`]).
    /// `tool` is the tool a `tool_finished` record's event names, which the record
    /// does not (other records' events ignore it).
    pub(crate) fn event(&self, tool: &str) -> Option<Event> {
        Some(match self {
            Record::AgentQueued(intro) if intro.parent.is_none() => return None,
            Record::AgentQueued(intro) => Event::AgentQueued(announced(intro)),
            Record::AgentSpec {
                agent,
                model,
                max_turns,
                timeout_s,
                max_cost_usd,
                depth,
                ..
            } => Event::AgentSpec {
                agent: agent.clone(),
                model: model.clone(),
                max_turns: *max_turns,
                timeout_s: *timeout_s,
                max_cost_usd: *max_cost_usd,
                depth: *depth,
            },
            Record::ToolStarted {
                agent,
                call_id,
                tool,
                arguments,
            } => Event::ToolCallStarted {
                agent: agent.clone(),
                call_id: call_id.clone(),
                tool: tool.clone(),
                arguments: summarize(arguments),
            },
            Record::ToolFinished {
                agent,
                call_id,
                outcome,
                content,
                duration_ms,
                figures,
            } => Event::ToolCallFinished {
                agent: agent.clone(),
                call_id: call_id.clone(),
                tool: tool.to_string(),
                outcome: *outcome,
                summary: summarize(content),
                duration_ms: *duration_ms,
                figures: *figures,
            },
            Record::AgentFinished { .. } => {
                let (agent, outcome) = self.finished()?;
                Event::agent_finished(agent, &outcome)
            }
            Record::MessageSent {
                agent,
                seq,
                from,
                mode,
                text,
                ..
            } => Event::AgentMessage {
                agent: agent.clone(),
                seq: *seq,
                from: from.clone(),
                mode: *mode,
                text: crate::term::bounded(text, crate::events::RESULT_CHARS),
            },
            Record::InputRequested(request) => Event::InputRequested(request.clone()),
            Record::InputAnswered(answered) => Event::InputAnswered(answered.clone()),
            Record::MessageDelivered { agent, seq, turn } => Event::AgentMessageDelivered {
                agent: agent.clone(),
                seq: *seq,
                turn: *turn,
            },
            _ => return None,
        })
    }
}

/// `intro` as an event carries it: its task shortened.
fn announced(intro: &AgentIntro) -> AgentIntro {
    AgentIntro {
        task: summarize(&intro.task),
        ..intro.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventRecord;
    use crate::journal::record::Line;
    use crate::sandbox::{CallFigures, ToolOutcome};

    /// One fact, told twice: its record and its event keep the keys (and their order)
    /// they had when each was written by hand, the call's figures among them.
    #[test]
    fn a_tool_calls_end_is_one_fact_for_the_journal_and_the_bus() {
        let content = format!("{}\nend", "x".repeat(300));
        let record = Record::ToolFinished {
            agent: "a".into(),
            call_id: "c1".into(),
            outcome: ToolOutcome::Ok,
            content: content.clone(),
            duration_ms: 7,
            figures: CallFigures::of(&content, Some(5)),
        };
        let fact = Fact::ToolCallFinished {
            record: record.clone(),
            tool: "read",
        };
        let event = fact.event().unwrap();
        let line = serde_json::to_string(&Line {
            ts_ms: 1,
            record: fact.into_record(),
        })
        .unwrap();
        assert_eq!(
            line,
            format!(
                r#"{{"ts_ms":1,"type":"tool_finished","agent":"a","call_id":"c1","outcome":"ok","content":{},"duration_ms":7,"fuel_used":5,"output_bytes":304}}"#,
                serde_json::to_string(&content).unwrap()
            )
        );
        assert_eq!(serde_json::from_str::<Line>(&line).unwrap().record, record);
        let published = EventRecord {
            ts_ms: 1,
            run: "r".into(),
            event,
        };
        assert_eq!(
            serde_json::to_string(&published).unwrap(),
            format!(
                r#"{{"ts_ms":1,"run":"r","type":"tool_call_finished","agent":"a","call_id":"c1","tool":"read","outcome":"ok","summary":"{}…","duration_ms":7,"fuel_used":5,"output_bytes":304}}"#,
                "x".repeat(200)
            )
        );
        let older = r#"{"ts_ms":1,"type":"tool_finished","agent":"a","call_id":"c1","outcome":"ok","content":"","duration_ms":7}"#;
        let Record::ToolFinished { figures, .. } =
            serde_json::from_str::<Line>(older).unwrap().record
        else {
            panic!("not a tool_finished record")
        };
        assert_eq!(figures, CallFigures::default());
    }

    /// A root's registration is journaled, not announced (it is announced when it
    /// starts); a child's is both, its task whole in the journal and cut on the bus.
    #[test]
    fn a_roots_registration_is_journaled_only() {
        let mut intro = AgentIntro {
            agent: "root".into(),
            parent: None,
            profile: "main".into(),
            task: "t".repeat(300),
            label: None,
            mode: None,
        };
        assert_eq!(
            Fact::Recorded(Record::AgentQueued(intro.clone())).event(),
            None
        );
        intro.parent = Some("root".into());
        let Some(Event::AgentQueued(announced)) = Record::AgentQueued(intro.clone()).event("")
        else {
            panic!("a child's registration is not announced")
        };
        assert_eq!(announced.task.chars().count(), 201);
        assert_eq!(
            Fact::AgentStarted(&intro).into_record(),
            Record::AgentStarted {
                agent: "root".into()
            }
        );
    }
}
