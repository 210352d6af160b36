//! How an agent ended ([`AgentState`]) and what it produced ([`AgentOutcome`]): the
//! one vocabulary the agent loop, the job tree, the queue's wire format, the
//! configuration (`fail_jobs_on`) and every view share. A state's name
//! ([`AgentState::as_str`], its serde form) is written in this file only.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::llm::Usage;

/// How an agent ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// It answered.
    Ok,
    /// The model call or setup failed.
    Error,
    /// It (or an ancestor) was cancelled.
    Cancelled,
    /// It ran past `timeout_s`.
    TimedOut,
    /// It used `max_turns` turns without answering.
    MaxTurns,
    /// The run's budget or its own cost cap was used up.
    BudgetExceeded,
    /// The model's turn was cut at its output limit (`length`, `max_tokens`): what it
    /// wrote is incomplete, and so may be its tool calls' arguments, which are not run.
    Truncated,
    /// The provider refused or filtered the answer (`content_filter`, a refusal).
    Refused,
    /// Its answer did not match its output schema, twice (once more after being told
    /// why): the error lists the schema errors, the text is the raw answer.
    InvalidOutput,
}

impl AgentState {
    /// Lower-case name, as in summaries and JSON.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AgentState::Ok => "ok",
            AgentState::Error => "error",
            AgentState::Cancelled => "cancelled",
            AgentState::TimedOut => "timed_out",
            AgentState::MaxTurns => "max_turns",
            AgentState::BudgetExceeded => "budget_exceeded",
            AgentState::Truncated => "truncated",
            AgentState::Refused => "refused",
            AgentState::InvalidOutput => "invalid_output",
        }
    }

    /// Every state, for parsing names back.
    pub(crate) const ALL: [AgentState; 9] = [
        AgentState::Ok,
        AgentState::Error,
        AgentState::Cancelled,
        AgentState::TimedOut,
        AgentState::MaxTurns,
        AgentState::BudgetExceeded,
        AgentState::Truncated,
        AgentState::Refused,
        AgentState::InvalidOutput,
    ];

    /// The state named `name` (as [`AgentState::as_str`] writes it).
    pub(crate) fn from_name(name: &str) -> Option<AgentState> {
        AgentState::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::str::FromStr for AgentState {
    type Err = String;

    /// The state named `name`, or an error listing the names.
    fn from_str(name: &str) -> Result<AgentState, String> {
        AgentState::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = AgentState::ALL.iter().map(|s| s.as_str()).collect();
            format!("`{name}` is not an agent state ({})", names.join(", "))
        })
    }
}

impl std::fmt::Display for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// What an agent produced and used.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentOutcome {
    /// How it ended.
    pub state: AgentState,
    /// Its final answer (or the last text it wrote); a typed answer's compact JSON.
    pub text: String,
    /// A typed answer (its profile or spawn had an output schema), checked against
    /// the schema: only ever set when `state` is `Ok`.
    pub output: Option<serde_json::Value>,
    /// Why it did not end well, naming the limit where one was hit.
    pub error: Option<String>,
    /// Model turns used.
    pub turns: u32,
    /// Tokens used.
    pub usage: Usage,
    /// Dollars spent.
    pub cost_usd: f64,
    /// Wall time.
    pub duration: Duration,
}

impl AgentOutcome {
    /// A short reason for a result header: the error's first line, or the state.
    pub(crate) fn reason(&self) -> String {
        match &self.error {
            Some(error) => error.lines().next().unwrap_or_default().to_string(),
            None => self.state.as_str().to_string(),
        }
    }

    /// A job cancelled before its agent started.
    pub(crate) fn cancelled_before_start() -> AgentOutcome {
        AgentOutcome {
            state: AgentState::Cancelled,
            text: String::new(),
            output: None,
            error: Some("cancelled before it started".into()),
            turns: 0,
            usage: Usage::default(),
            cost_usd: 0.0,
            duration: Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_names_are_the_state_names() {
        for state in AgentState::ALL {
            let json = serde_json::to_value(state).unwrap();
            assert_eq!(json, state.as_str());
            assert_eq!(AgentState::from_name(state.as_str()), Some(state));
            assert_eq!(serde_json::from_value::<AgentState>(json).unwrap(), state);
        }
    }
}
