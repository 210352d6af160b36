//! `warren agents`: every profile with its source, model and the tools it actually
//! gets from the loaded plugins, what the user should know about its definition, and
//! the agent files that were skipped.

use std::path::Path;

use serde_json::json;

use crate::config::{AgentFilesReport, Config, Profile, ProfileSource, SPAWN_TOOLS};
use crate::plugin::ToolRegistry;
use crate::term::outln;

/// Prints the report (text or JSON) to stdout.
pub(crate) fn print(config: &Config, registry: &ToolRegistry, as_json: bool) -> anyhow::Result<()> {
    let base = config.path.parent().unwrap_or(Path::new(""));
    let profiles: Vec<Profile> = config.all_profiles();
    let shown = |path: &Path| {
        path.strip_prefix(base)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    let rows: Vec<Row<'_>> = profiles
        .iter()
        .map(|profile| row(config, registry, profile, &shown))
        .collect();
    if as_json {
        print_json(&rows, &config.agent_files, &shown)
    } else {
        print_text(&rows, &config.agent_files, &shown)
    }
}

/// How `profile` is shown: its source (through `shown`), the tools it gets from
/// `registry`, and the allow patterns that match no loaded tool.
fn row<'a>(
    config: &Config,
    registry: &ToolRegistry,
    profile: &'a Profile,
    shown: &dyn Fn(&Path) -> String,
) -> Row<'a> {
    let mut tools: Vec<String> = registry
        .tools_for(profile)
        .map(|(spec, _)| spec.name.clone())
        .collect();
    if profile.tools.allows_spawn() && config.run_limits.max_depth > 0 {
        tools.extend(SPAWN_TOOLS.iter().map(|t| t.to_string()));
    }
    let (source, written_name) = match &profile.source {
        ProfileSource::Config => (shown(&config.path), None),
        ProfileSource::AgentFile { path, written_name } => (shown(path), written_name.clone()),
    };
    // Allow patterns that match no loaded tool: a plugin missing, or a name from
    // another system that means nothing here.
    let unmatched = profile
        .tools
        .patterns()
        .iter()
        .filter(|p| {
            !registry
                .tool_names()
                .any(|t| crate::config::tool_pattern_matches(p, t))
        })
        .cloned()
        .collect();
    Row {
        profile,
        source,
        written_name,
        tools,
        unmatched,
    }
}

/// The report as JSON: `{profiles, skipped, not_agent_files}`.
fn print_json(
    rows: &[Row<'_>],
    files: &AgentFilesReport,
    shown: &dyn Fn(&Path) -> String,
) -> anyhow::Result<()> {
    let report = json!({
        "profiles": rows.iter().map(|row| json!({
            "name": row.profile.name,
            "written_name": row.written_name,
            "source": row.source,
            "description": row.profile.description,
            "model": row.profile.model,
            "inherit_model": row.profile.inherit_model,
            "tools": row.tools,
            "unmatched": row.unmatched,
            "selection": {"allow": row.profile.tools.patterns(), "deny": row.profile.tools.denied()},
            "max_turns": row.profile.limits.max_turns,
            "notes": row.profile.notes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "remote": row.profile.remote.as_ref().map(|remote| json!({
                "a2a": remote.card_url, "unsandboxed": true,
            })),
        })).collect::<Vec<_>>(),
        "skipped": files.skipped.iter().map(|s| json!({
            "file": shown(&s.path), "line": s.line, "reason": s.reason,
        })).collect::<Vec<_>>(),
        "not_agent_files": files.not_agent_files.iter().map(|p| shown(p)).collect::<Vec<_>>(),
    });
    outln!("{}", serde_json::to_string_pretty(&report)?)?;
    Ok(())
}

/// The report as text: a block per profile, then the skipped files.
fn print_text(
    rows: &[Row<'_>],
    files: &AgentFilesReport,
    shown: &dyn Fn(&Path) -> String,
) -> anyhow::Result<()> {
    for row in rows {
        let name = match &row.written_name {
            Some(written) if written.is_empty() => {
                format!("{} (no `name`: from the file name)", row.profile.name)
            }
            Some(written) => format!("{} (written `{written}`)", row.profile.name),
            None => row.profile.name.clone(),
        };
        let model = match (&row.profile.model, row.profile.inherit_model) {
            (_, true) => "inherit".to_string(),
            (Some(model), false) => model.clone(),
            (None, false) => "none".to_string(),
        };
        outln!("{name}")?;
        outln!("  source: {}", row.source)?;
        if let Some(remote) = &row.profile.remote {
            outln!(
                "  remote: A2A agent, card {} — UNSANDBOXED: its tools, files and network are its own, no capability of warren's applies; timeout_s {} s",
                remote.card_url,
                row.profile.limits.timeout_s
            )?;
            continue;
        }
        outln!(
            "  model:  {model}   max_turns: {}",
            row.profile.limits.max_turns
        )?;
        let tools = if row.tools.is_empty() {
            "none".to_string()
        } else {
            row.tools.join(", ")
        };
        outln!("  tools:  {tools}")?;
        if !row.unmatched.is_empty() {
            outln!(
                "  note:   names that match no loaded tool: {}",
                row.unmatched.join(", ")
            )?;
        }
        for note in &row.profile.notes {
            outln!("  note:   {note}")?;
        }
    }
    if !files.skipped.is_empty() {
        outln!("\nskipped {} agent file(s):", files.skipped.len())?;
        for skipped in &files.skipped {
            outln!(
                "  {}:{}: {}",
                shown(&skipped.path),
                skipped.line,
                skipped.reason
            )?;
        }
    }
    if !files.not_agent_files.is_empty() {
        let names: Vec<String> = files.not_agent_files.iter().map(|p| shown(p)).collect();
        outln!("\nnot agent files (no front matter): {}", names.join(", "))?;
    }
    Ok(())
}

/// One profile as shown.
struct Row<'a> {
    profile: &'a Profile,
    source: String,
    written_name: Option<String>,
    tools: Vec<String>,
    unmatched: Vec<String>,
}
