//! `warren diff RUN_A RUN_B`: two journaled runs' trees side by side, so the effect of
//! a fork or of a change reads at a glance: agents only in one run, and for agents in
//! both, state, turns, tokens, cost, tool calls (denials) and answer.
//!
//! Agents are matched by their place in the tree, not by id (a fork's new agents have
//! new ids): the chain of profile and task from the root, the n-th such agent under
//! its parent matching the n-th.

use std::collections::HashMap;

use crate::journal::read::{AgentRecord, RunRecord};
use crate::term::reportln;

/// One agent's place: its ancestors' and its own profile and task.
fn keys(run: &RunRecord) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut own: HashMap<&str, String> = HashMap::new();
    for agent in &run.agents {
        let parent = agent
            .parent
            .as_deref()
            .and_then(|p| own.get(p).cloned())
            .unwrap_or_default();
        let base = format!("{parent}/{}\u{0}{}", agent.profile, agent.task);
        let n = seen.entry(base.clone()).or_default();
        *n += 1;
        own.insert(agent.id.as_str(), format!("{base}#{n}"));
    }
    run.agents
        .iter()
        .map(|a| own[a.id.as_str()].clone())
        .collect()
}

/// How an agent is shown: its profile and label (or the start of its task), under
/// its parent's.
fn shown(agent: &AgentRecord, depth: usize) -> String {
    let what = agent.label.clone().unwrap_or_else(|| {
        let task: String = agent.task.chars().take(28).collect();
        task.replace('\n', " ")
    });
    format!("{}{} ({what})", "  ".repeat(depth), agent.profile)
}

/// Each agent's depth, by id: in one pass, since the reader puts every parent
/// before its children.
fn depths(run: &RunRecord) -> HashMap<&str, usize> {
    let mut depths: HashMap<&str, usize> = HashMap::new();
    for agent in &run.agents {
        let depth = agent
            .parent
            .as_deref()
            .and_then(|p| depths.get(p))
            .map_or(0, |d| d + 1);
        depths.insert(agent.id.as_str(), depth);
    }
    depths
}

fn figures(agent: &AgentRecord) -> (String, u32, u64, f64, String) {
    let tools = if agent.denials > 0 {
        format!("{} ({} denied)", agent.tool_calls, agent.denials)
    } else {
        agent.tool_calls.to_string()
    };
    (
        agent.state.clone(),
        agent.turns,
        agent.tokens,
        agent.cost_usd,
        tools,
    )
}

fn pair<T: PartialEq + std::fmt::Display>(a: T, b: T) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a} → {b}")
    }
}

/// Prints the row of an agent in both runs, each figure as `was → now` where it
/// changed; returns whether the two are the same.
fn print_both(label: &str, agent: &AgentRecord, other: &AgentRecord) -> anyhow::Result<bool> {
    let (state, turns, tokens, cost, tools) = figures(agent);
    let (state_b, turns_b, tokens_b, cost_b, tools_b) = figures(other);
    let same = state == state_b
        && turns == turns_b
        && tokens == tokens_b
        && tools == tools_b
        && agent.text == other.text;
    let mark = if same { ' ' } else { '~' };
    reportln!(
        "{mark} {label:<40} {:<22} {:>7} {:>17} {:>21} {:>9}",
        pair(state, state_b),
        pair(turns, turns_b),
        pair(tokens, tokens_b),
        pair(format!("${cost:.4}"), format!("${cost_b:.4}")),
        pair(tools, tools_b)
    )?;
    Ok(same)
}

/// Each key's index in `keys`.
fn positions(keys: &[String]) -> HashMap<&str, usize> {
    keys.iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect()
}

/// Prints `a` and `b` side by side; returns whether they differ.
pub(crate) fn print(a: &RunRecord, b: &RunRecord) -> anyhow::Result<bool> {
    let describe = |run: &RunRecord| match &run.forked_from {
        Some(from) => format!("{} (fork of {} from {})", run.id, from.run, from.agent),
        None => run.id.clone(),
    };
    reportln!("- {}\n+ {}", describe(a), describe(b))?;
    let (keys_a, keys_b) = (keys(a), keys(b));
    let (in_a, in_b) = (positions(&keys_a), positions(&keys_b));
    reportln!(
        "  {:<40} {:<22} {:>7} {:>17} {:>21} {:>9}",
        "agent",
        "state",
        "turns",
        "tokens",
        "cost",
        "tools"
    )?;
    let (depths_a, depths_b) = (depths(a), depths(b));
    let mut differs = false;
    let mut answers = Vec::new();
    for (i, agent) in a.agents.iter().enumerate() {
        let label = shown(agent, depths_a[agent.id.as_str()]);
        match in_b.get(keys_a[i].as_str()) {
            None => {
                differs = true;
                let (state, turns, tokens, cost, tools) = figures(agent);
                reportln!(
                    "- {label:<40} {state:<22} {turns:>7} {tokens:>17} {:>21} {tools:>9}",
                    format!("${cost:.4}")
                )?;
            }
            Some(&j) => {
                let other = &b.agents[j];
                differs |= !print_both(&label, agent, other)?;
                if agent.text != other.text {
                    answers.push((label.trim().to_string(), &agent.text, &other.text));
                }
            }
        }
    }
    for (j, agent) in b.agents.iter().enumerate() {
        if in_a.contains_key(keys_b[j].as_str()) {
            continue;
        }
        differs = true;
        let (state, turns, tokens, cost, tools) = figures(agent);
        reportln!(
            "+ {:<40} {state:<22} {turns:>7} {tokens:>17} {:>21} {tools:>9}",
            shown(agent, depths_b[agent.id.as_str()]),
            format!("${cost:.4}")
        )?;
    }
    reportln!(
        "  total: {} agents, {} tokens, {}",
        pair(a.agents.len(), b.agents.len()),
        pair(a.tokens(), b.tokens()),
        pair(format!("${:.4}", a.cost_usd), format!("${:.4}", b.cost_usd))
    )?;
    for (label, was, now) in answers {
        reportln!("\nanswer of {label}:")?;
        reportln!("{}", crate::agent::line_diff(was, now).trim_end())?;
    }
    Ok(differs)
}
