//! `[plugins]`'s own keys: which plugin files and built-ins load, where compiled
//! plugins are cached, and what one plugin may offer. (`[plugins.NAME]` tables are
//! `plugin_tables`.)

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::limits::{PluginLimits, ToolCount, ToolKib};
use super::plugin_tables::PluginTables;
use super::source::Source;

/// The directory whose `*.wasm` files load when `[plugins] dir` is not set, relative
/// to the config file; unlike a directory named there, it may be missing.
pub(super) const DEFAULT_PLUGIN_DIR: &str = "plugins";

/// `[plugins]`. Its known keys first; any other key is a `[plugins.NAME]` table (serde
/// cannot deny unknown fields beside a flattened map, so a misspelt key is reported by
/// `PluginTables`, naming it).
#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub(super) struct RawPlugins {
    /// Directory whose `*.wasm` files are loaded (default `plugins`, optional).
    #[cfg_attr(test, schemars(with = "Option<String>"))]
    dir: Option<Spanned<String>>,
    /// Further plugin files.
    #[cfg_attr(test, schemars(with = "Option<Vec<String>>"))]
    files: Option<Vec<Spanned<String>>>,
    /// Where compiled plugins are cached (default `~/.cache/warren/components`).
    #[cfg_attr(test, schemars(with = "Option<String>"))]
    cache_dir: Option<Spanned<String>>,
    /// `false` turns the compile cache off.
    cache: Option<bool>,
    /// Built-in plugins: `true` (default), `false`, or a list of names.
    #[cfg_attr(test, schemars(with = "Option<RawBuiltins>"))]
    builtins: Option<Spanned<RawBuiltins>>,
    /// Tools one plugin may offer.
    max_tools: Option<ToolCount>,
    /// KiB of one tool's description.
    max_description_kb: Option<ToolKib>,
    /// KiB of one tool's input schema.
    max_schema_kb: Option<ToolKib>,
    /// KiB of all tool definitions one profile sees.
    max_profile_tools_kb: Option<ToolKib>,
    /// `[plugins.NAME]`: how one plugin's tools are offered.
    #[serde(flatten)]
    pub(super) tables: PluginTables,
}

/// `[plugins] builtins` as written.
#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(
    untagged,
    expecting = "true, false, or a list of built-in plugin names"
)]
enum RawBuiltins {
    /// All of them, or none.
    All(bool),
    /// These, by name.
    Some(Vec<String>),
}

/// The plugin files: every `*.wasm` of `dir` (default `plugins`, which may be
/// missing), in name order, then `files`.
pub(super) fn files(src: &Source<'_>, raw: &RawPlugins) -> Result<Vec<PathBuf>, ConfigError> {
    let mut files = Vec::new();
    let dir = match &raw.dir {
        Some(dir) => Some((src.base.join(dir.get_ref()), Some(dir.span()))),
        None => Some((src.base.join(DEFAULT_PLUGIN_DIR), None)),
    };
    if let Some((dir, span)) = dir {
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                let mut found: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
                    .collect();
                found.sort();
                files.extend(found);
            }
            // The default directory is optional; one named in the file is not.
            Err(e) => {
                if let Some(span) = span {
                    return src.invalid(
                        span,
                        "plugins.dir",
                        format!("cannot read directory {}: {e}", dir.display()),
                    );
                }
            }
        }
    }
    for file in raw.files.iter().flatten() {
        let path = src.base.join(file.get_ref());
        if !path.is_file() {
            return src.invalid(
                file.span(),
                "plugins.files",
                format!("no such file: {}", path.display()),
            );
        }
        if !files.contains(&path) {
            files.push(path);
        }
    }
    Ok(files)
}

/// `[plugins] builtins`: which built-in plugins load.
pub(super) fn builtins(src: &Source<'_>, raw: &RawPlugins) -> Result<Vec<String>, ConfigError> {
    let all = || crate::builtin::names().map(str::to_string).collect();
    match raw.builtins.as_ref().map(|r| (r.get_ref(), r.span())) {
        None | Some((RawBuiltins::All(true), _)) => Ok(all()),
        Some((RawBuiltins::All(false), _)) => Ok(Vec::new()),
        Some((RawBuiltins::Some(names), span)) => {
            if let Some(bad) = names
                .iter()
                .find(|n| !crate::builtin::names().any(|b| b == n.as_str()))
            {
                return src.invalid(
                    span,
                    "plugins.builtins",
                    format!(
                        "no built-in plugin `{bad}` (built-in: {})",
                        crate::builtin::names().collect::<Vec<_>>().join(", ")
                    ),
                );
            }
            Ok(names.clone())
        }
    }
}

/// What one plugin and one profile's tool list may hold: `[plugins] max_*`, else the
/// defaults.
pub(super) fn limits(raw: &RawPlugins) -> PluginLimits {
    let d = PluginLimits::default();
    let kb = |v: Option<ToolKib>, default: usize| v.map_or(default, |v| v.0 as usize * 1024);
    PluginLimits {
        max_tools: raw.max_tools.map_or(d.max_tools, |v| v.0 as usize),
        max_description_bytes: kb(raw.max_description_kb, d.max_description_bytes),
        max_schema_bytes: kb(raw.max_schema_kb, d.max_schema_bytes),
        max_profile_bytes: kb(raw.max_profile_tools_kb, d.max_profile_bytes),
    }
}

/// Where compiled plugins are cached: `cache_dir` (relative to the config file), the
/// per-user default, or nowhere with `cache = false`.
pub(super) fn cache_dir(base: &Path, raw: &RawPlugins) -> Option<PathBuf> {
    match (&raw.cache, &raw.cache_dir) {
        (Some(false), _) => None,
        (_, Some(dir)) => Some(base.join(dir.get_ref())),
        _ => default_cache_dir(),
    }
}

/// The per-user compile cache: `$XDG_CACHE_HOME/warren/components` or
/// `~/.cache/warren/components` (`None` when neither variable is set).
pub(crate) fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .map(|base| base.join("warren").join("components"))
}
