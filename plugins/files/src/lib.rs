//! The `files` plugin: read, write, list and search files.
//!
//! Paths are guest paths: the `guest` side of a preopen in the profile's
//! `capabilities.fs` (for example `/docs/notes.md`). The sandbox, not this code, decides
//! what is reachable; this plugin only turns refusals into errors the model can act on.

use std::fs;
use std::io;
use std::path::Path;

use serde::Deserialize;

wit_bindgen::generate!({ path: "../../wit", world: "warren:plugin/plugin", generate_all });

use exports::warren::plugin::tool::{Guest, ToolError, ToolSpec};

/// At most this many matches are returned by `search_text`, so a broad pattern cannot
/// produce an unbounded answer.
const MAX_MATCHES_LIMIT: usize = 1_000;

struct Files;

impl Guest for Files {
    fn list_tools() -> Vec<ToolSpec> {
        vec![
            spec(
                "read_file",
                "Read a UTF-8 text file and return its contents.",
                r#"{"type":"object","properties":{"path":{"type":"string","description":"Guest path of the file, e.g. /docs/a.md"}},"required":["path"],"additionalProperties":false}"#,
            ),
            spec(
                "write_file",
                "Create or replace a text file with the given content.",
                r#"{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}"#,
            ),
            spec(
                "list_dir",
                "List a directory: one entry per line, directories end with '/', files show their size in bytes.",
                r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}"#,
            ),
            spec(
                "search_text",
                "Find lines containing a plain-text pattern in a file or, recursively, in a directory. Returns 'path:line: text' lines.",
                r#"{"type":"object","properties":{"path":{"type":"string"},"pattern":{"type":"string","minLength":1},"max_matches":{"type":"integer","minimum":1,"maximum":1000,"default":100}},"required":["path","pattern"],"additionalProperties":false}"#,
            ),
        ]
    }

    fn call_tool(name: String, arguments: String) -> Result<String, ToolError> {
        match name.as_str() {
            "read_file" => {
                let args: PathArgs = parse(&arguments)?;
                fs::read_to_string(&args.path).map_err(|e| io_error(&args.path, e))
            }
            "write_file" => {
                let args: WriteArgs = parse(&arguments)?;
                fs::write(&args.path, &args.content).map_err(|e| io_error(&args.path, e))?;
                Ok(format!(
                    "wrote {} bytes to {}",
                    args.content.len(),
                    args.path
                ))
            }
            "list_dir" => {
                let args: PathArgs = parse(&arguments)?;
                list_dir(&args.path)
            }
            "search_text" => {
                let args: SearchArgs = parse(&arguments)?;
                search_text(&args)
            }
            other => Err(ToolError::InvalidInput(format!("unknown tool `{other}`"))),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    path: String,
    pattern: String,
    #[serde(default = "default_max_matches")]
    max_matches: usize,
}

fn default_max_matches() -> usize {
    100
}

fn spec(name: &str, description: &str, schema: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: schema.into(),
    }
}

fn parse<'a, T: Deserialize<'a>>(arguments: &'a str) -> Result<T, ToolError> {
    serde_json::from_str(arguments)
        .map_err(|e| ToolError::InvalidInput(format!("bad arguments: {e}")))
}

/// Turns an I/O error into a tool error, naming refusals by the sandbox as denials.
fn io_error(path: &str, error: io::Error) -> ToolError {
    // WASI reports a path outside every preopen as ENOTCAPABLE (76) and a write through
    // a read-only preopen or an escape attempt as EPERM/EACCES.
    let denied = error.kind() == io::ErrorKind::PermissionDenied
        || error.raw_os_error() == Some(76)
        || error.raw_os_error() == Some(63);
    if denied {
        ToolError::Failed(format!(
            "denied: {path} is not reachable with this profile's file capabilities ({error})"
        ))
    } else if error.kind() == io::ErrorKind::NotFound {
        ToolError::Failed(format!("{path}: no such file or directory"))
    } else {
        ToolError::Failed(format!("{path}: {error}"))
    }
}

fn list_dir(path: &str) -> Result<String, ToolError> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(path).map_err(|e| io_error(path, e))? {
        let entry = entry.map_err(|e| io_error(path, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata().map_err(|e| io_error(path, e))?;
        entries.push(if meta.is_dir() {
            format!("{name}/")
        } else {
            format!("{name}\t{}", meta.len())
        });
    }
    entries.sort();
    Ok(entries.join("\n"))
}

fn search_text(args: &SearchArgs) -> Result<String, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::InvalidInput("pattern must not be empty".into()));
    }
    let limit = args.max_matches.clamp(1, MAX_MATCHES_LIMIT);
    let mut matches = Vec::new();
    search_path(Path::new(&args.path), &args.pattern, limit, &mut matches)?;
    if matches.is_empty() {
        return Ok(format!(
            "no matches for {:?} under {}",
            args.pattern, args.path
        ));
    }
    Ok(matches.join("\n"))
}

fn search_path(
    path: &Path,
    pattern: &str,
    limit: usize,
    out: &mut Vec<String>,
) -> Result<(), ToolError> {
    let shown = path.display().to_string();
    let meta = fs::metadata(path).map_err(|e| io_error(&shown, e))?;
    if meta.is_dir() {
        let mut children: Vec<_> = fs::read_dir(path)
            .map_err(|e| io_error(&shown, e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        children.sort();
        for child in children {
            if out.len() >= limit {
                break;
            }
            search_path(&child, pattern, limit, out)?;
        }
        return Ok(());
    }
    // Binary or unreadable files are skipped rather than failing the whole search.
    let Ok(text) = fs::read_to_string(path) else {
        return Ok(());
    };
    for (number, line) in text.lines().enumerate() {
        if out.len() >= limit {
            break;
        }
        if line.contains(pattern) {
            out.push(format!("{shown}:{}: {line}", number + 1));
        }
    }
    Ok(())
}

export!(Files);
