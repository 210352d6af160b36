//! Where every agent of a run stands, folded from the run's events: the one fold the
//! terminal tree ([`crate::cli::ui`]) and the web view share, so a state is derived in one
//! place however it is drawn. A journaled run folds the same way: its records are
//! read as the events they stand for ([`RunState::from_journal`]).
//!
//! Each agent keeps its identity (path, profile, description, task), what it runs
//! with (model and limits, from `agent_spec`), what it is doing, its usage, and the
//! times it was queued, started, waited on children and finished (the timeline).

use std::collections::HashMap;

use serde::Serialize;

use super::job::Phase;
use crate::events::{summarize, AgentIntro, Event, EventRecord, MessageMode, SpawnMode};
use crate::journal::record::{Line, Record};
use crate::outcome::{AgentOutcome, AgentState};

/// The tool an agent waits on its children in: while in it, the agent is `waiting`.
const AWAIT_TOOL: &str = "await_agents";
/// Waits recorded per agent for the timeline; later ones are folded into the last.
const MAX_WAITS: usize = 32;

/// What an agent is doing now.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "tool", rename_all = "snake_case")]
pub(crate) enum Activity {
    /// Waiting for a concurrency slot.
    Queued,
    /// Started; its first model turn has not begun.
    Starting,
    /// A model turn is in flight.
    Thinking,
    /// In this tool call.
    Tool(String),
    /// Ended.
    Done,
}

/// One agent, as far as the events so far tell.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AgentProgress {
    /// Its id.
    pub id: String,
    /// Who spawned it (`None` for the root).
    pub parent: Option<String>,
    /// The ids from the root down to it, joined with `/`: where it sits in the tree.
    pub path: String,
    /// Its profile.
    pub profile: String,
    /// The short label its parent gave (`description`).
    pub description: Option<String>,
    /// Whether its parent waits for it (`None` for the root).
    pub mode: Option<SpawnMode>,
    /// The start of its task.
    pub task: String,
    /// Its model, once its loop began.
    pub model: Option<String>,
    /// Its turn limit, once its loop began.
    pub max_turns: Option<u32>,
    /// Its wall-time limit, once its loop began.
    pub timeout_s: Option<u64>,
    /// Its cost cap, if it has one.
    pub max_cost_usd: Option<f64>,
    /// `queued`, `running`, `waiting` (in `await_agents`), or how it ended.
    pub state: &'static str,
    /// What it is doing.
    pub activity: Activity,
    /// Model turns so far.
    pub turns: u32,
    /// Prompt tokens so far.
    pub input_tokens: u64,
    /// Generated tokens so far.
    pub output_tokens: u64,
    /// Dollars so far.
    pub cost_usd: f64,
    /// Tool calls finished.
    pub tool_calls: u32,
    /// Tool calls the sandbox refused something ([`ToolOutcome::is_denial`](crate::sandbox::ToolOutcome::is_denial)).
    pub denials: u32,
    /// Messages sent to it.
    pub messages: u32,
    /// Of those, the ones it has read.
    pub messages_read: u32,
    /// Fuel its plugin calls burned, summed (calls no guest ran count none).
    pub fuel_used: u64,
    /// Bytes its tool calls returned (results and error messages), summed.
    pub output_bytes: u64,
    /// When it was queued (ms since the Unix epoch).
    pub queued_ms: Option<u64>,
    /// When it started.
    pub started_ms: Option<u64>,
    /// When it ended.
    pub finished_ms: Option<u64>,
    /// When it last did anything (an event of its own).
    pub last_ms: u64,
    /// Its waits on children, `[start, end]` (`end` missing while it waits); at most
    /// [`MAX_WAITS`], the last absorbing any beyond.
    pub waits: Vec<(u64, Option<u64>)>,
    /// Its wall time, once it ended.
    pub duration_ms: Option<u64>,
    /// Why it did not end well.
    pub error: Option<String>,
    /// Its answer, once it ended (bounded as the `agent_finished` event is).
    pub text: Option<String>,
    /// The approval or question it waits on for a person, while it does.
    pub request: Option<crate::events::PersonRequest>,
}

impl AgentProgress {
    /// How it ended, if it did.
    fn ended(&self) -> bool {
        self.finished_ms.is_some()
    }

    fn refresh_state(&mut self, outcome: Option<AgentState>) {
        self.state = match (outcome, &self.activity) {
            (Some(state), _) => state.as_str(),
            (None, _) if self.request.is_some() => self
                .request
                .as_ref()
                .map_or("running", |r| r.kind.waiting_state()),
            (None, Activity::Queued) => Phase::Queued.name(),
            (None, Activity::Tool(tool)) if tool == AWAIT_TOOL => "waiting",
            (None, _) => "running",
        };
    }

    /// Tokens so far, prompt and generated.
    pub(crate) fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// Every agent of one run.
#[derive(Debug, Default)]
pub(crate) struct RunState {
    agents: HashMap<String, AgentProgress>,
    /// Agent ids in the order they first appeared.
    order: Vec<String>,
    /// Each agent's children, in order of appearance.
    children: HashMap<String, Vec<String>>,
    /// The root's id.
    root: Option<String>,
    /// When the last event came (ms since the Unix epoch).
    last_ms: u64,
}

impl RunState {
    /// Applies one event; returns the agent it changed, if any.
    pub(crate) fn apply(&mut self, record: &EventRecord) -> Option<&AgentProgress> {
        let at = record.ts_ms;
        self.last_ms = self.last_ms.max(at);
        let event = &record.event;
        match event {
            Event::AgentQueued(intro) | Event::AgentStarted(intro) => {
                self.introduce(intro, at, matches!(event, Event::AgentStarted(_)))
            }
            Event::AgentSpec {
                agent,
                model,
                max_turns,
                timeout_s,
                max_cost_usd,
                ..
            } => self.update(agent, at, |a| {
                a.model = model.clone();
                a.max_turns = Some(*max_turns);
                a.timeout_s = Some(*timeout_s);
                a.max_cost_usd = *max_cost_usd;
            }),
            Event::TurnStarted { agent, .. } => {
                self.update(agent, at, |a| a.activity = Activity::Thinking)
            }
            Event::ToolCallStarted { agent, tool, .. } => self.update(agent, at, |a| {
                if tool == AWAIT_TOOL {
                    if a.waits.len() < MAX_WAITS {
                        a.waits.push((at, None));
                    } else if let Some(last) = a.waits.last_mut() {
                        last.1 = None;
                    }
                }
                a.activity = Activity::Tool(tool.clone());
            }),
            Event::ToolCallFinished {
                agent,
                outcome,
                summary,
                figures,
                ..
            } => self.update(agent, at, |a| {
                close_wait(a, at);
                a.tool_calls += 1;
                a.fuel_used = a.fuel_used.saturating_add(figures.fuel_used.unwrap_or(0));
                a.output_bytes = a.output_bytes.saturating_add(figures.output_bytes);
                if outcome.is_denial(summary) {
                    a.denials += 1;
                }
                a.activity = Activity::Thinking;
            }),
            Event::Usage {
                agent,
                turns,
                input_tokens,
                output_tokens,
                cost_usd,
            } => self.update(agent, at, |a| {
                a.turns = *turns;
                a.input_tokens = *input_tokens;
                a.output_tokens = *output_tokens;
                a.cost_usd = *cost_usd;
            }),
            Event::AgentFinished { agent, .. } => self.finish(agent, event.outcome()?, at),
            Event::AgentMessage { agent, mode, .. } => {
                if *mode == MessageMode::FollowUp {
                    self.resume(agent, at);
                }
                self.update(agent, at, |a| a.messages += 1)
            }
            Event::AgentMessageDelivered { agent, .. } => {
                self.update(agent, at, |a| a.messages_read += 1)
            }
            Event::TextDelta { agent, .. } => self.update(agent, at, |_| {}),
            Event::InputRequested(_) | Event::InputAnswered(_) => self.person(event, at),
            Event::Lagged { .. } => None,
        }
        .map(|agent| &*agent)
    }

    /// An agent began or stopped waiting for a person.
    fn person(&mut self, event: &Event, at: u64) -> Option<&mut AgentProgress> {
        match event {
            Event::InputRequested(request) => {
                self.update(&request.agent, at, |a| a.request = Some(request.clone()))
            }
            Event::InputAnswered(answered) => self.update(&answered.agent, at, |a| {
                if a.request.as_ref().is_some_and(|r| r.id == answered.request) {
                    a.request = None;
                }
            }),
            _ => None,
        }
    }

    /// An agent queued or started: added when new, its start time set when started.
    fn introduce(
        &mut self,
        intro: &AgentIntro,
        at: u64,
        started: bool,
    ) -> Option<&mut AgentProgress> {
        if !self.agents.contains_key(&intro.agent) {
            if intro.parent.is_none() && self.root.is_none() {
                self.root = Some(intro.agent.clone());
            }
            let path = match intro.parent.as_ref().and_then(|p| self.agents.get(p)) {
                Some(parent) => format!("{}/{}", parent.path, intro.agent),
                None => intro.agent.clone(),
            };
            if let Some(parent) = &intro.parent {
                self.children
                    .entry(parent.clone())
                    .or_default()
                    .push(intro.agent.clone());
            }
            self.order.push(intro.agent.clone());
            self.agents.insert(
                intro.agent.clone(),
                AgentProgress {
                    id: intro.agent.clone(),
                    parent: intro.parent.clone(),
                    path,
                    profile: intro.profile.clone(),
                    description: intro.label.clone(),
                    mode: intro.mode,
                    task: intro.task.clone(),
                    model: None,
                    max_turns: None,
                    timeout_s: None,
                    max_cost_usd: None,
                    state: Phase::Queued.name(),
                    activity: Activity::Queued,
                    turns: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    cost_usd: 0.0,
                    tool_calls: 0,
                    denials: 0,
                    messages: 0,
                    messages_read: 0,
                    fuel_used: 0,
                    output_bytes: 0,
                    queued_ms: Some(at),
                    started_ms: None,
                    finished_ms: None,
                    last_ms: at,
                    waits: Vec::new(),
                    duration_ms: None,
                    error: None,
                    text: None,
                    request: None,
                },
            );
        }
        let agent = self.agents.get_mut(&intro.agent)?;
        if intro.label.is_some() {
            agent.description = intro.label.clone();
        }
        if started && !agent.ended() {
            // A worker's retry starts the same job again: its clock restarts.
            agent.started_ms = Some(at);
            agent.activity = Activity::Starting;
            agent.last_ms = at;
            agent.refresh_state(None);
        }
        Some(agent)
    }

    /// A follow-up reached a known agent: one that had finished is queued again, to
    /// run on with its history.
    fn resume(&mut self, id: &str, at: u64) -> Option<&mut AgentProgress> {
        let agent = self.agents.get_mut(id)?;
        if agent.ended() {
            agent.finished_ms = None;
            agent.error = None;
            agent.activity = Activity::Queued;
            agent.refresh_state(None);
        }
        agent.last_ms = at;
        Some(agent)
    }

    /// Ends a known agent as `outcome` says: its figures, answer and end time.
    fn finish(&mut self, id: &str, outcome: AgentOutcome, at: u64) -> Option<&mut AgentProgress> {
        let agent = self.agents.get_mut(id)?;
        close_wait(agent, at);
        agent.turns = outcome.turns;
        agent.input_tokens = outcome.usage.input_tokens;
        agent.output_tokens = outcome.usage.output_tokens;
        agent.cost_usd = outcome.cost_usd;
        agent.duration_ms = Some(outcome.duration.as_millis() as u64);
        agent.error = outcome.error;
        agent.text = Some(outcome.text);
        agent.finished_ms = Some(at);
        agent.started_ms.get_or_insert(at);
        agent.last_ms = at;
        agent.activity = Activity::Done;
        agent.refresh_state(Some(outcome.state));
        Some(agent)
    }

    /// Changes a known agent that has not ended, and notes it did something.
    fn update(
        &mut self,
        agent: &str,
        at: u64,
        change: impl FnOnce(&mut AgentProgress),
    ) -> Option<&mut AgentProgress> {
        let agent = self.agents.get_mut(agent)?;
        if agent.ended() {
            return None;
        }
        change(agent);
        agent.last_ms = at;
        agent.refresh_state(None);
        Some(agent)
    }

    /// One agent.
    pub(crate) fn agent(&self, id: &str) -> Option<&AgentProgress> {
        self.agents.get(id)
    }

    /// Every agent, in order of appearance (the root first).
    pub(crate) fn agents(&self) -> impl Iterator<Item = &AgentProgress> {
        self.order.iter().map(|id| &self.agents[id])
    }

    /// Agents in tree order (parents before their children, siblings in order of
    /// appearance), each with its depth.
    pub(crate) fn in_tree_order(&self) -> Vec<(usize, &AgentProgress)> {
        let mut out = Vec::with_capacity(self.order.len());
        let mut stack: Vec<(usize, &str)> = self
            .agents()
            .filter(|a| {
                a.parent
                    .as_ref()
                    .is_none_or(|p| !self.agents.contains_key(p))
            })
            .map(|a| (0, a.id.as_str()))
            .collect();
        stack.reverse();
        while let Some((depth, id)) = stack.pop() {
            out.push((depth, &self.agents[id]));
            for child in self.children.get(id).into_iter().flatten().rev() {
                stack.push((depth + 1, child));
            }
        }
        out
    }

    /// The children of agent `id`, in order of appearance.
    pub(crate) fn children(&self, id: &str) -> &[String] {
        self.children.get(id).map_or(&[], Vec::as_slice)
    }

    /// The root's id.
    pub(crate) fn root(&self) -> Option<&str> {
        self.root.as_deref()
    }

    /// When the last event came (ms since the Unix epoch).
    pub(crate) fn last_ms(&self) -> u64 {
        self.last_ms
    }

    /// The state a journal's records describe, each record read as the event it stands
    /// for (model responses as cumulative usage, tool results as finished calls).
    pub(crate) fn from_journal(lines: &[Line]) -> RunState {
        let mut state = RunState::default();
        for line in lines {
            state.apply_line(line);
        }
        state
    }

    /// Folds in one journal record, read as the events it stands for: what
    /// [`RunState::from_journal`] does with each, for a reader that takes a journal
    /// a line at a time (the web view follows a growing journal so).
    pub(crate) fn apply_line(&mut self, line: &Line) {
        for event in self.events_of(&line.record) {
            self.apply(&EventRecord {
                ts_ms: line.ts_ms,
                run: "".into(),
                event,
            });
        }
    }

    /// The events a journal record stands for, given the state so far: the event it
    /// was published as ([`Record::event`]), with what the record does not hold taken
    /// from the state (the agent a start introduces, the tool a result names); the
    /// root's registration stands for its `agent_queued`, which was not published.
    fn events_of(&self, record: &Record) -> Vec<Event> {
        let known = |agent: &str| self.agents.get(agent);
        match record {
            Record::AgentQueued(intro) => vec![Event::AgentQueued(AgentIntro {
                task: summarize(&intro.task),
                ..intro.clone()
            })],
            Record::AgentStarted { agent } => known(agent)
                .map(|a| {
                    Event::AgentStarted(AgentIntro {
                        agent: a.id.clone(),
                        parent: a.parent.clone(),
                        profile: a.profile.clone(),
                        task: a.task.clone(),
                        label: None,
                        mode: a.mode,
                    })
                })
                .into_iter()
                .collect(),
            Record::ModelResponse {
                agent,
                turn,
                input_tokens,
                output_tokens,
                cost_usd,
                ..
            } => known(agent)
                .map(|a| Event::Usage {
                    agent: agent.clone(),
                    turns: *turn,
                    input_tokens: a.input_tokens + input_tokens,
                    output_tokens: a.output_tokens + output_tokens,
                    cost_usd: a.cost_usd + cost_usd,
                })
                .into_iter()
                .collect(),
            Record::ToolFinished { agent, .. } => {
                let tool = match known(agent).map(|a| &a.activity) {
                    Some(Activity::Tool(tool)) => tool.as_str(),
                    _ => "",
                };
                record.event(tool).into_iter().collect()
            }
            _ => record.event("").into_iter().collect(),
        }
    }
}

/// Ends the agent's open wait, if it has one.
fn close_wait(agent: &mut AgentProgress, at: u64) {
    if let Some(wait) = agent.waits.last_mut().filter(|w| w.1.is_none()) {
        wait.1 = Some(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::queued;

    fn record(ts_ms: u64, event: Event) -> EventRecord {
        EventRecord {
            ts_ms,
            run: "r".into(),
            event,
        }
    }

    fn tool(agent: &str, tool: &str, started: bool) -> Event {
        if started {
            Event::ToolCallStarted {
                agent: agent.into(),
                call_id: "c".into(),
                tool: tool.into(),
                arguments: String::new(),
            }
        } else {
            Event::ToolCallFinished {
                agent: agent.into(),
                call_id: "c".into(),
                tool: tool.into(),
                outcome: crate::sandbox::ToolOutcome::Denied,
                summary: String::new(),
                duration_ms: 1,
                figures: crate::sandbox::CallFigures {
                    fuel_used: Some(1_000),
                    output_bytes: 12,
                    memory_peak_bytes: Some(65_536),
                },
            }
        }
    }

    /// A journal's tool results are read back with their sandbox figures; one
    /// written before they were recorded reads as no fuel and no bytes.
    #[test]
    fn journaled_figures_are_folded_per_agent() {
        let lines: Vec<Line> = [
            r#"{"ts_ms":1,"type":"agent_queued","agent":"a","parent":null,"profile":"p","task":"t"}"#,
            r#"{"ts_ms":2,"type":"tool_started","agent":"a","call_id":"c1","tool":"read_file","arguments":"{}"}"#,
            r#"{"ts_ms":3,"type":"tool_finished","agent":"a","call_id":"c1","outcome":"ok","content":"abc","duration_ms":1,"fuel_used":5000,"output_bytes":3}"#,
            r#"{"ts_ms":4,"type":"tool_started","agent":"a","call_id":"c2","tool":"spawn_agent","arguments":"{}"}"#,
            r#"{"ts_ms":5,"type":"tool_finished","agent":"a","call_id":"c2","outcome":"ok","content":"job","duration_ms":1,"output_bytes":3}"#,
            r#"{"ts_ms":6,"type":"tool_finished","agent":"a","call_id":"c3","outcome":"ok","content":"old","duration_ms":1}"#,
        ]
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
        let state = RunState::from_journal(&lines);
        let agent = state.agent("a").unwrap();
        assert_eq!(agent.tool_calls, 3);
        assert_eq!((agent.fuel_used, agent.output_bytes), (5000, 6));
    }

    /// An agent in `await_agents` is waiting, and the wait is on its timeline; a
    /// denied call is counted; paths run from the root.
    #[test]
    fn waits_denials_and_paths_are_folded() {
        let mut state = RunState::default();
        for (at, event) in [
            (1, queued("r", None)),
            (2, queued("a", Some("r"))),
            (3, tool("r", AWAIT_TOOL, true)),
        ] {
            state.apply(&record(at, event));
        }
        assert_eq!(state.agent("r").unwrap().state, "waiting");
        assert_eq!(state.agent("a").unwrap().path, "r/a");
        assert_eq!(state.agent("a").unwrap().state, "queued");
        state.apply(&record(9, tool("r", AWAIT_TOOL, false)));
        let root = state.agent("r").unwrap();
        assert_eq!(root.state, "running");
        assert_eq!(root.waits, [(3, Some(9))]);
        assert_eq!(root.denials, 1);
        assert_eq!((root.fuel_used, root.output_bytes), (1_000, 12));
        assert_eq!(state.last_ms(), 9);
    }
}
