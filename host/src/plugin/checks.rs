//! What a set of plugins must satisfy before any loads: every source found (the
//! built-ins asked for, then the files), every `[plugins.NAME]` table naming one of
//! them, each tool's name, description and schema within the plugin limits, and no
//! two plugins offering one tool name.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;

use crate::config::{PluginLimits, PluginTable};
use crate::sandbox::ToolSpec;

/// One plugin to load: an embedded built-in or a file's bytes.
pub(super) struct Source {
    /// The file name without `.wasm` (a built-in's own name).
    pub(super) name: String,
    /// Where it comes from (`(built-in)/NAME.wasm` for a built-in).
    pub(super) path: PathBuf,
    /// The component's bytes: borrowed from the binary for a built-in.
    pub(super) bytes: Cow<'static, [u8]>,
    /// Whether it is embedded in the binary.
    pub(super) builtin: bool,
}

/// The built-ins named in `builtins` (unless a file has their very bytes), then
/// `files` in order; an error when a table of `tables` names none of them.
pub(super) fn sources(
    files: &[PathBuf],
    builtins: &[String],
    tables: &BTreeMap<String, PluginTable>,
) -> anyhow::Result<Vec<Source>> {
    let mut sources = Vec::new();
    let mut file_bytes = Vec::new();
    for path in files {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        file_bytes.push((path.clone(), bytes));
    }
    for (name, bytes) in crate::builtin::BUILTINS {
        if builtins.iter().any(|b| b == name) && !file_bytes.iter().any(|(_, f)| f == bytes) {
            let path = PathBuf::from(format!("(built-in)/{name}.wasm"));
            sources.push(Source {
                name: name.to_string(),
                path,
                bytes: bytes.into(),
                builtin: true,
            });
        }
    }
    for (path, bytes) in file_bytes {
        let name = path.file_stem().map_or_else(
            || path.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        sources.push(Source {
            name,
            path,
            bytes: bytes.into(),
            builtin: false,
        });
    }
    if let Some(stray) = tables
        .keys()
        .find(|t| !sources.iter().any(|source| source.name == **t))
    {
        anyhow::bail!(
            "[plugins.{stray}]: no plugin `{stray}` is loaded (plugins are named by their file name without .wasm: {})",
            sources
                .iter()
                .map(|source| source.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(sources)
}

/// Checks one tool the plugin at `path` offers against `limits` and the host's
/// reserved names; its input schema, parsed.
pub(super) fn check_tool(
    path: &Path,
    spec: &ToolSpec,
    limits: &PluginLimits,
) -> anyhow::Result<Arc<serde_json::Value>> {
    // Each bounded text: what it is, its bytes, the bound and the key that sets it.
    let sizes = [
        (
            "description",
            spec.description.len(),
            limits.max_description_bytes,
            "max_description_kb",
        ),
        (
            "input schema",
            spec.input_schema.len(),
            limits.max_schema_bytes,
            "max_schema_kb",
        ),
    ];
    for (what, bytes, max, key) in sizes {
        anyhow::ensure!(
            bytes <= max,
            "{}: the {what} of `{}` has {bytes} bytes; at most {} KiB ([plugins] {key})",
            path.display(),
            spec.name,
            max / 1024
        );
    }
    if !crate::config::is_valid_name(&spec.name) {
        anyhow::bail!(
            "{}: tool name `{}` must match ^[a-zA-Z0-9_-]{{1,64}}$",
            path.display(),
            spec.name
        );
    }
    if crate::config::SPAWN_TOOLS.contains(&spec.name.as_str()) {
        anyhow::bail!(
            "{}: tool name `{}` is reserved for the host's spawn tools; a plugin may not offer it",
            path.display(),
            spec.name
        );
    }
    match serde_json::from_str::<serde_json::Value>(&spec.input_schema) {
        Ok(schema @ serde_json::Value::Object(_)) => Ok(Arc::new(schema)),
        Ok(_) => anyhow::bail!(
            "{}: input schema of `{}` is not a JSON object",
            path.display(),
            spec.name
        ),
        Err(e) => anyhow::bail!(
            "{}: input schema of `{}` is not valid JSON: {e}",
            path.display(),
            spec.name
        ),
    }
}

/// The plugin that already offers a tool name another one offers too.
pub(super) struct Holder<'a> {
    /// Its name.
    pub(super) name: &'a str,
    /// Its file.
    pub(super) path: &'a Path,
    /// Whether it is a built-in (then leaving it out is the other way out).
    pub(super) builtin: bool,
}

/// The error for tool `tool`, offered by `holder` and by plugin `plugin` at `path`
/// (as its own tool `own`): what each can do about it.
pub(super) fn clash(
    tool: &str,
    holder: &Holder<'_>,
    plugin: &str,
    path: &Path,
    own: &str,
) -> anyhow::Error {
    let hint = if holder.builtin {
        format!(
            "; to use this plugin's, leave the built-in out: [plugins] builtins = [{}] (or false)",
            crate::builtin::names()
                .filter(|n| *n != holder.name)
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    };
    anyhow::anyhow!(
        "tool `{tool}` is offered by both {} and {}; tool names must be unique across plugins: {}{hint}",
        holder.path.display(),
        path.display(),
        clash_remedy(plugin, own)
    )
}

/// How to take plugin `plugin`'s tool `tool` (as the plugin offers it) out of a clash:
/// its `[plugins.NAME]` table hides it or renames it.
fn clash_remedy(plugin: &str, tool: &str) -> String {
    let key = if crate::config::is_valid_name(plugin) {
        plugin.to_string()
    } else {
        format!("{plugin:?}")
    };
    let renamed = format!("{plugin}_{tool}");
    let renamed = if crate::config::is_valid_name(&renamed) {
        renamed
    } else {
        "new_name".to_string()
    };
    format!(
        "leave it out of {plugin} with `[plugins.{key}] hide = [\"{tool}\"]`, or rename it with `[plugins.{key}] rename = {{ {tool} = \"{renamed}\" }}`"
    )
}
