//! What a resumed run reuses from its journal: for each agent, its registration, its
//! model responses by turn, its tool calls by turn and call id (finished, or started
//! with no end: in doubt), and its outcome when it ended. A resumed run re-registers
//! its jobs under their recorded ids (a spawn claims the recorded child of the same
//! parent, profile and task), reuses every recorded response and result instead of
//! asking or running again, and writes only what is new.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use crate::events::{AgentIntro, Answered, PersonAnswer, PersonRequest, Verdict};
use crate::llm::Usage;
use crate::outcome::{AgentOutcome, AgentState};
use crate::sandbox::ToolOutcome;

use super::record::{Drained, Line, Record, RecordedCall, RecordedToolDef};

/// A model response as recorded.
#[derive(Clone, Debug)]
pub(crate) struct RecordedResponse {
    /// Its text.
    pub text: String,
    /// Reasoning the model showed.
    pub reasoning: String,
    /// A refusal instead of an answer.
    pub refusal: Option<String>,
    /// Content blocks sent back unchanged.
    pub provider_blocks: Vec<serde_json::Value>,
    /// Its tool calls.
    pub tool_calls: Vec<RecordedCall>,
    /// Why it stopped.
    pub finish: String,
    /// Its usage.
    pub usage: Usage,
    /// Dollars.
    pub cost_usd: f64,
    /// The digest of the request it answered.
    pub request_digest: Option<String>,
    /// Messages in that request.
    pub request_messages: usize,
    /// Children whose results were delivered in a notification just before it.
    pub notified: Vec<String>,
    /// Receipts of its messages that reached it just before it, by number.
    pub receipts: Vec<u64>,
    /// Children waited for when the agent tried to finish before it.
    pub drained: Option<Drained>,
}

/// A tool call as recorded: started, and perhaps finished.
#[derive(Clone, Debug, Default)]
pub(crate) struct RecordedTool {
    /// Its result or typed error, when its end was recorded; `None`: in doubt.
    pub finished: Option<(ToolOutcome, String)>,
}

/// One agent's records.
#[derive(Debug)]
pub(crate) struct RecordedAgent {
    /// Its registration.
    pub intro: AgentIntro,
    /// When it started.
    started_ms: Option<u64>,
    /// When its last record was made.
    last_ms: u64,
    /// Whether its spec was recorded.
    spec: bool,
    /// Its model, as its spec recorded it.
    pub model: Option<String>,
    /// Its system prompt, as its spec recorded it (empty in journals older than the
    /// field).
    pub system: String,
    /// The definitions of the tools it was offered, when recorded.
    pub tool_defs: Option<std::sync::Arc<Vec<RecordedToolDef>>>,
    /// Its responses, by turn (a turn an interrupt cut has none).
    responses: std::collections::BTreeMap<u32, RecordedResponse>,
    /// Its tool calls by (turn, call id).
    tools: HashMap<(u32, String), RecordedTool>,
    /// How it ended, when it did and no follow-up resumed it since.
    pub finished: Option<AgentOutcome>,
    /// Its turns at each recorded end (a follow-up resumes an agent that ended).
    finish_turns: Vec<u32>,
    /// The messages left for it, in the order sent.
    pub letters: Vec<RecordedLetter>,
}

/// A message left for an agent, as recorded.
#[derive(Clone, Debug)]
pub(crate) struct RecordedLetter {
    /// Its number in the run.
    pub seq: u64,
    /// Who sent it.
    pub from: String,
    /// The sending agent's id.
    pub sender: Option<String>,
    /// How it was delivered.
    pub mode: crate::events::MessageMode,
    /// Its text.
    pub text: String,
    /// When it was sent (ms since the Unix epoch).
    pub sent_ms: u64,
    /// The turn whose request carried it, once delivered.
    pub delivered: Option<u32>,
}

impl RecordedAgent {
    /// The recorded response to turn `turn` (1-based).
    pub(crate) fn response(&self, turn: u32) -> Option<&RecordedResponse> {
        self.responses.get(&turn)
    }

    /// The recorded call `call_id` of turn `turn`.
    pub(crate) fn tool(&self, turn: u32, call_id: &str) -> Option<&RecordedTool> {
        self.tools.get(&(turn, call_id.to_string()))
    }

    /// Wall time it had run before the run's process died.
    pub(crate) fn time_spent(&self) -> Duration {
        self.started_ms.map_or(Duration::ZERO, |started| {
            Duration::from_millis(self.last_ms.saturating_sub(started))
        })
    }

    /// Its last recorded turn (0: none).
    pub(crate) fn turns(&self) -> u32 {
        self.responses.keys().next_back().copied().unwrap_or(0)
    }

    /// Whether an interrupt cut its turn `turn`: no response was recorded for it, and
    /// one was for a later turn.
    pub(crate) fn was_cut(&self, turn: u32) -> bool {
        !self.responses.contains_key(&turn) && self.turns() > turn
    }

    /// Whether `letter` is a follow-up an agent sent that woke it after it finished
    /// (read in the turn after one of its recorded ends).
    pub(crate) fn woken_by(&self, letter: &RecordedLetter) -> bool {
        letter.mode == crate::events::MessageMode::FollowUp
            && letter.sender.is_some()
            && letter
                .delivered
                .is_some_and(|turn| self.ended_at(turn.saturating_sub(1)))
    }

    /// Whether it ran in this run's process (its spec or responses are recorded
    /// here), not on a worker.
    pub(crate) fn ran_here(&self) -> bool {
        self.spec || !self.responses.is_empty()
    }

    /// Whether it had recorded an end after turn `turn`.
    pub(crate) fn ended_at(&self, turn: u32) -> bool {
        self.finish_turns.contains(&turn)
    }

    /// Whether it was running (or started and ended) in the earlier process.
    pub(crate) fn started(&self) -> bool {
        self.started_ms.is_some()
    }
}

/// A run's journal, read for resuming.
#[derive(Debug)]
pub(crate) struct Resume {
    /// The run's id.
    pub run: String,
    /// The root's task.
    pub task: String,
    /// The root's profile.
    pub profile: String,
    /// The root's id.
    pub root: String,
    /// SHA-256 of the configuration the run started with.
    pub config_sha256: String,
    /// SHA-256 of each plugin file the run started with, by plugin name.
    pub plugins_sha256: std::collections::BTreeMap<String, String>,
    /// How the run ended, when it did.
    pub finished: Option<AgentState>,
    /// Dollars the earlier processes spent.
    pub spent_usd: f64,
    /// The size bound the journal reached, when it did (it cannot be resumed).
    pub full: Option<u64>,
    /// The highest number a recorded message took (0: none).
    pub max_message_seq: u64,
    agents: HashMap<String, RecordedAgent>,
    /// Every recorded job id (a new job never takes one).
    ids: HashSet<String>,
    /// Recorded jobs not yet re-registered, by parent (`None`: the root).
    unclaimed: Mutex<HashMap<Option<String>, Vec<String>>>,
    /// Agent ids in the order they were registered.
    order: Vec<String>,
    /// The latest recorded definitions of each set of tool names.
    tool_sets: HashMap<Vec<String>, std::sync::Arc<Vec<RecordedToolDef>>>,
    /// The recorded system prompts, by digest.
    prompts: HashMap<String, String>,
    /// The requests for a person, by id, each with its answer once recorded.
    requests: HashMap<String, (PersonRequest, Option<PersonAnswer>)>,
    /// Tools a person approved for the rest of the run.
    approved_tools: std::collections::BTreeSet<String>,
}

impl Resume {
    /// The resume state of the run whose journal holds `lines`.
    pub(crate) fn new(lines: Vec<Line>) -> anyhow::Result<Resume> {
        let mut lines = lines.into_iter();
        let Some(Line {
            record:
                Record::RunStarted {
                    run,
                    task,
                    profile,
                    config_sha256,
                    plugins_sha256,
                    ..
                },
            ..
        }) = lines.next()
        else {
            anyhow::bail!("the journal does not begin with the run's start");
        };
        let mut resume = Resume {
            run,
            task,
            profile,
            root: String::new(),
            config_sha256,
            plugins_sha256,
            finished: None,
            spent_usd: 0.0,
            full: None,
            max_message_seq: 0,
            agents: HashMap::new(),
            ids: HashSet::new(),
            unclaimed: Mutex::default(),
            tool_sets: HashMap::new(),
            prompts: HashMap::new(),
            order: Vec::new(),
            requests: HashMap::new(),
            approved_tools: Default::default(),
        };
        // Costs of agents whose responses are recorded here; the others' (agents run on
        // workers, mirrored) come from their outcomes.
        let mut responded: HashSet<String> = HashSet::new();
        for Line { ts_ms, record } in lines {
            resume.apply(ts_ms, record, &mut responded);
        }
        for agent in resume.agents.values() {
            if let Some(outcome) = &agent.finished {
                if !responded.contains(&agent.intro.agent) {
                    resume.spent_usd += outcome.cost_usd;
                }
            }
        }
        anyhow::ensure!(!resume.root.is_empty(), "the journal names no root agent");
        Ok(resume)
    }

    fn apply(&mut self, ts_ms: u64, record: Record, responded: &mut HashSet<String>) {
        match record {
            Record::AgentQueued(intro) => self.queued(ts_ms, intro),
            Record::AgentStarted { agent } => {
                if let Some(agent) = self.agents.get_mut(&agent) {
                    agent.started_ms.get_or_insert(ts_ms);
                    agent.last_ms = ts_ms;
                }
            }
            record @ (Record::MessageSent { .. } | Record::MessageDelivered { .. }) => {
                self.message(ts_ms, record)
            }
            Record::AgentSpec {
                agent,
                model,
                system,
                system_digest,
                tools,
                ..
            } => {
                let tool_defs = self.tool_sets.get(&tools).cloned();
                let system = match system_digest {
                    Some(digest) => self.prompts.get(&digest).cloned().unwrap_or_default(),
                    None => system,
                };
                if let Some(agent) = self.agents.get_mut(&agent) {
                    agent.spec = true;
                    agent.model = model;
                    agent.system = system;
                    agent.tool_defs = tool_defs;
                    agent.last_ms = ts_ms;
                }
            }
            Record::ToolSet { tools } => {
                let names = tools.iter().map(|t| t.name.clone()).collect();
                self.tool_sets.insert(names, std::sync::Arc::new(tools));
            }
            Record::SystemPrompt { digest, text } => {
                self.prompts.insert(digest, text);
            }
            record @ Record::ModelResponse { .. } => self.response(ts_ms, record, responded),
            Record::ToolStarted { agent, call_id, .. } => {
                if let Some(agent) = self.agents.get_mut(&agent) {
                    agent.last_ms = ts_ms;
                    let turn = agent.turns();
                    agent.tools.entry((turn, call_id)).or_default();
                }
            }
            Record::ToolFinished {
                agent,
                call_id,
                outcome,
                content,
                ..
            } => {
                if let Some(agent) = self.agents.get_mut(&agent) {
                    agent.last_ms = ts_ms;
                    let turn = agent.turns();
                    agent.tools.entry((turn, call_id)).or_default().finished =
                        Some((outcome, content));
                }
            }
            Record::AgentFinished { .. } => {
                if let Some((id, outcome)) = record.finished() {
                    if let Some(agent) = self.agents.get_mut(id) {
                        agent.last_ms = ts_ms;
                        agent.finish_turns.push(outcome.turns);
                        agent.finished = Some(outcome);
                    }
                }
            }
            record @ (Record::InputRequested(_) | Record::InputAnswered(_)) => self.person(record),
            Record::RunFinished { state, .. } => self.finished = Some(state),
            Record::JournalFull { max_run_mib } => self.full = Some(max_run_mib),
            Record::RunStarted { .. } | Record::RunResumed { .. } => {}
        }
    }

    /// A request for a person, or its answer: kept by id (a tool approved for the rest
    /// of the run, with the run).
    fn person(&mut self, record: Record) {
        match record {
            Record::InputRequested(request) => {
                self.requests.insert(request.id.clone(), (request, None));
            }
            Record::InputAnswered(Answered {
                request, answer, ..
            }) => {
                if let Some((asked, answered)) = self.requests.get_mut(&request) {
                    if answer.verdict == Verdict::ApproveTool {
                        self.approved_tools.insert(asked.tool.clone());
                    }
                    *answered = Some(answer);
                }
            }
            _ => {}
        }
    }

    /// Request `id` as recorded, with its answer if one was.
    pub(crate) fn request(&self, id: &str) -> Option<&(PersonRequest, Option<PersonAnswer>)> {
        self.requests.get(id)
    }

    /// The tools a person approved for the rest of the run.
    pub(crate) fn approved_tools(&self) -> impl Iterator<Item = &String> {
        self.approved_tools.iter()
    }

    /// An agent registered (`agent_queued`): the root is the first without a parent.
    fn queued(&mut self, ts_ms: u64, intro: AgentIntro) {
        if intro.parent.is_none() && self.root.is_empty() {
            self.root = intro.agent.clone();
        }
        if self.ids.insert(intro.agent.clone()) {
            self.order.push(intro.agent.clone());
        }
        self.unclaimed
            .get_mut()
            .expect("fresh mutex")
            .entry(intro.parent.clone())
            .or_default()
            .push(intro.agent.clone());
        self.agents.insert(
            intro.agent.clone(),
            RecordedAgent {
                intro,
                started_ms: None,
                last_ms: ts_ms,
                spec: false,
                model: None,
                system: String::new(),
                tool_defs: None,
                responses: std::collections::BTreeMap::new(),
                tools: HashMap::new(),
                finished: None,
                finish_turns: Vec::new(),
                letters: Vec::new(),
            },
        );
    }

    /// A message's record (`message_sent`, `message_delivered`): kept with its agent.
    fn message(&mut self, ts_ms: u64, record: Record) {
        match record {
            Record::MessageSent {
                agent,
                seq,
                from,
                sender,
                mode,
                text,
            } => {
                self.max_message_seq = self.max_message_seq.max(seq);
                let follow_up = mode == crate::events::MessageMode::FollowUp;
                // Sent after the run ended (`warren resume --follow-up`): the run goes
                // on, each ancestor of the agent that had finished brought back from
                // its record.
                if follow_up && self.agents.contains_key(&agent) && self.finished.take().is_some() {
                    self.reopen_ancestors(&agent);
                }
                if let Some(agent) = self.agents.get_mut(&agent) {
                    // A follow-up resumed it: it runs again, to its next end.
                    if follow_up {
                        agent.finished = None;
                    }
                    agent.letters.push(RecordedLetter {
                        seq,
                        from,
                        sender,
                        mode,
                        text,
                        sent_ms: ts_ms,
                        delivered: None,
                    });
                }
            }
            Record::MessageDelivered { agent, seq, turn } => {
                let letter = self
                    .agents
                    .get_mut(&agent)
                    .and_then(|a| a.letters.iter_mut().find(|l| l.seq == seq));
                if let Some(letter) = letter {
                    letter.delivered.get_or_insert(turn);
                }
            }
            _ => {}
        }
    }

    /// Each ancestor of agent `id` runs again (from its record, to bring the agent
    /// back): its end is no longer its last.
    fn reopen_ancestors(&mut self, id: &str) {
        let mut parent = self.agents.get(id).and_then(|a| a.intro.parent.clone());
        while let Some(agent) = parent.and_then(|p| self.agents.get_mut(&p)) {
            agent.finished = None;
            parent = agent.intro.parent.clone();
        }
    }

    /// Applies the record of a message journaled since the journal was read (a
    /// follow-up `warren resume` sends).
    pub(crate) fn sent(&mut self, ts_ms: u64, record: Record) {
        self.message(ts_ms, record);
    }

    /// A model response (`model_response`): counted as spent and kept for its agent.
    fn response(&mut self, ts_ms: u64, record: Record, responded: &mut HashSet<String>) {
        let Record::ModelResponse {
            agent,
            text,
            reasoning,
            refusal,
            provider_blocks,
            tool_calls,
            finish,
            input_tokens,
            cached_input_tokens,
            output_tokens,
            cost_usd,
            request_digest,
            request_messages,
            notified,
            receipts,
            drained,
            turn,
            ..
        } = record
        else {
            return;
        };
        self.spent_usd += cost_usd;
        responded.insert(agent.clone());
        if let Some(agent) = self.agents.get_mut(&agent) {
            agent.last_ms = ts_ms;
            agent.responses.insert(
                turn,
                RecordedResponse {
                    text,
                    reasoning,
                    refusal,
                    provider_blocks,
                    tool_calls,
                    finish,
                    usage: Usage {
                        input_tokens,
                        cached_input_tokens,
                        output_tokens,
                    },
                    cost_usd,
                    request_digest,
                    request_messages,
                    notified,
                    receipts,
                    drained,
                },
            );
        }
    }

    /// Agent `id`'s records.
    pub(crate) fn agent(&self, id: &str) -> Option<&RecordedAgent> {
        self.agents.get(id)
    }

    /// Every recorded agent, in the order they were registered.
    pub(crate) fn agents_in_order(&self) -> impl Iterator<Item = &RecordedAgent> {
        self.order.iter().filter_map(|id| self.agents.get(id))
    }

    /// The recorded id of the next job registered under `parent` (`None`: the root)
    /// with `profile` and `task`, taken so no other job gets it; `None` when there is
    /// no such recorded job left (the job is new).
    pub(crate) fn claim(&self, parent: Option<&str>, profile: &str, task: &str) -> Option<String> {
        let mut unclaimed = self.unclaimed.lock().expect("resume state poisoned");
        let ids = unclaimed.get_mut(&parent.map(str::to_string))?;
        let at = ids.iter().position(|id| {
            self.agents
                .get(id)
                .is_some_and(|a| a.intro.profile == profile && a.intro.task == task)
        })?;
        Some(ids.remove(at))
    }

    /// Whether `id` is a recorded job's (a new job must not take it).
    pub(crate) fn is_recorded(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Whether `record` is in the journal already (a resumed job's registration,
    /// start, spec and end, and a system prompt, are not written twice).
    pub(crate) fn has(&self, record: &Record) -> bool {
        let agent = |id: &str| self.agents.get(id);
        match record {
            Record::AgentQueued(intro) => agent(&intro.agent).is_some(),
            Record::AgentStarted { agent: id } => agent(id).is_some_and(|a| a.started()),
            Record::AgentSpec { agent: id, .. } => agent(id).is_some_and(|a| a.spec),
            Record::MessageSent { agent: id, seq, .. } => {
                agent(id).is_some_and(|a| a.letters.iter().any(|l| l.seq == *seq))
            }
            Record::MessageDelivered { agent: id, seq, .. } => agent(id).is_some_and(|a| {
                a.letters
                    .iter()
                    .any(|l| l.seq == *seq && l.delivered.is_some())
            }),
            Record::SystemPrompt { digest, .. } => self.prompts.contains_key(digest),
            Record::AgentFinished {
                agent: id, turns, ..
            } => agent(id).is_some_and(|a| a.finish_turns.contains(turns)),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
