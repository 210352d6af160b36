//! Loading a folder of agent files (`agents/` and `.claude/agents/` beside the config,
//! subfolders included) as profiles.
//!
//! One bad file never blocks the rest: it is skipped with a warning naming `file:line`
//! and the reason, and listed in the [`AgentFilesReport`] (`warren agents` shows it,
//! `warren agents --check` fails on it). Files without front matter (a collection's
//! README) are not agent files and are only listed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::agent_files::{self, AgentFile, ParseError};
use super::approval::{permission_mode, Approval};
use super::defaults::{Inherited, Written};
use super::names::profile_name_from;
use super::profile::{cut_description, Profile, ProfileNote, ProfileSource, INHERIT_MODEL};
use super::text_file::read_text;
use super::tool_selection::{resolve, ListKind, ToolSelection, WRITE_TOOLS};
use crate::policy::FsMode;

/// Folders searched for agent files, relative to the config file.
const AGENT_DIRS: [&str; 2] = ["agents", ".claude/agents"];

/// At most this many files are read from the agent folders, at most
/// [`MAX_AGENT_DIR_ENTRIES`] entries are looked at, and files over
/// [`MAX_AGENT_FILE_BYTES`] are skipped: a folder cannot make loading unbounded.
/// Directory symlinks inside the folders are not followed (two links to `.` made
/// loading run forever); a symlinked `.md` file is read wherever it points, since only
/// a file with agent front matter becomes a profile.
const MAX_FILES: usize = 2_000;
/// Most directory entries (of any kind) looked at in the agent folders.
pub(crate) const MAX_AGENT_DIR_ENTRIES: usize = 20_000;
/// Most bytes of one agent file.
pub(crate) const MAX_AGENT_FILE_BYTES: usize = 1024 * 1024;

/// What happened to the files in the agent folders that did not become profiles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentFilesReport {
    /// Agent files that could not be used, with the reason.
    pub skipped: Vec<SkippedFile>,
    /// Markdown files without front matter (not agent files).
    pub not_agent_files: Vec<PathBuf>,
}

/// An agent file that was skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedFile {
    /// The file.
    pub path: PathBuf,
    /// 1-based line the reason is about.
    pub line: usize,
    /// Why.
    pub reason: String,
}

/// Adds a profile per usable agent file under `base` to `profiles` (which holds the
/// config's own; those win over files of the same name).
pub(super) fn load(
    base: &Path,
    config_path: &Path,
    profiles: &mut BTreeMap<String, Profile>,
    defaults: &Inherited<'_>,
) -> AgentFilesReport {
    let mut report = AgentFilesReport::default();
    let mut files = Vec::new();
    let mut entries = 0;
    for dir in AGENT_DIRS {
        collect(&base.join(dir), &mut files, &mut entries, &mut report);
    }
    let mut from_files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for path in files {
        let mut skip = |line: usize, reason: String| {
            tracing::warn!("skipping agent file {}:{line}: {reason}", path.display());
            report.skipped.push(SkippedFile {
                path: path.clone(),
                line,
                reason,
            });
        };
        let text = match read(&path) {
            Ok(text) => text,
            Err(reason) => {
                skip(1, reason);
                continue;
            }
        };
        let file = match agent_files::parse(&text) {
            Ok(file) => file,
            Err(ParseError::NoFrontMatter) => {
                report.not_agent_files.push(path.clone());
                continue;
            }
            Err(ParseError::Invalid(line, reason)) => {
                skip(line, reason);
                continue;
            }
        };
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(name) = profile_name_from(file.name.as_deref().unwrap_or(&stem))
            .or_else(|| profile_name_from(&stem))
        else {
            skip(
                1,
                "no `name`, and the file name makes no profile name".into(),
            );
            continue;
        };
        if profiles.contains_key(&name) {
            let other = from_files.get(&name).map_or_else(
                || config_path.display().to_string(),
                |p| p.display().to_string(),
            );
            skip(1, format!("profile `{name}` is already defined by {other}"));
            continue;
        }
        let written_name = match &file.name {
            Some(written) if *written == name => None,
            Some(written) => Some(written.clone()),
            None => Some(String::new()),
        };
        let profile = profile(name.clone(), path.clone(), written_name, file, defaults);
        from_files.insert(name.clone(), path.clone());
        profiles.insert(name, profile);
    }
    report
}

/// Every `*.md` under `dir`, recursively, in path order, without following directory
/// symlinks below `dir`; `entries` counts the entries looked at.
fn collect(
    dir: &Path,
    files: &mut Vec<PathBuf>,
    entries: &mut usize,
    report: &mut AgentFilesReport,
) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let mut found = Vec::new();
    for entry in listing.filter_map(Result::ok) {
        *entries += 1;
        if *entries > MAX_AGENT_DIR_ENTRIES {
            report.skipped.push(SkippedFile {
                path: dir.to_path_buf(),
                line: 1,
                reason: format!(
                    "more than {MAX_AGENT_DIR_ENTRIES} entries in the agent folders; the rest are not read"
                ),
            });
            return;
        }
        let is_real_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        found.push((entry.path(), is_real_dir));
    }
    found.sort();
    for (path, is_real_dir) in found {
        if files.len() >= MAX_FILES {
            report.skipped.push(SkippedFile {
                path,
                line: 1,
                reason: format!("more than {MAX_FILES} agent files; the rest are not read"),
            });
            return;
        }
        if is_real_dir {
            collect(&path, files, entries, report);
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("md"))
        {
            files.push(path);
        }
    }
}

fn read(path: &Path) -> Result<String, String> {
    read_text(path, MAX_AGENT_FILE_BYTES, None)
}

fn profile(
    name: String,
    path: PathBuf,
    written_name: Option<String>,
    file: AgentFile,
    defaults: &Inherited<'_>,
) -> Profile {
    let mut notes = Vec::new();
    if let Some(why) = file.lenient {
        notes.push(ProfileNote::Lenient(why));
    }
    let (allow, spawn) = match &file.tools {
        // Claude Code semantics: `tools` is the whole list; the spawn tools only when it
        // names `Task` or `Agent`.
        Some(names) => {
            let resolved = resolve(names, &defaults.tool_aliases, ListKind::Allow);
            if !resolved.unavailable.is_empty() {
                notes.push(ProfileNote::UnavailableTools(resolved.unavailable));
            }
            (resolved.patterns, resolved.spawn)
        }
        None => (vec!["*".to_string()], true),
    };
    let deny = resolve(
        &file.disallowed_tools,
        &defaults.tool_aliases,
        ListKind::Deny,
    )
    .patterns;
    let mut tools = ToolSelection::new(allow, deny, spawn);
    let mut capabilities = defaults.capabilities.clone();
    let mut approval = Approval::default();
    if let Some(rule) = file.permission_mode.as_deref().and_then(permission_mode) {
        approval.rule = rule;
    }
    if file.permission_mode.as_deref() == Some("plan") {
        for grant in &mut capabilities.fs {
            grant.mode = FsMode::ReadOnly;
        }
        tools = tools.denying(&WRITE_TOOLS);
        notes.push(ProfileNote::PlanMode);
    } else if let Some(mode) = file
        .permission_mode
        .as_ref()
        .filter(|mode| permission_mode(mode).is_none())
    {
        notes.push(ProfileNote::IgnoredKeys(vec![format!(
            "permissionMode: {mode}"
        )]));
    }
    let (model, inherit_model) = chosen_model(file.model.as_deref(), defaults, &mut notes);
    if !file.ignored_keys.is_empty() {
        notes.push(ProfileNote::IgnoredKeys(file.ignored_keys));
    }
    let description = file.description.map(|written| {
        let (description, cut) = cut_description(written);
        notes.extend(cut);
        description
    });
    defaults.profile(Written {
        name,
        description,
        tools,
        capabilities,
        prompt: file.prompt,
        model,
        inherit_model,
        max_turns: file.max_turns,
        max_turns_ceiling: None,
        timeout_s: None,
        max_cost_usd: None,
        output_schema: file.output_schema,
        approval,
        source: ProfileSource::AgentFile { path, written_name },
        notes,
    })
}

/// The model an agent file's `model` names, and whether it inherits its parent's: a
/// model or alias of the config, `inherit`, or (noted) one the config lacks.
fn chosen_model(
    written: Option<&str>,
    defaults: &Inherited<'_>,
    notes: &mut Vec<ProfileNote>,
) -> (Option<String>, bool) {
    match written {
        None => (None, false),
        Some(INHERIT_MODEL) => (None, true),
        Some(written) => match defaults
            .models
            .get_key_value(written)
            .map(|(k, _)| k.clone())
            .or_else(|| defaults.model_aliases.get(written).cloned())
        {
            Some(model) => (Some(model), false),
            None => {
                notes.push(ProfileNote::UnknownModel {
                    written: written.to_string(),
                    used: defaults.model.clone(),
                });
                (None, false)
            }
        },
    }
}
