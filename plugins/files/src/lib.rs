//! The `files` plugin: read, write, edit, list, glob and grep files.
//!
//! Paths are guest paths: the `guest` side of a preopen in the profile's
//! `capabilities.fs` (for example `/docs/notes.md`). The sandbox, not this code, decides
//! what is reachable; this plugin only turns refusals into errors the model can act on.
//!
//! Layout:
//! - `lib.rs`: the tool specs, argument parsing, dispatch and I/O error mapping;
//! - [`errno`]: an I/O error in words right for WASI, without its number;
//! - [`mounts`]: the granted directories (preopens), which file errors name;
//! - [`read`]: `read_file` (raw or numbered) and `list_dir`;
//! - [`edit`]: `write_file` and `edit_file` (exact string replacement);
//! - [`search`]: `search_text` (plain text, line by line);
//! - [`walk`]: the roots (a path or every preopen) and the sorted tree walk;
//! - [`glob`] and [`grep`]: file names by pattern, file contents by regex.

use std::io;

use serde::Deserialize;
use serde_json::json;

wit_bindgen::generate!({ path: "../../wit", world: "warren:plugin/plugin", generate_all });

mod edit;
mod errno;
mod glob;
mod grep;
mod mounts;
mod read;
mod search;
mod walk;

use exports::warren::plugin::tool::{Guest, ToolError, ToolSpec};

struct Files;

impl Guest for Files {
    fn list_tools() -> Vec<ToolSpec> {
        vec![
            spec(
                "read_file",
                "Read a UTF-8 text file. With only `path` it returns the contents as they are. With `offset` (first line, 1-based), `limit` (number of lines) or `line_numbers: true` it returns numbered lines like `cat -n` (number right-aligned in 6 columns, a tab, the line), at most 2000 lines and 256 KiB; a final `[cut: ...]` line says how to read on.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Guest path of the file, e.g. /docs/a.md"},
                        "offset": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based"},
                        "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return"},
                        "line_numbers": {"type": "boolean", "description": "Number the lines (implied by offset and limit)"}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            ),
            spec(
                "write_file",
                "Create or replace a text file with the given content; with `append`, add the content at the end of the file (creating it if missing).",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "append": {"type": "boolean"}},
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
            ),
            spec(
                "edit_file",
                "Replace exact text in a file. Either `old`/`new` (and `replace_all`), or `edits`: a list of {old, new, replace_all?} applied in order, all or none. Without replace_all, `old` must occur exactly once: include enough surrounding text to make it unique. Copy `old` from read_file output without the line-number prefix.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "old": {"type": "string", "minLength": 1, "description": "Exact text to replace"},
                        "new": {"type": "string", "description": "Replacement text (must differ from old)"},
                        "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence of old"},
                        "edits": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "old": {"type": "string", "minLength": 1},
                                    "new": {"type": "string"},
                                    "replace_all": {"type": "boolean", "default": false}
                                },
                                "required": ["old", "new"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            ),
            spec(
                "list_dir",
                "List a directory: one entry per line, directories end with '/', files show their size in bytes.",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                    "additionalProperties": false
                }),
            ),
            spec(
                "search_text",
                "Find lines containing a plain-text pattern in a file or, recursively, in a directory. Returns 'path:line: text' lines.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "pattern": {"type": "string", "minLength": 1},
                        "max_matches": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
                    },
                    "required": ["path", "pattern"],
                    "additionalProperties": false
                }),
            ),
            spec(
                "glob",
                "Find files by glob pattern (`**/*.rs`, `src/**/*.{ts,tsx}`; `*` stays within one directory, `**` crosses directories), matched against paths relative to `path` (default: every granted directory). Returns absolute paths, most recently modified first, then `[and N more]` past `limit`.",
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string", "minLength": 1, "description": "Glob; one starting with / is matched against absolute paths"},
                        "path": {"type": "string", "description": "Directory to search (default: every granted directory)"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": glob::MAX_LIMIT, "default": glob::DEFAULT_LIMIT}
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
            ),
            spec(
                "grep",
                "Search file contents with a regular expression (Rust regex syntax), line by line, under `path` (a file or directory; default: every granted directory). output_mode: `files_with_matches` (default; matching files, most recently modified first), `content` (`path:line:text`, context lines as `path-line-text`, `--` between groups) or `count` (`path:N`). Binary and non-UTF-8 files are skipped.",
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string", "minLength": 1, "description": "Regular expression"},
                        "path": {"type": "string", "description": "File or directory (default: every granted directory)"},
                        "glob": {"type": "string", "description": "Only files matching this glob: `*.md` matches names, `docs/**/*.md` relative paths"},
                        "type": {"type": "string", "enum": grep::type_names(), "description": "Only files of this type (by extension)"},
                        "case_insensitive": {"type": "boolean", "default": false},
                        "context": {"type": "integer", "minimum": 0, "maximum": grep::MAX_CONTEXT, "description": "Lines before and after each match (content mode)"},
                        "before": {"type": "integer", "minimum": 0, "maximum": grep::MAX_CONTEXT, "description": "Lines before each match (content mode)"},
                        "after": {"type": "integer", "minimum": 0, "maximum": grep::MAX_CONTEXT, "description": "Lines after each match (content mode)"},
                        "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"], "default": "files_with_matches"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": grep::MAX_LIMIT, "default": grep::DEFAULT_LIMIT, "description": "Output lines at most"}
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
            ),
        ]
    }

    fn call_tool(name: String, arguments: String) -> Result<String, ToolError> {
        match name.as_str() {
            "read_file" => read::read_file(&parse(&arguments)?),
            "write_file" => edit::write_file(&parse(&arguments)?),
            "edit_file" => edit::edit_file(parse(&arguments)?),
            "list_dir" => read::list_dir(&parse(&arguments)?),
            "search_text" => search::search_text(&parse(&arguments)?),
            "glob" => glob::glob(&parse(&arguments)?),
            "grep" => grep::grep(&parse(&arguments)?),
            other => Err(ToolError::InvalidInput(format!("unknown tool `{other}`"))),
        }
    }
}

fn spec(name: &str, description: &str, schema: serde_json::Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: schema.to_string(),
    }
}

fn parse<'a, T: Deserialize<'a>>(arguments: &'a str) -> Result<T, ToolError> {
    serde_json::from_str(arguments)
        .map_err(|e| ToolError::InvalidInput(format!("bad arguments: {e}")))
}

/// An `invalid-input` error: the model should fix its call.
fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::InvalidInput(message.into())
}

/// The answer when the profile grants no directory at all.
const NO_GRANTS: &str = "denied: this profile grants no directories (capabilities.fs)";

/// Turns an I/O error on `path` into a tool error.
fn io_error(path: &str, error: io::Error) -> ToolError {
    file_error(path, error, false)
}

/// [`io_error`] for a write, where a refusal under a read-only grant says so.
fn write_error(path: &str, error: io::Error) -> ToolError {
    file_error(path, error, true)
}

/// Refusals by the sandbox are denials. WASI answers a path outside every grant as if
/// nothing were there, and a relative path resolves against `/`, so both answers name
/// the granted directories: that is where the model may look.
fn file_error(path: &str, error: io::Error, writing: bool) -> ToolError {
    let mounts = mounts::granted();
    if mounts.is_empty() {
        return ToolError::Failed(NO_GRANTS.into());
    }
    // WASI reports a path outside every preopen as ENOTCAPABLE, and a write through a
    // read-only preopen or an escape attempt as EPERM (a PermissionDenied kind).
    let refused = error.kind() == io::ErrorKind::PermissionDenied
        || error.raw_os_error() == Some(errno::NOT_CAPABLE);
    let missing = error.kind() == io::ErrorKind::NotFound;
    let relative = !path.starts_with('/');
    let words = errno::words(&error);
    let message = match mounts::under(&mounts, path) {
        None if !relative && (refused || missing) => {
            return ToolError::Failed(format!(
                "denied: {path} is outside the granted directories: {}",
                mounts::shown(&mounts)
            ))
        }
        Some(mount) if refused && writing && !mount.writable => {
            format!(
                "denied: {path}: {} is read-only for this profile",
                mount.path
            )
        }
        _ if refused => format!(
            "denied: {path} is not reachable with this profile's file capabilities ({words})"
        ),
        _ => format!("{path}: {words}"),
    };
    ToolError::Failed(if relative {
        format!(
            "{message}; paths are absolute, under the granted directories: {}",
            mounts::shown(&mounts)
        )
    } else {
        message
    })
}

export!(Files);
