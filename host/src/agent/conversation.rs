//! An agent's conversation across its activations: what its loop has done, the
//! conversation a finished agent rests with, where a run starts (its task, or a
//! follow-up that woke it), and how a run becomes the scheduler's [`AgentRun`].

use std::time::Duration;

use super::runtime::Agent;
use super::typed_output::TypedAnswer;
use crate::jobs::mailbox::Room;
use crate::jobs::mode::AgentMode;
use crate::jobs::History;
use crate::journal::{Fact, Record, RecordedToolDef};
use crate::llm::{ChatRequest, Message, Requester, Usage};
use crate::outcome::AgentState;
use crate::scheduler::{AgentRun, Ended, Wake};

/// What the loop has done so far (kept outside it, so a timeout or a cancellation
/// still reports turns, usage and the last text).
#[derive(Default)]
pub(super) struct Progress {
    pub(super) turns: u32,
    pub(super) usage: Usage,
    pub(super) cost_usd: f64,
    pub(super) text: String,
    /// A typed answer, once checked.
    pub(super) output: Option<serde_json::Value>,
    /// Wall time it ran, over every activation (a follow-up resumes it).
    pub(super) active: Duration,
}

/// An agent's conversation, kept while it rests after it finished, for a follow-up
/// to resume: its request as it stands (its whole history), what it has done, and
/// its typed answer's checks.
pub(crate) struct Conversation {
    pub(super) request: ChatRequest,
    pub(super) progress: Progress,
    pub(super) typed: Option<TypedAnswer>,
}

/// Where an agent's run starts.
pub(crate) enum Stage {
    /// From its task.
    Start(String),
    /// From the conversation it rested with: a follow-up woke it.
    Again(Box<Conversation>),
}

impl Agent {
    /// The run of this agent on `task`, to its end (see [`Agent::activate`]).
    pub(crate) fn start_run(self, task: String) -> AgentRun {
        self.activate(Stage::Start(task))
    }

    /// The run of this agent from `stage`, to its end; one that may take follow-ups
    /// ends with how to wake it, its conversation kept.
    fn activate(mut self, stage: Stage) -> AgentRun {
        Box::pin(async move {
            let (outcome, rest) = self.run(stage).await;
            let wake = rest.map(|conversation| -> Wake {
                // A resting agent holds no span open (a span ends when its last
                // handle goes): a follow-up's run nests under the same parent by
                // its trace context, as a remote child's does.
                if let Some(parent) = self.parent_span.take() {
                    self.traceparent = crate::telemetry::traceparent(&parent);
                }
                Box::new(move || self.activate(Stage::Again(Box::new(conversation))))
            });
            Ended { outcome, wake }
        })
    }

    /// Whether this agent, having finished ok with `progress`, may be resumed by a
    /// follow-up: a sub-agent (in a replay, one the recording woke again) with
    /// turns and follow-ups left, while the run has room for its conversation
    /// ([`MAX_RESTING`](crate::jobs::tree::MAX_RESTING); the place is taken now).
    pub(super) fn may_rest(&self, progress: &Progress) -> bool {
        let limits = &self.place.tree.limits;
        self.depth > 0
            && !self.place.root
            && progress.turns < self.limits.max_turns
            && self.place.mailbox.follow_ups() < limits.max_follow_ups
            && self.rests_in_replay(progress.turns)
            && self.place.tree.take_rest()
    }

    /// In a replay, whether the recording has this agent run again after it finished
    /// at turn `turns` (a follow-up woke it): only then does it rest.
    fn rests_in_replay(&self, turns: u32) -> bool {
        match self.mode() {
            AgentMode::Replayed(_, recorded) => recorded.is_some_and(|a| a.turns() > turns),
            _ => true,
        }
    }

    /// The conversation of an agent starting on `task`: its first request, and in a
    /// resumed run the messages it had been sent, back in its mailbox.
    pub(super) fn open(&self, task: String) -> Result<Conversation, (AgentState, String)> {
        let (_, provider) = self.provider()?;
        let mut request = ChatRequest {
            system: self.system_prompt(),
            messages: vec![Message::User(task)],
            tools: self.tool_definitions(),
            requester: Requester {
                profile: self.profile.name.clone(),
                agent_id: self.place.id.0.clone(),
            },
            answer_schema: None,
        };
        let typed = TypedAnswer::new(self.profile.output_schema.as_ref(), &*provider);
        if let Some(typed) = &typed {
            typed.prepare(&mut request);
        }
        self.restore_letters();
        let mut progress = Progress::default();
        self.take_carried(&mut request, &mut progress);
        Ok(Conversation {
            request,
            progress,
            typed,
        })
    }

    /// A follow-up's job on a worker: its root opens with the history it rested with
    /// (its task already in it), and the letters that woke it are its first to read.
    fn take_carried(&self, request: &mut ChatRequest, progress: &mut Progress) {
        if !self.place.root {
            return;
        }
        let Some((history, letters)) = self.place.tree.carried.take_given() else {
            return;
        };
        request.messages = history.messages;
        progress.turns = history.turns;
        for letter in letters {
            self.place
                .tree
                .happened(Fact::Recorded(Record::MessageSent {
                    agent: self.place.id.0.clone(),
                    seq: letter.seq,
                    from: letter.from.clone(),
                    sender: None,
                    mode: letter.mode,
                    text: letter.text.clone(),
                }));
            // Accepted by the parent's run: no limit refuses it here.
            let _ = self.place.mailbox.post(letter, Room::UNBOUNDED, || {});
        }
    }

    /// Records the agent's tool set and spec in the journal, and announces the spec.
    pub(super) fn record_spec(&self, task: &str) {
        let tools = self.tool_names();
        self.place.tree.record_tool_set(&tools, || Record::ToolSet {
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
        self.place.tree.happened(Fact::Recorded(Record::AgentSpec {
            agent: self.place.id.0.clone(),
            message: task.to_string(),
            model: self.profile.model.clone(),
            tools,
            max_turns: self.limits.max_turns,
            timeout_s: self.limits.timeout_s,
            max_cost_usd: self.limits.max_cost_usd,
            depth: self.depth,
            system: String::new(),
            // Its prompt is journaled once per process; the spec names it.
            system_digest: self.place.tree.record_prompt(&self.system_prompt()),
        }));
    }

    /// A queue job's root that finished ok leaves its history for its worker to hand
    /// back, when the job asked for it (a follow-up may resume it).
    pub(super) fn leave_history(&self, conversation: &Conversation) {
        let carried = &self.place.tree.carried;
        if self.place.root && carried.keeps() {
            carried.keep(History {
                messages: conversation.request.messages.clone(),
                turns: conversation.progress.turns,
            });
        }
    }
}
