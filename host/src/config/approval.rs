//! A profile's approval rule: which of its agents' calls wait for a person's yes
//! (`approval = ["write_file", "@network"]`), and how long a request waits before it
//! is denied (`approval_timeout_s`). The one place a call is matched against a rule
//! and the one place two rules are joined (a child's is its own and every ancestor's:
//! never looser than its parent's).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::tool_selection::{glob_match, NAMED_ONLY, SPAWN_TOOLS};
use crate::policy::{CapabilitySet, FsMode};

/// `approval_timeout_s` when a profile sets none: five minutes.
pub(crate) const DEFAULT_APPROVAL_TIMEOUT_S: u64 = 300;

/// What a call can do, as an approval rule names it (`@writes`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Effect {
    /// Every call (`*`).
    All,
    /// A plugin call under capabilities with a writable directory grant (`@writes`).
    Writes,
    /// A plugin call under capabilities that reach the network (`@network`).
    Network,
    /// `spawn_agent` (`@spawn`).
    Spawn,
    /// `run_python` and `run_js` (`@code`).
    Code,
}

impl Effect {
    /// As written in a rule.
    fn written(self) -> &'static str {
        match self {
            Effect::All => "*",
            Effect::Writes => "@writes",
            Effect::Network => "@network",
            Effect::Spawn => "@spawn",
            Effect::Code => "@code",
        }
    }
}

/// One entry of a rule: a tool name or `*` pattern, or an effect.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Entry {
    /// Calls of the tools this pattern matches.
    Tool(String),
    /// Calls that can do this.
    Effect(Effect),
}

impl FromStr for Entry {
    type Err = String;
    fn from_str(text: &str) -> Result<Entry, String> {
        let text = text.trim();
        Ok(match text {
            "*" => Entry::Effect(Effect::All),
            "@writes" => Entry::Effect(Effect::Writes),
            "@network" => Entry::Effect(Effect::Network),
            "@spawn" => Entry::Effect(Effect::Spawn),
            "@code" => Entry::Effect(Effect::Code),
            effect if effect.starts_with('@') => {
                return Err(format!(
                    "`{effect}` is not an effect: use @writes, @network, @spawn or @code (or a tool name, or \"*\" for every call)"
                ))
            }
            tool if super::names::is_valid_pattern(tool) => Entry::Tool(tool.to_string()),
            other => {
                return Err(format!(
                    "`{other}` is neither a tool name (letters, digits, `_`, `-`, `*`) nor an effect (@writes, @network, @spawn, @code)"
                ))
            }
        })
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Tool(tool) => f.write_str(tool),
            Entry::Effect(effect) => f.write_str(effect.written()),
        }
    }
}

/// Which calls wait for a person's yes. Empty: none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ApprovalRule {
    entries: BTreeSet<Entry>,
}

impl ApprovalRule {
    /// A rule of these entries.
    pub(crate) fn of(entries: impl IntoIterator<Item = Entry>) -> ApprovalRule {
        ApprovalRule {
            entries: entries.into_iter().collect(),
        }
    }

    /// A rule read from its written entries; `Err` names the first that is neither a
    /// tool nor an effect.
    pub(crate) fn parse<S: AsRef<str>>(written: &[S]) -> Result<ApprovalRule, String> {
        let entries = written
            .iter()
            .map(|entry| entry.as_ref().parse())
            .collect::<Result<_, _>>()?;
        Ok(ApprovalRule { entries })
    }

    /// This rule and `other` together: a call either names needs approval. How a
    /// child's rule takes its parent's.
    pub(crate) fn joined(&self, other: &ApprovalRule) -> ApprovalRule {
        ApprovalRule {
            entries: self.entries.union(&other.entries).cloned().collect(),
        }
    }

    /// The entries as written, in order.
    pub(crate) fn written(&self) -> Vec<String> {
        self.entries.iter().map(Entry::to_string).collect()
    }

    /// Why a call of `tool` under `capabilities` needs a person's yes (the entries
    /// that match it, as written), or `None` when it does not.
    pub(crate) fn matches(&self, tool: &str, capabilities: &CapabilitySet) -> Option<Vec<String>> {
        let host_tool = SPAWN_TOOLS.contains(&tool) || tool == super::tool_selection::ASK_TOOL;
        let matched: Vec<String> = self
            .entries
            .iter()
            .filter(|entry| match entry {
                Entry::Tool(pattern) => glob_match(pattern, tool),
                Entry::Effect(Effect::All) => tool != super::tool_selection::ASK_TOOL,
                Entry::Effect(Effect::Spawn) => tool == "spawn_agent",
                Entry::Effect(Effect::Code) => NAMED_ONLY.contains(&tool),
                Entry::Effect(Effect::Writes) => !host_tool && writes(capabilities),
                Entry::Effect(Effect::Network) => {
                    !host_tool && !capabilities.net.patterns().is_empty()
                }
            })
            .map(Entry::to_string)
            .collect();
        (!matched.is_empty()).then_some(matched)
    }
}

/// Whether `capabilities` grant a writable directory.
fn writes(capabilities: &CapabilitySet) -> bool {
    capabilities
        .fs
        .iter()
        .any(|grant| grant.mode == FsMode::ReadWrite)
}

/// What a call of `tool` under `capabilities` could touch, one phrase each, for the
/// person asked to approve it.
pub(crate) fn touches(tool: &str, capabilities: &CapabilitySet) -> Vec<String> {
    if SPAWN_TOOLS.contains(&tool) {
        return vec![match tool {
            "spawn_agent" => "starts a sub-agent (under this agent's capabilities at most)".into(),
            other => format!("{other}: acts on this agent's sub-agents"),
        }];
    }
    let mut touched: Vec<String> = capabilities
        .fs
        .iter()
        .map(|grant| {
            let mode = match grant.mode {
                FsMode::ReadWrite => "read and write",
                FsMode::ReadOnly => "read",
            };
            format!("{mode} {} ({})", grant.guest, grant.host.display())
        })
        .collect();
    if capabilities.scratch {
        touched.push("its scratch directory".into());
    }
    let hosts = capabilities.net.patterns();
    if !hosts.is_empty() {
        let hosts: Vec<String> = hosts.iter().map(ToString::to_string).collect();
        touched.push(format!("the network: {}", hosts.join(", ")));
    }
    if touched.is_empty() {
        touched.push("nothing outside its sandbox: no directory, no network".into());
    }
    touched
}

/// Who answers a run's requests when no person is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum AnswerPolicy {
    /// Wait for a person, through any route, until the request's deadline.
    Ask,
    /// Deny at once, telling the model nobody was there to approve (the default
    /// for a run nobody watches: a worker's, a library's, a non-interactive one).
    #[default]
    Deny,
    /// Approve every request at once (journaled as the policy's).
    Approve,
}

impl AnswerPolicy {
    /// The policy `--approve` names.
    pub(crate) fn parse(text: &str) -> Result<AnswerPolicy, String> {
        match text.trim() {
            "ask" => Ok(AnswerPolicy::Ask),
            "deny" => Ok(AnswerPolicy::Deny),
            "all" | "approve" => Ok(AnswerPolicy::Approve),
            other => Err(format!(
                "the policy must be \"ask\", \"deny\" or \"all\", not \"{other}\""
            )),
        }
    }
}

/// A profile's approvals: the rule and the deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Approval {
    /// Which calls wait for a person.
    pub(crate) rule: ApprovalRule,
    /// How long one waits before it is denied.
    pub(crate) timeout_s: u64,
}

impl Default for Approval {
    fn default() -> Self {
        Approval {
            rule: ApprovalRule::default(),
            timeout_s: DEFAULT_APPROVAL_TIMEOUT_S,
        }
    }
}

/// The rule an agent file's `permissionMode` stands for (`None`: a mode warren gives
/// no meaning). `plan` also makes the file read-only (see `agent_dir`); none widens a
/// capability.
pub(crate) fn permission_mode(mode: &str) -> Option<ApprovalRule> {
    let effects: &[Effect] = match mode {
        "default" => &[Effect::Writes, Effect::Network],
        "acceptEdits" => &[Effect::Network],
        "plan" => &[Effect::Writes, Effect::Network, Effect::Code, Effect::Spawn],
        // The sandbox and the file's `tools` are what it may do; nothing is asked.
        "bypassPermissions" | "dontAsk" => &[],
        _ => return None,
    };
    Some(ApprovalRule::of(effects.iter().copied().map(Entry::Effect)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::FsGrant;

    fn caps(mode: Option<FsMode>) -> CapabilitySet {
        let mut caps = CapabilitySet::default();
        if let Some(mode) = mode {
            caps.fs.push(FsGrant {
                host: "/tmp/d".into(),
                guest: "/d".into(),
                mode,
            });
        }
        caps
    }

    #[test]
    fn entries_match_tools_and_effects_and_say_which() {
        let rule = ApprovalRule::parse(&["write_file", "@writes", "files_*"]).unwrap();
        let rw = caps(Some(FsMode::ReadWrite));
        let ro = caps(Some(FsMode::ReadOnly));
        assert_eq!(
            rule.matches("write_file", &rw),
            Some(vec!["write_file".into(), "@writes".into()])
        );
        assert_eq!(
            rule.matches("write_file", &ro),
            Some(vec!["write_file".into()])
        );
        assert_eq!(rule.matches("read_file", &ro), None);
        assert_eq!(rule.matches("read_file", &rw), Some(vec!["@writes".into()]));
        assert_eq!(rule.matches("files_ls", &ro), Some(vec!["files_*".into()]));
        // A spawn tool writes nothing itself.
        assert_eq!(rule.matches("spawn_agent", &rw), None);
        let code = ApprovalRule::parse(&["@code", "@spawn"]).unwrap();
        assert!(code.matches("run_python", &ro).is_some());
        assert!(code.matches("spawn_agent", &ro).is_some());
        assert!(code.matches("await_agents", &ro).is_none());
    }

    #[test]
    fn a_joined_rule_asks_for_what_either_asks() {
        let parent = ApprovalRule::parse(&["write_file"]).unwrap();
        let child = ApprovalRule::parse(&["@network"]).unwrap();
        let joined = child.joined(&parent);
        assert_eq!(joined.written(), ["write_file", "@network"]);
        assert!(joined.matches("write_file", &caps(None)).is_some());
    }

    #[test]
    fn a_bad_entry_is_refused_naming_it() {
        let error = ApprovalRule::parse(&["@write"]).unwrap_err();
        assert!(error.contains("`@write` is not an effect"), "{error}");
        let error = ApprovalRule::parse(&["a b"]).unwrap_err();
        assert!(error.contains("`a b`"), "{error}");
    }

    #[test]
    fn permission_modes_map_to_rules_and_none_widens() {
        assert!(permission_mode("bypassPermissions")
            .unwrap()
            .written()
            .is_empty());
        assert_eq!(
            permission_mode("default").unwrap().written(),
            ["@writes", "@network"]
        );
        assert!(permission_mode("plan")
            .unwrap()
            .matches("run_js", &caps(None))
            .is_some());
        assert_eq!(permission_mode("yolo"), None);
    }
}
