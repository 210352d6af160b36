//! What happens in a run, as one [`Event`] enum on a broadcast bus.
//!
//! Agents publish; the terminal view, the JSONL log and library callers subscribe.
//! A moment that is also journaled is built once, as its journal record (a
//! `journal::Fact`), and its event is made from that record (`Record::event`).
//! Publishing never waits: a subscriber that falls behind loses the oldest events and
//! is told how many (`Lagged`), so a slow consumer never slows an agent down.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::llm::Usage;
use crate::outcome::{AgentOutcome, AgentState};
use crate::sandbox::{CallFigures, ToolOutcome};
use crate::term::bounded;

mod person;

pub(crate) use self::person::{Answered, PersonAnswer, PersonRequest, RequestKind, Verdict};

/// Events kept for a run's slow subscribers before they start losing the oldest.
const BUS_CAPACITY: usize = 8192;
/// The same for a session's tree ([`EventBus::for_session`]): its only subscribers
/// are the calls that forward progress, which read as events come, and a server
/// holds many sessions.
const SESSION_BUS_CAPACITY: usize = 256;
/// The same for a worker's queue job ([`EventBus::for_queue_job`]): its one
/// subscriber forwards its events to the parent in batches as they come, and a
/// worker makes one bus per job (a buffer of [`BUS_CAPACITY`] took a tenth of a
/// worker's CPU per job to allocate, at 10,000 jobs).
const QUEUE_JOB_BUS_CAPACITY: usize = 1024;
/// Longest arguments or result excerpt carried in an event.
const SUMMARY_CHARS: usize = 200;
/// Longest answer carried by an `agent_finished` event (and recorded on an agent's
/// trace span): enough for a report, bounded so one agent cannot bloat every log.
pub(crate) const RESULT_CHARS: usize = 4000;

/// Who an agent is, as its `agent_queued` and `agent_started` events say (and its
/// journal's `agent_queued` record, whose task is whole).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentIntro {
    /// Its id.
    pub agent: String,
    /// Who spawned it (`None` for the root).
    pub parent: Option<String>,
    /// Its profile.
    pub profile: String,
    /// Its task (in events, the start of it).
    pub task: String,
    /// The short label its parent gave (`description`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Whether its parent goes on while it runs or waits for it (`None` for the root,
    /// and for agents recorded before the mode was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SpawnMode>,
}

/// How a parent spawned a child: the `background` argument of `spawn_agent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpawnMode {
    /// The parent goes on; the result is pushed to it or awaited later.
    Background,
    /// The parent waits for the result before its next turn.
    Foreground,
}

impl SpawnMode {
    /// The mode of a spawn whose `background` argument is `background`.
    pub(crate) fn of(background: bool) -> SpawnMode {
        if background {
            SpawnMode::Background
        } else {
            SpawnMode::Foreground
        }
    }
}

/// How a message reaches its agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageMode {
    /// At the agent's next turn boundary; it never starts a turn of its own.
    Queue,
    /// Now: the agent's model request or tool wait is cut, its turn ends, and the
    /// message is its next input.
    Interrupt,
    /// At the agent's next turn boundary, and it keeps the agent going: one about to
    /// finish takes another turn, and one that finished resumes with its history.
    FollowUp,
}

impl MessageMode {
    /// The mode's name, as the tool and events spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageMode::Queue => "queue",
            MessageMode::Interrupt => "interrupt",
            MessageMode::FollowUp => "follow_up",
        }
    }

    /// Reads a mode as the tool, `warren send` and the web view spell it (`None`:
    /// the default, queue); `Err` says what is allowed.
    pub(crate) fn parse(name: Option<&str>) -> Result<MessageMode, String> {
        match name.map(str::trim) {
            None | Some("queue") => Ok(MessageMode::Queue),
            Some("interrupt") => Ok(MessageMode::Interrupt),
            Some("follow_up" | "follow-up") => Ok(MessageMode::FollowUp),
            Some(other) => Err(format!(
                "the mode must be \"queue\", \"interrupt\" or \"follow_up\", not \"{other}\""
            )),
        }
    }
}

/// Something that happened in a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A sub-agent was spawned and waits for a slot.
    AgentQueued(AgentIntro),
    /// An agent started its loop (`parent` is `None` for the root).
    AgentStarted(AgentIntro),
    /// What an agent runs with, as narrowed (its journal's `agent_spec`, without the
    /// message and tool list): published when its loop begins.
    AgentSpec {
        /// Whose.
        agent: String,
        /// Its model (a `[models]` name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Its turn limit.
        max_turns: u32,
        /// Its wall-time limit.
        timeout_s: u64,
        /// Its cost cap.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost_usd: Option<f64>,
        /// How deep it is in the tree (the root is 0).
        depth: u32,
    },
    /// A piece of model text, as it streamed.
    TextDelta {
        /// Whose model.
        agent: String,
        /// The text.
        text: String,
    },
    /// A model turn began ("thinking").
    TurnStarted {
        /// Whose.
        agent: String,
        /// 1-based turn number.
        turn: u32,
    },
    /// A tool call began.
    ToolCallStarted {
        /// Whose.
        agent: String,
        /// The model's call id.
        call_id: String,
        /// Which tool.
        tool: String,
        /// The start of its arguments.
        arguments: String,
    },
    /// A tool call ended.
    ToolCallFinished {
        /// Whose.
        agent: String,
        /// The model's call id.
        call_id: String,
        /// Which tool.
        tool: String,
        /// `ok`, or the kind of failure (`denied`, `timeout`, …).
        outcome: ToolOutcome,
        /// The start of the result or error message (denial details included).
        summary: String,
        /// Wall time.
        duration_ms: u64,
        /// What the call used (`fuel_used`, `output_bytes` of the whole result or
        /// error message, `memory_peak_bytes`), as fields of the event.
        #[serde(flatten)]
        figures: CallFigures,
    },
    /// Usage after a model turn (cumulative for the agent).
    Usage {
        /// Whose.
        agent: String,
        /// Turns so far.
        turns: u32,
        /// Prompt tokens so far.
        input_tokens: u64,
        /// Generated tokens so far.
        output_tokens: u64,
        /// Dollars so far.
        cost_usd: f64,
    },
    /// An agent ended.
    AgentFinished {
        /// Its id.
        agent: String,
        /// How it ended (`ok`, `error`, `cancelled`, `timed_out`, …).
        state: AgentState,
        /// Turns used.
        turns: u32,
        /// Prompt tokens.
        input_tokens: u64,
        /// Generated tokens.
        output_tokens: u64,
        /// Dollars spent.
        cost_usd: f64,
        /// Wall time.
        duration_ms: u64,
        /// Why it did not end well.
        error: Option<String>,
        /// Its answer (or partial output), up to [`RESULT_CHARS`] characters.
        #[serde(default)]
        text: String,
        /// Its typed answer (an output schema), as JSON, whole.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<serde_json::Value>,
    },
    /// A message was left for an agent (by its parent, an ancestor, or a person).
    AgentMessage {
        /// To whom.
        agent: String,
        /// Its number in the run.
        seq: u64,
        /// Who sent it (an agent's path, or a person).
        from: String,
        /// How it is delivered.
        mode: MessageMode,
        /// Its text, up to [`RESULT_CHARS`] characters.
        text: String,
    },
    /// A message reached its agent: it is in the request of the agent's turn `turn`.
    AgentMessageDelivered {
        /// To whom.
        agent: String,
        /// Its number in the run.
        seq: u64,
        /// The turn whose request carries it.
        turn: u32,
    },
    /// An agent asks a person (an approval or a question) and waits, holding no slot.
    InputRequested(PersonRequest),
    /// A request was answered (or its deadline passed): the agent goes on.
    InputAnswered(Answered),
    /// A subscriber fell behind and lost this many events (never published by agents).
    Lagged {
        /// Events lost.
        missed: u64,
    },
}

/// The `agent` field of `$event`, borrowed as `$event` is (shared or mutable): the one
/// list of the events that are about an agent.
macro_rules! agent_field {
    ($event:expr) => {
        match $event {
            Event::AgentQueued(AgentIntro { agent, .. })
            | Event::AgentStarted(AgentIntro { agent, .. })
            | Event::AgentSpec { agent, .. }
            | Event::TextDelta { agent, .. }
            | Event::TurnStarted { agent, .. }
            | Event::ToolCallStarted { agent, .. }
            | Event::ToolCallFinished { agent, .. }
            | Event::Usage { agent, .. }
            | Event::AgentMessage { agent, .. }
            | Event::AgentMessageDelivered { agent, .. }
            | Event::AgentFinished { agent, .. }
            | Event::InputRequested(PersonRequest { agent, .. })
            | Event::InputAnswered(Answered { agent, .. }) => Some(agent),
            Event::Lagged { .. } => None,
        }
    };
}

impl Event {
    /// The `agent_finished` event of agent `agent` that ended with `outcome`: the one
    /// mapping of an outcome to that event, its text bounded to [`RESULT_CHARS`].
    pub(crate) fn agent_finished(agent: &str, outcome: &AgentOutcome) -> Event {
        Event::AgentFinished {
            agent: agent.to_string(),
            state: outcome.state,
            turns: outcome.turns,
            input_tokens: outcome.usage.input_tokens,
            output_tokens: outcome.usage.output_tokens,
            cost_usd: outcome.cost_usd,
            duration_ms: outcome.duration.as_millis() as u64,
            error: outcome.error.clone(),
            text: bounded(&outcome.text, RESULT_CHARS),
            output: outcome.output.clone(),
        }
    }

    /// The outcome an `agent_finished` event reports (as far as the event carries it:
    /// its text is bounded, cached tokens are not counted); `None` for other events.
    pub(crate) fn outcome(&self) -> Option<AgentOutcome> {
        let Event::AgentFinished {
            state,
            turns,
            input_tokens,
            output_tokens,
            cost_usd,
            duration_ms,
            error,
            text,
            output,
            ..
        } = self
        else {
            return None;
        };
        Some(AgentOutcome {
            state: *state,
            text: text.clone(),
            output: output.clone(),
            error: error.clone(),
            turns: *turns,
            usage: Usage {
                input_tokens: *input_tokens,
                cached_input_tokens: 0,
                output_tokens: *output_tokens,
            },
            cost_usd: *cost_usd,
            duration: Duration::from_millis(*duration_ms),
        })
    }

    /// The agent the event is about, if any.
    pub(crate) fn agent(&self) -> Option<&str> {
        agent_field!(self).map(String::as_str)
    }

    /// The agent the event is about, to rename it (a worker's ids in the parent's run).
    pub(crate) fn agent_mut(&mut self) -> Option<&mut String> {
        agent_field!(self)
    }
}

/// An event with when it happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventRecord {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// The run's id: with it, the agent ids of the event name agents across runs.
    pub run: Arc<str>,
    /// The event, flattened (`"type": …`).
    #[serde(flatten)]
    pub event: Event,
}

/// The bus of one run.
///
/// Its buffer (`capacity` events, about 180 bytes each) is allocated when the first
/// subscriber comes: a tree nobody watches costs nothing, which matters for a server
/// holding many sessions.
#[derive(Clone, Debug)]
pub(crate) struct EventBus {
    shared: Arc<Bus>,
}

/// What the clones of one [`EventBus`] share.
#[derive(Debug)]
struct Bus {
    /// The channel, made by the first [`EventBus::subscribe`]; until then publishing
    /// is a no-op, as it is for a channel without receivers.
    sender: OnceLock<broadcast::Sender<EventRecord>>,
    /// Events kept for slow subscribers.
    capacity: usize,
    /// The run's id, stamped on every record.
    run: Arc<str>,
}

impl EventBus {
    /// The bus of run `run`.
    pub(crate) fn new(run: &str) -> EventBus {
        EventBus::with_capacity(run, BUS_CAPACITY)
    }

    /// The bus of a session's tree: a smaller buffer (see [`SESSION_BUS_CAPACITY`]).
    pub(crate) fn for_session(run: &str) -> EventBus {
        EventBus::with_capacity(run, SESSION_BUS_CAPACITY)
    }

    /// The bus of a worker's queue job: a smaller buffer (see
    /// [`QUEUE_JOB_BUS_CAPACITY`]).
    pub(crate) fn for_queue_job(run: &str) -> EventBus {
        EventBus::with_capacity(run, QUEUE_JOB_BUS_CAPACITY)
    }

    fn with_capacity(run: &str, capacity: usize) -> EventBus {
        EventBus {
            shared: Arc::new(Bus {
                sender: OnceLock::new(),
                capacity,
                run: run.into(),
            }),
        }
    }

    /// Publishes an event; never waits, and is a no-op without subscribers.
    pub(crate) fn publish(&self, event: Event) {
        let Some(sender) = self.shared.sender.get() else {
            return;
        };
        let _ = sender.send(EventRecord {
            ts_ms: now_ms(),
            run: self.shared.run.clone(),
            event,
        });
    }

    /// A subscription to every event published from now on.
    pub(crate) fn subscribe(&self) -> EventStream {
        let sender = self
            .shared
            .sender
            .get_or_init(|| broadcast::channel(self.shared.capacity).0);
        EventStream {
            receiver: sender.subscribe(),
            run: self.shared.run.clone(),
        }
    }
}

/// One subscriber's view of the bus.
#[derive(Debug)]
pub struct EventStream {
    receiver: broadcast::Receiver<EventRecord>,
    /// The run's id, for the records that stand for lost events.
    run: Arc<str>,
}

impl EventStream {
    /// The next event; `None` when the run is over and every event was read. Lost
    /// events come back as one [`Event::Lagged`] with their count.
    pub async fn next(&mut self) -> Option<EventRecord> {
        match self.receiver.recv().await {
            Ok(record) => Some(record),
            Err(broadcast::error::RecvError::Lagged(missed)) => Some(self.lagged(missed)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// The next event if one is already waiting; `None` when none is (or the run is
    /// over). Lets a consumer drain a burst before it flushes its output.
    pub fn try_next(&mut self) -> Option<EventRecord> {
        match self.receiver.try_recv() {
            Ok(record) => Some(record),
            Err(broadcast::error::TryRecvError::Lagged(missed)) => Some(self.lagged(missed)),
            Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed) => {
                None
            }
        }
    }

    /// The marker standing for `missed` events this subscriber fell too far behind to
    /// read.
    fn lagged(&self, missed: u64) -> EventRecord {
        EventRecord {
            ts_ms: 0,
            run: self.run.clone(),
            event: Event::Lagged { missed },
        }
    }
}

/// Milliseconds since the Unix epoch, as event records are stamped.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The first `SUMMARY_CHARS` characters of `text`, on one line.
pub(crate) fn summarize(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    bounded(&flat, SUMMARY_CHARS)
}

/// The `agent_queued` event of `agent` under `parent`, of profile `p`, for tests.
#[cfg(test)]
pub(crate) fn queued(agent: &str, parent: Option<&str>) -> Event {
    Event::AgentQueued(AgentIntro {
        agent: agent.into(),
        parent: parent.map(Into::into),
        profile: "p".into(),
        task: String::new(),
        label: None,
        mode: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slow_subscriber_gets_a_lagged_marker_and_never_blocks() {
        let bus = EventBus::with_capacity("r", 4);
        let mut slow = bus.subscribe();
        for turn in 0..10 {
            bus.publish(Event::TurnStarted {
                agent: "a".into(),
                turn,
            });
        }
        assert_eq!(
            slow.next().await.unwrap().event,
            Event::Lagged { missed: 6 }
        );
        assert_eq!(
            slow.next().await.unwrap().event,
            Event::TurnStarted {
                agent: "a".into(),
                turn: 6
            }
        );
    }

    #[test]
    fn records_serialize_flat_with_a_type() {
        let record = EventRecord {
            ts_ms: 1,
            run: "r".into(),
            event: Event::TurnStarted {
                agent: "a".into(),
                turn: 2,
            },
        };
        assert_eq!(
            serde_json::to_string(&record).unwrap(),
            r#"{"ts_ms":1,"run":"r","type":"turn_started","agent":"a","turn":2}"#
        );
        assert_eq!(summarize("a\nb"), "a b");
        assert_eq!(summarize(&"x".repeat(300)).chars().count(), 201);
    }
}
