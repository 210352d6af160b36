//! `glob`: files whose path matches a `**`-aware glob, newest first.

use std::cmp::Reverse;
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

use crate::exports::warren::plugin::tool::ToolError;
use crate::invalid;
use crate::walk::{roots, shown, Walker};

/// Paths listed when the call gives no `limit`.
pub(crate) const DEFAULT_LIMIT: usize = 100;

/// The largest `limit` a call may ask for.
pub(crate) const MAX_LIMIT: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobArgs {
    pattern: String,
    path: Option<String>,
    limit: Option<usize>,
}

pub(crate) fn glob(args: &GlobArgs) -> Result<String, ToolError> {
    let matcher = compile(&args.pattern)?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(invalid(format!(
            "limit must be between 1 and {MAX_LIMIT}, not {limit}"
        )));
    }
    let absolute = args.pattern.starts_with('/');
    let roots = roots(args.path.as_deref())?;
    let mut walker = Walker::default();
    let mut matches: Vec<(SystemTime, String)> = Vec::new();
    for root in &roots {
        walker.walk(root, &mut |file| {
            let candidate = if absolute { file.path } else { file.relative };
            if matcher.is_match(candidate) {
                matches.push((file.modified, file.path.to_string()));
            }
        })?;
    }
    if matches.is_empty() {
        let mut answer = format!("no files match {} under {}", args.pattern, shown(&roots));
        if let Some(note) = walker.note() {
            answer.push('\n');
            answer.push_str(&note);
        }
        return Ok(answer);
    }
    matches.sort_by(|a, b| (Reverse(a.0), &a.1).cmp(&(Reverse(b.0), &b.1)));
    let more = matches.len().saturating_sub(limit);
    let mut lines: Vec<String> = matches.into_iter().take(limit).map(|m| m.1).collect();
    if more > 0 {
        lines.push(format!("[and {more} more]"));
    }
    lines.extend(walker.note());
    Ok(lines.join("\n"))
}

/// A glob where `*` and `?` stay within one path component and `**` crosses them.
pub(crate) fn compile(pattern: &str) -> Result<GlobMatcher, ToolError> {
    if pattern.is_empty() {
        return Err(invalid("pattern must not be empty"));
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| invalid(format!("bad glob pattern: {e}")))
}
