//! What a journal holds: one JSON object per line, each a [`Record`] with the time it
//! was made. The first line of every journal is `run_started`, carrying the format's
//! version ([`VERSION`]); a reader refuses a version it does not know.

use serde::{Deserialize, Serialize};

use crate::config::RunLimits;
use crate::events::{AgentIntro, Answered, MessageMode, PersonRequest};
use crate::outcome::{AgentOutcome, AgentState};
use crate::sandbox::{CallFigures, ToolOutcome};

/// The journal format's version, in every `run_started` record. Raised when a record
/// changes in a way an older reader would misread.
/// Version 2 writes each distinct system prompt once, in a `system_prompt` record
/// that `agent_spec` names by digest; version 1 wrote it whole in every
/// `agent_spec` (still read).
pub(crate) const VERSION: u32 = 2;

/// One line of a journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Line {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub record: Record,
}

/// One boundary of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Record {
    /// The run began.
    RunStarted {
        /// The format's version ([`VERSION`]).
        v: u32,
        /// The run's id.
        run: String,
        /// The root's task.
        task: String,
        /// The root's profile.
        profile: String,
        /// The warren that ran it.
        warren: String,
        /// The configuration file.
        config: String,
        /// SHA-256 of the configuration file's text, hex.
        config_sha256: String,
        /// SHA-256 of each plugin's file, hex, by plugin name: a resume refuses a
        /// run whose plugins changed.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        plugins_sha256: std::collections::BTreeMap<String, String>,
        /// The run's own limits (each agent's are in its `agent_spec`), so a past
        /// run is shown against them; absent in journals written before they were.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limits: Option<RecordedLimits>,
        /// When the run is a fork (`warren replay --from`): the run and agent it was
        /// forked from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forked_from: Option<ForkedFrom>,
    },
    /// A process took the run over to continue it (`warren resume`): what follows
    /// is appended by it.
    RunResumed {
        /// The warren that resumed it.
        warren: String,
        /// Whether it was resumed over a changed configuration or plugins
        /// (`--force`), and what changed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        forced_over: Vec<String>,
        /// The run's limits from here on (today's configuration's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limits: Option<RecordedLimits>,
    },
    /// A job was registered (queued); for the root, when the run starts. Its task is
    /// whole.
    AgentQueued(AgentIntro),
    /// A job started running.
    AgentStarted {
        /// Its id.
        agent: String,
    },
    /// What an agent runs with, as narrowed: written when its loop begins.
    AgentSpec {
        /// Its id.
        agent: String,
        /// Its first message (task, context, constraints), whole.
        message: String,
        /// Its model (a `[models]` name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The tools it is offered.
        tools: Vec<String>,
        /// Its turn limit.
        max_turns: u32,
        /// Its wall-time limit.
        timeout_s: u64,
        /// Its cost cap.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost_usd: Option<f64>,
        /// How deep it is in the tree.
        depth: u32,
        /// Its system prompt, whole (a replay shows what changed in it): in
        /// journals of version 1; later ones name it by `system_digest`.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        system: String,
        /// The digest of its system prompt, whose text is in the `system_prompt`
        /// record of that digest before this one (absent when it has none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        system_digest: Option<String>,
    },
    /// A system prompt given to agents, written before the first `agent_spec` that
    /// names it, once per run and process (a thousand agents of one profile share
    /// one copy).
    SystemPrompt {
        /// Its digest (XXH3-64 of its text, hex), as `agent_spec` names it.
        digest: String,
        /// Its text, whole.
        text: String,
    },
    /// The definitions of a set of tools offered to agents, written before the first
    /// `agent_spec` whose `tools` names exactly these, once per run and process (a
    /// replay shows what changed in them).
    ToolSet {
        /// The tools, in the order they are offered.
        tools: Vec<RecordedToolDef>,
    },
    /// A model turn's response, as warren understood it.
    ModelResponse {
        /// Whose.
        agent: String,
        /// 1-based turn number.
        turn: u32,
        /// Messages in the request it answered (the history's length then).
        request_messages: usize,
        /// Children whose results reached it in a notification just before this
        /// turn, in the order delivered (a replay delivers the same ones at the same
        /// turn, however its children's ends interleave).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notified: Vec<String>,
        /// The messages this agent sent whose receipts (delivered) reached it just
        /// before this turn, by number (a replay gives the same ones at the same turn).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        receipts: Vec<u64>,
        /// When it had answered without a tool call while children still ran, and was
        /// given their results before this turn: those it named as running, and every
        /// child whose result it was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drained: Option<Drained>,
        /// A digest of the exact request body sent (XXH3-128 of its bytes, hex).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_digest: Option<String>,
        /// Its text.
        text: String,
        /// Reasoning the model showed.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
        /// A refusal it gave instead of an answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refusal: Option<String>,
        /// Content blocks the provider requires sent back unchanged (Anthropic
        /// thinking): a resumed agent's next request carries them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        provider_blocks: Vec<serde_json::Value>,
        /// Its tool calls.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<RecordedCall>,
        /// Why it stopped (`stop`, `tool_calls`, `length`, `content_filter`, or the
        /// provider's word).
        finish: String,
        /// Prompt tokens.
        input_tokens: u64,
        /// Of those, read from the provider's prompt cache.
        #[serde(default, skip_serializing_if = "is_zero")]
        cached_input_tokens: u64,
        /// Generated tokens.
        output_tokens: u64,
        /// Dollars.
        cost_usd: f64,
    },
    /// A tool call began (written before it runs: a call with no `tool_finished`
    /// after a crash may or may not have happened).
    ToolStarted {
        /// Whose.
        agent: String,
        /// The model's call id.
        call_id: String,
        /// Which tool.
        tool: String,
        /// Its arguments, as the model wrote them.
        arguments: String,
    },
    /// A tool call ended.
    ToolFinished {
        /// Whose.
        agent: String,
        /// The model's call id.
        call_id: String,
        /// How it ended.
        outcome: ToolOutcome,
        /// Its result, or its error's message.
        content: String,
        /// Wall time.
        duration_ms: u64,
        /// What it used, as fields of the record: `fuel_used` (absent for a call no
        /// guest ran: the spawn tools, a call refused before it ran, a call in
        /// doubt), `output_bytes` of `content`, `memory_peak_bytes`; each absent (0)
        /// in journals written before it was recorded.
        #[serde(flatten)]
        figures: CallFigures,
    },
    /// A job ended.
    AgentFinished {
        /// Its id.
        agent: String,
        /// How.
        state: AgentState,
        /// Its answer (or the last text), whole.
        text: String,
        /// Its typed answer (an output schema), as JSON.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<serde_json::Value>,
        /// Why it did not end well.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Model turns.
        turns: u32,
        /// Prompt tokens.
        input_tokens: u64,
        /// Generated tokens.
        output_tokens: u64,
        /// Dollars.
        cost_usd: f64,
        /// Wall time.
        duration_ms: u64,
    },
    /// A message was left for `agent` (`message_agent`): on disk before its sender
    /// is told it was queued, so an accepted message is delivered after a crash.
    MessageSent {
        /// To whom.
        agent: String,
        /// Its number in the run.
        seq: u64,
        /// Who sent it (an agent's path).
        from: String,
        /// The sending agent's id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender: Option<String>,
        /// How it is delivered.
        mode: MessageMode,
        /// Its text.
        text: String,
    },
    /// A message reached `agent`: it is in the request of its turn `turn`.
    MessageDelivered {
        /// To whom.
        agent: String,
        /// Its number in the run.
        seq: u64,
        /// The turn whose request carries it.
        turn: u32,
    },
    /// An agent asked a person (an approval of a call, or a question): on disk before
    /// it waits, so a resumed run asks again the same request, and only it.
    InputRequested(PersonRequest),
    /// The request was answered: on disk before the call it approves runs.
    InputAnswered(Answered),
    /// The journal reached its size bound (`[journal] max_run_mib`), or a record
    /// was longer than a journal line may be (`journal::MAX_LINE_BYTES`): nothing
    /// after this was recorded, and the run cannot be resumed.
    JournalFull {
        /// The bound, in MiB.
        max_run_mib: u64,
    },
    /// The run ended: its root finished and the tree's cost is final.
    RunFinished {
        /// The root's state.
        state: AgentState,
        /// Dollars spent by the whole tree.
        cost_usd: f64,
    },
}

impl Record {
    /// The `agent_finished` record of agent `agent` ending with `outcome`.
    pub(crate) fn agent_finished(agent: &str, outcome: &AgentOutcome) -> Record {
        Record::AgentFinished {
            agent: agent.to_string(),
            state: outcome.state,
            text: outcome.text.clone(),
            output: outcome.output.clone(),
            error: outcome.error.clone(),
            turns: outcome.turns,
            input_tokens: outcome.usage.input_tokens,
            output_tokens: outcome.usage.output_tokens,
            cost_usd: outcome.cost_usd,
            duration_ms: outcome.duration.as_millis() as u64,
        }
    }

    /// The agent and outcome an `agent_finished` record holds (cached tokens are not
    /// recorded); `None` for other records.
    pub(crate) fn finished(&self) -> Option<(&str, AgentOutcome)> {
        let Record::AgentFinished {
            agent,
            state,
            text,
            output,
            error,
            turns,
            input_tokens,
            output_tokens,
            cost_usd,
            duration_ms,
        } = self
        else {
            return None;
        };
        Some((
            agent,
            AgentOutcome {
                state: *state,
                text: text.clone(),
                output: output.clone(),
                error: error.clone(),
                turns: *turns,
                usage: crate::llm::Usage {
                    input_tokens: *input_tokens,
                    cached_input_tokens: 0,
                    output_tokens: *output_tokens,
                },
                cost_usd: *cost_usd,
                duration: std::time::Duration::from_millis(*duration_ms),
            },
        ))
    }

    /// The agent the record is about (`None` for the run's start and end).
    pub(crate) fn agent(&self) -> Option<&str> {
        match self {
            Record::AgentQueued(AgentIntro { agent, .. })
            | Record::AgentStarted { agent }
            | Record::AgentSpec { agent, .. }
            | Record::ModelResponse { agent, .. }
            | Record::ToolStarted { agent, .. }
            | Record::ToolFinished { agent, .. }
            | Record::MessageSent { agent, .. }
            | Record::MessageDelivered { agent, .. }
            | Record::InputRequested(PersonRequest { agent, .. })
            | Record::InputAnswered(Answered { agent, .. })
            | Record::AgentFinished { agent, .. } => Some(agent),
            Record::RunStarted { .. }
            | Record::RunResumed { .. }
            | Record::ToolSet { .. }
            | Record::SystemPrompt { .. }
            | Record::JournalFull { .. }
            | Record::RunFinished { .. } => None,
        }
    }
}

/// A run's limits as it ran with them (`[defaults]`; a worker's job gets what was left
/// of its parent run's budget).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedLimits {
    /// The cost cap of the whole tree, in US dollars; absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// Sub-agents running at once; more are queued.
    pub max_concurrent: usize,
    /// How deep agents may nest.
    pub max_depth: u32,
}

impl From<&RunLimits> for RecordedLimits {
    fn from(limits: &RunLimits) -> RecordedLimits {
        RecordedLimits {
            budget_usd: limits.budget_usd,
            max_concurrent: limits.max_concurrent,
            max_depth: limits.max_depth,
        }
    }
}

/// A tool call as a model response recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RecordedCall {
    /// The provider's id.
    pub id: String,
    /// Which tool.
    pub name: String,
    /// The arguments, as the model wrote them.
    pub arguments: String,
}

/// Where a fork comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ForkedFrom {
    /// The recorded run.
    pub run: String,
    /// The agent whose subtree runs live.
    pub agent: String,
}

/// A tool's definition as offered to a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedToolDef {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: serde_json::Value,
}

/// The children a parent waited for when it tried to finish while they ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Drained {
    /// Those still running then, as the message to it named them.
    pub running: Vec<String>,
    /// Every child whose result the message carried, in order.
    pub delivered: Vec<String>,
}

/// The digest a system prompt is named by in a journal (XXH3-64 of its text, hex).
pub(crate) fn prompt_digest(text: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
