//! What a journal's records must hold to be read at all, checked once, as each line is
//! read, for every reader (`runs`, `show`, `diff`, `replay`, `resume`, the web view):
//! ids by the one id rule (a recorded id is never joined to a path, and none could
//! name another directory), figures finite and not negative (a recorded cost of
//! −1000 would lift a resumed run's budget), and a tree: every agent's parent
//! queued before it, none its own, none deeper than [`MAX_TREE_DEPTH`]. A record
//! that fails is unreadable, and so is its journal, naming the line and why.

use std::collections::HashMap;

use super::record::{Record, RecordedLimits};

/// The deepest an agent may be recorded (the root is 0): the bound of
/// `[defaults] max_depth`, which no run passes.
pub(crate) const MAX_TREE_DEPTH: u32 = crate::config::MAX_DEPTH;

/// Whether `id` may be a recorded run or agent id: 1 to 64 letters, digits, `_` and
/// `-` (the rule `--run-id` is held to), so no `/`, `.` or control character.
pub(crate) fn is_valid_id(id: &str) -> bool {
    crate::config::is_valid_name(id)
}

/// The tree the records read so far describe: each queued agent's parent and depth.
#[derive(Debug, Default)]
pub(crate) struct TreeCheck {
    agents: HashMap<String, (Option<String>, u32)>,
}

impl TreeCheck {
    /// Checks `record`, read after every record this has seen; the error says what
    /// is wrong with it.
    pub(crate) fn check(&mut self, record: &Record) -> Result<(), String> {
        self::record(record)?;
        let Record::AgentQueued(intro) = record else {
            return Ok(());
        };
        let depth = match &intro.parent {
            None => 0,
            Some(parent) if *parent == intro.agent => {
                return Err(format!("agent `{parent}` is recorded as its own parent"))
            }
            Some(parent) => match self.agents.get(parent) {
                Some((_, depth)) => depth + 1,
                None => {
                    return Err(format!(
                        "agent `{}`'s parent `{parent}` was not queued before it",
                        intro.agent
                    ))
                }
            },
        };
        if depth > MAX_TREE_DEPTH {
            return Err(format!(
                "agent `{}` is {depth} levels deep, deeper than any run goes ({MAX_TREE_DEPTH}, the bound of [defaults] max_depth)",
                intro.agent
            ));
        }
        match self.agents.get(&intro.agent) {
            // Queued again under another parent: the tree could have a cycle.
            Some((parent, _)) if *parent != intro.parent => Err(format!(
                "agent `{}` is queued again under another parent",
                intro.agent
            )),
            Some(_) => Ok(()),
            None => {
                self.agents
                    .insert(intro.agent.clone(), (intro.parent.clone(), depth));
                Ok(())
            }
        }
    }
}

/// Checks what `record` holds by itself (its ids and figures), the tree aside.
pub(crate) fn record(record: &Record) -> Result<(), String> {
    figures(record)?;
    ids(record)
}

/// Every id `record` holds is valid.
fn ids(record: &Record) -> Result<(), String> {
    let bad = |kind: &str, id: &str| {
        Err(format!(
            "`{}` is not a {kind} id (letters, digits, `_` and `-`, at most 64)",
            crate::term::visible(&id.chars().take(80).collect::<String>())
        ))
    };
    if let Some(agent) = record.agent().filter(|id| !is_valid_id(id)) {
        return bad("agent", agent);
    }
    match record {
        Record::RunStarted { run, .. } if !is_valid_id(run) => bad("run", run),
        Record::RunStarted {
            forked_from: Some(from),
            ..
        } if !is_valid_id(&from.run) || !is_valid_id(&from.agent) => bad("run", &from.run),
        Record::AgentQueued(intro) => match &intro.parent {
            Some(parent) if !is_valid_id(parent) => bad("agent", parent),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Every dollar figure `record` holds is finite and not negative.
fn figures(record: &Record) -> Result<(), String> {
    let limits = |limits: &Option<RecordedLimits>| limits.and_then(|l| l.budget_usd);
    let (name, value) = match record {
        Record::ModelResponse { cost_usd, .. }
        | Record::AgentFinished { cost_usd, .. }
        | Record::RunFinished { cost_usd, .. } => ("cost_usd", Some(*cost_usd)),
        Record::AgentSpec { max_cost_usd, .. } => ("max_cost_usd", *max_cost_usd),
        Record::RunStarted { limits: l, .. } | Record::RunResumed { limits: l, .. } => {
            ("budget_usd", limits(l))
        }
        _ => return Ok(()),
    };
    match value {
        Some(value) if !(value.is_finite() && value >= 0.0) => Err(format!(
            "a recorded {name} of {value} is not a figure warren records (negative or not finite)"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::AgentIntro;

    fn queued(agent: &str, parent: Option<&str>) -> Record {
        Record::AgentQueued(AgentIntro {
            agent: agent.into(),
            parent: parent.map(Into::into),
            profile: "p".into(),
            task: "t".into(),
            label: None,
            mode: None,
        })
    }

    #[test]
    fn a_tree_with_an_unknown_self_or_cyclic_parent_or_too_deep_is_refused() {
        let mut tree = TreeCheck::default();
        tree.check(&queued("a", None)).unwrap();
        tree.check(&queued("b", Some("a"))).unwrap();
        tree.check(&queued("b", Some("a"))).unwrap();
        assert!(tree
            .check(&queued("c", Some("c")))
            .unwrap_err()
            .contains("its own parent"));
        assert!(tree
            .check(&queued("d", Some("x")))
            .unwrap_err()
            .contains("not queued before"));
        assert!(tree
            .check(&queued("a", Some("b")))
            .unwrap_err()
            .contains("again"));
        let mut chain = TreeCheck::default();
        chain.check(&queued("n0", None)).unwrap();
        for n in 1..=MAX_TREE_DEPTH {
            chain
                .check(&queued(&format!("n{n}"), Some(&format!("n{}", n - 1))))
                .unwrap();
        }
        let deep = format!("n{}", MAX_TREE_DEPTH + 1);
        let error = chain
            .check(&queued(&deep, Some(&format!("n{MAX_TREE_DEPTH}"))))
            .unwrap_err();
        assert!(error.contains("deeper"), "{error}");
    }

    #[test]
    fn ids_and_figures_are_held_to_their_rules() {
        assert!(is_valid_id("r1") && !is_valid_id("../../elsewhere/r1") && !is_valid_id(""));
        let finished = |cost_usd: f64| Record::RunFinished {
            state: crate::outcome::AgentState::Ok,
            cost_usd,
        };
        assert!(figures(&finished(0.5)).is_ok());
        for bad in [-1000.0, f64::NAN, f64::INFINITY] {
            assert!(figures(&finished(bad)).is_err(), "{bad}");
        }
        assert!(ids(&Record::AgentStarted {
            agent: "a/b".into()
        })
        .is_err());
    }
}
