//! `search_text`: lines containing a plain-text pattern, in a file or a tree.

use std::fs;
use std::path::Path;

use serde::Deserialize;

use crate::exports::warren::plugin::tool::ToolError;
use crate::{invalid, io_error};

/// At most this many matches are returned by `search_text`, so a broad pattern cannot
/// produce an unbounded answer.
const MAX_MATCHES_LIMIT: usize = 1_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    path: String,
    pattern: String,
    #[serde(default = "default_max_matches")]
    max_matches: usize,
}

fn default_max_matches() -> usize {
    100
}

pub(crate) fn search_text(args: &SearchArgs) -> Result<String, ToolError> {
    if args.pattern.is_empty() {
        return Err(invalid("pattern must not be empty"));
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
