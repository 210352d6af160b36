//! The JSON the web API answers: a run's snapshot (the run with its totals, and every
//! agent's row in tree order), an agent's transcript (its journal records), and the
//! list of journaled runs. The rows are the shared fold's
//! ([`AgentProgress`](crate::jobs::run_state::AgentProgress)) as they are; the page and any
//! other client read the same shape.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::jobs::run_state::{AgentProgress, RunState};
use crate::journal::record::Line;
use crate::journal::{read, Record};

/// What a snapshot says about the run itself.
#[derive(Clone)]
pub(super) struct RunInfo {
    /// Its id.
    pub(super) id: String,
    /// The root's task.
    pub(super) task: String,
    /// The root's profile.
    pub(super) profile: String,
    /// Whether this process runs it (it can be cancelled, and events follow).
    pub(super) live: bool,
    /// Whether its root ended.
    pub(super) finished: bool,
    /// The root's state.
    pub(super) state: String,
    /// The run's budget, when it has one.
    pub(super) budget_usd: Option<f64>,
    /// Sub-agents that run at once (unknown for a journal from before it was
    /// recorded).
    pub(super) max_concurrent: Option<usize>,
    /// Dollars spent by the whole tree.
    pub(super) cost_usd: f64,
}

/// One agent: its row from the fold, with its depth and (for a journaled run that
/// did not end) the state the journal gives it.
pub(super) fn agent_row(agent: &AgentProgress, state: Option<&str>) -> Value {
    let mut row = serde_json::to_value(agent).unwrap_or_default();
    row["depth"] = agent.path.matches('/').count().into();
    if let Some(state) = state {
        row["state"] = state.into();
    }
    row
}

/// The run's line: who, how it stands, and its totals against its budget.
pub(super) fn run_summary(info: &RunInfo, state: &RunState) -> Value {
    let mut states: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut tokens, mut first_ms) = (0u64, u64::MAX);
    for agent in state.agents() {
        *states.entry(agent.state).or_default() += 1;
        tokens = tokens.saturating_add(agent.tokens());
        first_ms = first_ms.min(agent.queued_ms.unwrap_or(u64::MAX));
    }
    // Resuming continues a run whose end was never recorded; a finished one has none.
    let resume = (!info.finished).then(|| format!("warren resume {}", info.id));
    json!({
        "id": info.id,
        "task": info.task,
        "profile": info.profile,
        "live": info.live,
        "finished": info.finished,
        "state": info.state,
        "started_ms": (first_ms != u64::MAX).then_some(first_ms),
        "last_ms": state.last_ms(),
        "now_ms": crate::events::now_ms(),
        "agents": state.agents().count(),
        "states": states,
        "tokens": tokens,
        "cost_usd": info.cost_usd,
        "budget_usd": info.budget_usd,
        "max_concurrent": info.max_concurrent,
        "commands": {
            "show": format!("warren show {}", info.id),
            "resume": resume,
        },
    })
}

/// The run and every agent in tree order; `state_of` overrides an agent's state.
pub(super) fn snapshot<'a>(
    info: &RunInfo,
    state: &'a RunState,
    state_of: impl Fn(&AgentProgress) -> Option<&'a str>,
) -> Value {
    let agents: Vec<Value> = state
        .in_tree_order()
        .into_iter()
        .map(|(_, agent)| agent_row(agent, state_of(agent)))
        .collect();
    json!({"run": run_summary(info, state), "agents": agents})
}

/// Agent `agent`'s `records` in run `run_id`'s journal (what it was given, each model
/// response, each tool call and result, how it ended), as `warren show --agent
/// --json` prints them, each tool result with `denied`; `None` when the run has no
/// such agent.
pub(super) fn transcript(
    run_id: &str,
    agent: &str,
    records: &[Line],
    row: Option<Value>,
) -> Option<Value> {
    // Each tool result says whether it was a denial, by the one rule the tree counts.
    let marked: Vec<Value> = records
        .iter()
        .map(|line| {
            let mut value = serde_json::to_value(line).unwrap_or_default();
            if let Record::ToolFinished {
                outcome, content, ..
            } = &line.record
            {
                value["denied"] = outcome.is_denial(content).into();
            }
            value
        })
        .collect();
    if records.is_empty() {
        return None;
    }
    let row = match row {
        Some(row) => row,
        None => {
            let state = RunState::from_journal(records);
            match state.agent(agent) {
                Some(found) => agent_row(found, None),
                None => Value::Null,
            }
        }
    };
    Some(json!({"run_id": run_id, "agent": row, "records": marked}))
}

/// Every journaled run in `dir`, newest first, as `warren runs --json` lists them.
pub(super) fn runs(dir: &Path) -> Value {
    let (runs, problems) = read::runs(dir);
    let runs: Vec<Value> = runs.iter().map(read::RunRecord::summary).collect();
    json!({"dir": dir.display().to_string(), "runs": runs, "unreadable": problems})
}
