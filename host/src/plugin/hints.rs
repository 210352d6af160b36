//! What a tool does, for MCP clients' tool annotations: each tool's hints by its
//! nature (the built-in tools' here, a plugin tool's from `[plugins.NAME] annotate`),
//! and what they are in effect under a profile. A tool whose profile can neither write
//! a granted directory nor reach the network is read-only in effect, whatever it could
//! do elsewhere, and reaches no open world.

use crate::config::ToolHints;
use crate::policy::CapabilitySet;

/// The built-in tools by nature: plugin, tool, title, read-only, destructive,
/// idempotent, open world.
const BUILTIN: [(&str, &str, &str, bool, bool, bool, bool); 9] = [
    (
        "files",
        "read_file",
        "Read a file",
        true,
        false,
        true,
        false,
    ),
    (
        "files",
        "list_dir",
        "List a directory",
        true,
        false,
        true,
        false,
    ),
    (
        "files",
        "search_text",
        "Search text",
        true,
        false,
        true,
        false,
    ),
    (
        "files",
        "glob",
        "Find files by pattern",
        true,
        false,
        true,
        false,
    ),
    ("files", "grep", "Search files", true, false, true, false),
    (
        "files",
        "write_file",
        "Write a file",
        false,
        true,
        true,
        false,
    ),
    (
        "files",
        "edit_file",
        "Edit a file",
        false,
        true,
        false,
        false,
    ),
    ("http", "http_get", "HTTP GET", true, false, true, true),
    ("http", "fetch", "Fetch a web page", true, false, true, true),
];

/// The hints of tool `own` (its name as the plugin offers it) of plugin `plugin`
/// by its nature: a built-in tool's from [`BUILTIN`], with `set` (its
/// `[plugins.NAME] annotate` entry) over them.
pub(crate) fn declared(
    plugin: &str,
    builtin: bool,
    own: &str,
    set: Option<&ToolHints>,
) -> ToolHints {
    let mut hints = BUILTIN
        .iter()
        .find(|entry| builtin && entry.0 == plugin && entry.1 == own)
        .map(
            |&(_, _, title, read_only, destructive, idempotent, open_world)| ToolHints {
                title: Some(title.to_string()),
                read_only: Some(read_only),
                destructive: Some(destructive),
                idempotent: Some(idempotent),
                open_world: Some(open_world),
            },
        )
        .unwrap_or_default();
    if let Some(set) = set {
        let ToolHints {
            title,
            read_only,
            destructive,
            idempotent,
            open_world,
        } = set.clone();
        hints.title = title.or(hints.title);
        hints.read_only = read_only.or(hints.read_only);
        hints.destructive = destructive.or(hints.destructive);
        hints.idempotent = idempotent.or(hints.idempotent);
        hints.open_world = open_world.or(hints.open_world);
    }
    hints
}

/// Every hint of tool `name` (offered as such), declared `declared`, in effect under
/// `capabilities`. Unset hints take MCP's defaults: not read-only, destructive, not
/// idempotent, open world.
pub(crate) fn effective(
    name: &str,
    declared: &ToolHints,
    capabilities: &CapabilitySet,
) -> ToolHints {
    // No writable grant and no network: nothing outside the call can change.
    let contained = capabilities.replay_safe();
    let reaches = !capabilities.net.patterns().is_empty();
    let read_only = contained || declared.read_only.unwrap_or(false);
    ToolHints {
        title: Some(declared.title.clone().unwrap_or_else(|| title_of(name))),
        read_only: Some(read_only),
        destructive: Some(!read_only && declared.destructive.unwrap_or(true)),
        idempotent: Some(read_only || declared.idempotent.unwrap_or(false)),
        open_world: Some(reaches && declared.open_world.unwrap_or(true)),
    }
}

/// The hints of spawn tool `name` for a caller with `capabilities` (`None`: not a
/// spawn tool). Spawning starts agents on models (the open world) that may write
/// what the caller may, since a child never has more than its parent.
pub(crate) fn spawn_tool(name: &str, capabilities: &CapabilitySet) -> Option<ToolHints> {
    let contained = capabilities.replay_safe();
    let (title, read_only, destructive, idempotent, open_world) = match name {
        "spawn_agent" => ("Spawn a sub-agent", false, !contained, false, true),
        "await_agents" => ("Await sub-agents", true, false, true, false),
        "list_agents" => ("List sub-agents", true, false, true, false),
        "cancel_agent" => ("Cancel a sub-agent", false, true, true, false),
        "message_agent" => ("Message a sub-agent", false, false, false, false),
        _ => return None,
    };
    Some(ToolHints {
        title: Some(title.to_string()),
        read_only: Some(read_only),
        destructive: Some(destructive),
        idempotent: Some(idempotent),
        open_world: Some(open_world),
    })
}

/// `read_file` → `Read file`.
fn title_of(name: &str) -> String {
    let words = name.replace(['_', '-'], " ");
    let mut chars = words.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_tool_is_read_only_in_effect_without_writable_grants_or_network() {
        let contained = CapabilitySet::default();
        let write = declared("files", true, "write_file", None);
        let hints = effective("write_file", &write, &contained);
        assert_eq!(hints.read_only, Some(true));
        assert_eq!(hints.destructive, Some(false));
        assert_eq!(hints.open_world, Some(false));
        // An unknown plugin's tool: MCP's defaults, unless the table says otherwise.
        let unknown = declared("mine", false, "frob_widget", None);
        assert_eq!(unknown, ToolHints::default());
        let hints = effective("frob_widget", &unknown, &contained);
        assert_eq!(hints.title.as_deref(), Some("Frob widget"));
        let set = ToolHints {
            title: Some("Frob".into()),
            ..ToolHints::default()
        };
        let renamed = declared("files", true, "read_file", Some(&set));
        assert_eq!(renamed.title.as_deref(), Some("Frob"));
        assert_eq!(renamed.read_only, Some(true));
        // A built-in's name in another plugin is not the built-in.
        assert_eq!(
            declared("mine", false, "read_file", None),
            ToolHints::default()
        );
        assert!(spawn_tool("read_file", &contained).is_none());
    }
}
