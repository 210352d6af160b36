//! Which tools a profile may call, and the one table that turns the tool names of other
//! agent systems (Claude Code's `Read`, `Grep`, `Task`, …) into warren's.
//!
//! A profile's selection is an allow list (`tools`), a deny list subtracted after it
//! (`disallowedTools` / `disallowed_tools`), and whether the spawn tools are offered.
//! Names are resolved once, at load: an alias becomes the warren names it stands for,
//! a name with no sandboxed equivalent is reported (never silently dropped), and in a
//! deny list a name that cannot be expressed exactly (`Write(*.env)`) denies the whole
//! tool, so a restriction is never weakened.

use std::collections::BTreeMap;

use super::names::is_valid_pattern;

/// The spawn tools, offered by the host itself (never by a plugin).
pub(crate) const SPAWN_TOOLS: [&str; 5] = [
    "spawn_agent",
    "await_agents",
    "cancel_agent",
    "message_agent",
    "list_agents",
];

/// Claude Code tool names and the warren tools they map to. `Task` and `Agent` stand for
/// the spawn tools. Users extend or override this with `[tool_aliases]`.
const CLAUDE_CODE_TOOLS: &[(&str, &[&str])] = &[
    ("Read", &["read_file"]),
    ("Write", &["write_file"]),
    ("Edit", &["edit_file"]),
    ("MultiEdit", &["edit_file"]),
    ("Grep", &["grep"]),
    ("Glob", &["glob"]),
    ("LS", &["list_dir"]),
    ("WebFetch", &["fetch"]),
    ("AskUserQuestion", &[ASK_TOOL]),
    ("Task", &SPAWN_TOOLS),
    ("Agent", &SPAWN_TOOLS),
];

/// Claude Code tools with no sandboxed equivalent in warren: reported as unavailable.
const UNAVAILABLE: &[&str] = &[
    "Bash",
    "BashOutput",
    "KillBash",
    "KillShell",
    "WebSearch",
    "TodoWrite",
    "TodoRead",
    "NotebookEdit",
    "NotebookRead",
    "SlashCommand",
    "Skill",
    "ExitPlanMode",
    "EnterPlanMode",
    "TaskCreate",
    "TaskGet",
    "TaskUpdate",
    "TaskList",
    "TaskOutput",
    "TaskStop",
    "TeamCreate",
    "TeamDelete",
    "SendMessage",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
    "LSP",
];

/// Tools a profile gets only by naming them (`tools = ["run_python"]`), never through a
/// pattern: they run code the model writes.
pub(crate) const NAMED_ONLY: [&str; 2] = ["run_python", "run_js"];

/// The tool an agent asks a person a question with: offered, like the code tools, only
/// to a profile that names it.
pub(crate) const ASK_TOOL: &str = "ask_person";

/// Tools that change files: withheld from `permissionMode: plan` agents.
pub(crate) const WRITE_TOOLS: [&str; 2] = ["write_file", "edit_file"];

/// Which tools a profile may call: allow patterns, deny patterns subtracted after them,
/// and whether the spawn tools are offered (which `max_depth` may still withhold).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSelection {
    /// Patterns such as `read_file`, `files_*` or `*`.
    allow: Vec<String>,
    /// Patterns removed after `allow`: what the author forbade.
    deny: Vec<String>,
    /// Whether the spawn tools are offered (`Task`/`Agent` in an agent file's `tools`,
    /// and not denied).
    spawn: bool,
}

impl ToolSelection {
    /// Every tool, the spawn tools included.
    pub fn all() -> Self {
        ToolSelection {
            allow: vec!["*".into()],
            deny: Vec::new(),
            spawn: true,
        }
    }

    /// A selection from resolved parts.
    pub(crate) fn new(allow: Vec<String>, deny: Vec<String>, spawn: bool) -> Self {
        let spawn = spawn && !SPAWN_TOOLS.iter().any(|t| matches_any(&deny, t));
        ToolSelection { allow, deny, spawn }
    }

    /// This selection cut down to `names` (a spawn's `tools` subset): the deny list and
    /// the spawn setting stay.
    pub fn narrowed_to(&self, names: Vec<String>) -> Self {
        ToolSelection {
            allow: names,
            deny: self.deny.clone(),
            spawn: self.spawn,
        }
    }

    /// This selection with `more` denied as well.
    pub(crate) fn denying(mut self, more: &[&str]) -> Self {
        self.deny.extend(more.iter().map(|t| t.to_string()));
        self
    }

    /// The allow patterns as resolved.
    pub fn patterns(&self) -> &[String] {
        &self.allow
    }

    /// The deny patterns as resolved.
    pub fn denied(&self) -> &[String] {
        &self.deny
    }

    /// Whether `tool` (a plugin tool) is selected. The code-running tools only by
    /// their exact names: a pattern such as `*` never grants running code.
    pub fn allows(&self, tool: &str) -> bool {
        let allowed = if NAMED_ONLY.contains(&tool) || tool == ASK_TOOL {
            self.allow.iter().any(|name| name == tool)
        } else {
            matches_any(&self.allow, tool)
        };
        allowed && !matches_any(&self.deny, tool)
    }

    /// Whether the spawn tools may be offered.
    pub fn allows_spawn(&self) -> bool {
        self.spawn
    }

    /// `read_file, grep` or `*`, with `(not write_file)` when something is denied.
    pub fn describe(&self) -> String {
        let mut text = if self.allow.is_empty() {
            "none".to_string()
        } else {
            self.allow.join(", ")
        };
        if !self.deny.is_empty() {
            text.push_str(&format!(" (not {})", self.deny.join(", ")));
        }
        text
    }
}

fn matches_any(patterns: &[String], tool: &str) -> bool {
    patterns.iter().any(|p| glob_match(p, tool))
}

/// `*` matches any run of characters; everything else matches itself.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((prefix, rest)) => {
            let Some(tail) = text.strip_prefix(prefix) else {
                return false;
            };
            (0..=tail.len())
                .filter(|i| tail.is_char_boundary(*i))
                .any(|i| glob_match(rest, &tail[i..]))
        }
    }
}

/// `[tool_aliases]`: more names (or other meanings for the built-in ones), each to one
/// or more warren tool names or patterns.
pub(crate) type ToolAliases = BTreeMap<String, Vec<String>>;

/// Names resolved to warren tool patterns.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ResolvedNames {
    /// Warren tool names and patterns (plugin tools; spawn tools excluded).
    pub(crate) patterns: Vec<String>,
    /// Whether a name stood for the spawn tools (`Task`, `Agent`, `spawn_agent`, `*`).
    pub(crate) spawn: bool,
    /// Names with no sandboxed equivalent, as written.
    pub(crate) unavailable: Vec<String>,
}

/// Which way a list of names restricts: an allow list drops what it cannot express, a
/// deny list widens it to the whole tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// `tools`.
    Allow,
    /// `disallowedTools`.
    Deny,
}

/// Resolves `names` through `aliases` (the user's), then the Claude Code table, then as
/// warren names. Matching of alias names ignores case (`read` is `Read`).
pub(crate) fn resolve(names: &[String], aliases: &ToolAliases, kind: ListKind) -> ResolvedNames {
    let mut out = ResolvedNames::default();
    let push = |out: &mut ResolvedNames, tool: &str| {
        if SPAWN_TOOLS.contains(&tool)
            || (tool.contains('*') && SPAWN_TOOLS.iter().any(|t| glob_match(tool, t)))
        {
            out.spawn = true;
        }
        // An allow list offers the spawn tools through `spawn`; a deny list keeps them
        // as patterns so that `ToolSelection::new` withholds them.
        let listed = kind == ListKind::Deny || !SPAWN_TOOLS.contains(&tool);
        if listed && !out.patterns.iter().any(|p| p == tool) {
            out.patterns.push(tool.to_string());
        }
    };
    for written in names {
        let name = written.trim();
        if name.is_empty() {
            continue;
        }
        // `Write(*.env)`: Claude Code's per-argument rule. warren cannot express the
        // argument part, so a deny list denies the whole tool and an allow list grants
        // nothing for it.
        let (base, qualified) = match name.split_once('(') {
            Some((base, rest)) if rest.ends_with(')') => (base.trim(), true),
            _ => (name, false),
        };
        let mapped = aliases
            .iter()
            .find(|(alias, _)| alias.eq_ignore_ascii_case(base))
            .map(|(_, tools)| tools.iter().map(String::as_str).collect::<Vec<_>>())
            .or_else(|| {
                CLAUDE_CODE_TOOLS
                    .iter()
                    .find(|(alias, _)| alias.eq_ignore_ascii_case(base))
                    .map(|(_, tools)| tools.to_vec())
            });
        if qualified && kind == ListKind::Allow {
            out.unavailable.push(written.clone());
            continue;
        }
        if let Some(tools) = mapped {
            for tool in tools {
                push(&mut out, tool);
            }
        } else if base.starts_with("mcp__")
            || UNAVAILABLE.iter().any(|u| u.eq_ignore_ascii_case(base))
            || !is_valid_pattern(base)
        {
            if kind == ListKind::Allow {
                out.unavailable.push(written.clone());
            }
        } else {
            push(&mut out, base);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("files_*", "files_read"));
        assert!(!glob_match("files_*", "http_get"));
        assert!(glob_match("*_get", "http_get"));
        assert!(glob_match("read_file", "read_file"));
        assert!(!glob_match("read_file", "read_files"));
    }

    #[test]
    fn claude_code_names_map_to_warren_tools() {
        let resolved = resolve(
            &names(&[
                "Read",
                "grep",
                "Glob",
                "LS",
                "MultiEdit",
                "Edit",
                "WebFetch",
                "Task",
                "Bash",
                "mcp__github__x",
                "Bash(git diff:*)",
                "csv_summary",
            ]),
            &ToolAliases::new(),
            ListKind::Allow,
        );
        assert_eq!(
            resolved.patterns,
            [
                "read_file",
                "grep",
                "glob",
                "list_dir",
                "edit_file",
                "fetch",
                "csv_summary"
            ]
        );
        assert!(resolved.spawn);
        assert_eq!(
            resolved.unavailable,
            ["Bash", "mcp__github__x", "Bash(git diff:*)"]
        );
    }

    #[test]
    fn deny_lists_widen_what_they_cannot_express() {
        let resolved = resolve(
            &names(&["Write(*.env)", "Edit", "Bash"]),
            &ToolAliases::new(),
            ListKind::Deny,
        );
        assert_eq!(resolved.patterns, ["write_file", "edit_file"]);
        assert!(resolved.unavailable.is_empty());
        let selection = ToolSelection::new(vec!["*".into()], resolved.patterns, true);
        assert!(selection.allows("read_file"));
        assert!(!selection.allows("write_file") && !selection.allows("edit_file"));
        assert!(selection.allows_spawn());
        let no_spawn = resolve(&names(&["Agent"]), &ToolAliases::new(), ListKind::Deny);
        assert!(!ToolSelection::new(vec!["*".into()], no_spawn.patterns, true).allows_spawn());
        let selection = ToolSelection::new(vec!["*".into()], vec!["spawn_*".into()], true);
        assert!(!selection.allows_spawn());
    }

    #[test]
    fn user_aliases_come_first() {
        let mut aliases = ToolAliases::new();
        aliases.insert("Bash".into(), vec!["run_checks".into()]);
        aliases.insert("Read".into(), vec!["read_file".into(), "list_dir".into()]);
        let resolved = resolve(&names(&["bash", "Read"]), &aliases, ListKind::Allow);
        assert_eq!(resolved.patterns, ["run_checks", "read_file", "list_dir"]);
        assert!(resolved.unavailable.is_empty());
    }
}
