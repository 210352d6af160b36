//! `grep`: lines matching a regular expression, shown as matching files, as lines
//! with context (ripgrep's format), or as counts per file.

use std::cmp::Reverse;
use std::fs;
use std::time::SystemTime;

use globset::GlobMatcher;
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use crate::exports::warren::plugin::tool::ToolError;
use crate::invalid;
use crate::walk::{roots, shown, Found, Walker};

/// Output lines when the call gives no `limit`.
pub(crate) const DEFAULT_LIMIT: usize = 200;

/// The largest `limit` a call may ask for.
pub(crate) const MAX_LIMIT: usize = 5000;

/// The most context lines a call may ask for on either side of a match.
pub(crate) const MAX_CONTEXT: usize = 100;

/// A compiled pattern may take at most this much memory, so a pathological regex is
/// refused up front instead of exhausting the guest's memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Files larger than this are skipped (and counted in a note): one huge log must not
/// take the whole call's memory.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A shown line longer than this is cut, so one minified file cannot fill the answer.
const MAX_LINE_BYTES: usize = 2000;

/// File types for `type`, with the extensions that select them.
const TYPES: &[(&str, &[&str])] = &[
    ("rs", &["rs"]),
    ("py", &["py", "pyi"]),
    ("js", &["js", "mjs", "cjs", "jsx"]),
    ("ts", &["ts", "mts", "cts", "tsx"]),
    ("go", &["go"]),
    ("java", &["java"]),
    ("c", &["c", "h"]),
    ("cpp", &["cpp", "cc", "cxx", "hpp", "hh", "hxx", "h"]),
    ("md", &["md", "markdown"]),
    ("json", &["json"]),
    ("toml", &["toml"]),
    ("yaml", &["yaml", "yml"]),
    ("html", &["html", "htm"]),
    ("css", &["css"]),
    ("sh", &["sh", "bash"]),
    ("txt", &["txt"]),
];

/// The names `type` accepts.
pub(crate) fn type_names() -> Vec<&'static str> {
    TYPES.iter().map(|(name, _)| *name).collect()
}

/// The extensions of file type `name`.
fn extensions(name: &str) -> Result<&'static [&'static str], ToolError> {
    TYPES
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, extensions)| *extensions)
        .ok_or_else(|| {
            invalid(format!(
                "unknown type `{name}`; known types: {}",
                type_names().join(", ")
            ))
        })
}

/// `grep`'s arguments, as the schema in `lib.rs` describes them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrepArgs {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    #[serde(rename = "type")]
    file_type: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    context: Option<usize>,
    before: Option<usize>,
    after: Option<usize>,
    #[serde(default)]
    output_mode: OutputMode,
    limit: Option<usize>,
}

/// What the answer lists.
#[derive(Deserialize, Default)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    /// Paths of matching files, newest first.
    #[default]
    FilesWithMatches,
    /// Matching lines with their context, in walk order.
    Content,
    /// Matching lines per file, in walk order.
    Count,
}

/// The answer's lines, up to the limit; the rest are only counted.
struct Lines {
    /// Lines kept for the answer.
    kept: Vec<String>,
    /// How many lines the answer may hold.
    limit: usize,
    /// Lines produced past the limit, for the cut note.
    more: usize,
}

impl Lines {
    fn push(&mut self, line: String) {
        if self.kept.len() < self.limit {
            self.kept.push(line);
        } else {
            self.more += 1;
        }
    }
}

pub(crate) fn grep(args: &GrepArgs) -> Result<String, ToolError> {
    let regex = compile(&args.pattern, args.case_insensitive)?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(invalid(format!(
            "limit must be between 1 and {MAX_LIMIT}, not {limit}"
        )));
    }
    let before = args.before.or(args.context).unwrap_or(0);
    let after = args.after.or(args.context).unwrap_or(0);
    if before > MAX_CONTEXT || after > MAX_CONTEXT {
        return Err(invalid(format!(
            "context, before and after must be at most {MAX_CONTEXT}"
        )));
    }
    let extensions = args.file_type.as_deref().map(extensions).transpose()?;
    let name_glob = args.glob.as_deref().map(crate::glob::compile).transpose()?;
    let filter = Filter {
        glob: name_glob.as_ref(),
        glob_by_path: args.glob.as_deref().is_some_and(|g| g.contains('/')),
        extensions,
    };

    let roots = roots(args.path.as_deref())?;
    let mut walker = Walker::default();
    let mut lines = Lines {
        kept: Vec::new(),
        limit,
        more: 0,
    };
    let mut matching_files: Vec<(SystemTime, String)> = Vec::new();
    let mut skipped_large = 0;
    let mut grouped = false;
    for root in &roots {
        walker.walk(root, &mut |file| {
            // A file named as `path` is searched whatever the filters say.
            if file.path != root.as_str() && !filter.admits(file) {
                return;
            }
            if file.len > MAX_FILE_BYTES {
                skipped_large += 1;
                return;
            }
            let Some(text) = read_text(file.path) else {
                return;
            };
            match args.output_mode {
                OutputMode::FilesWithMatches => {
                    if text.lines().any(|line| regex.is_match(line)) {
                        matching_files.push((file.modified, file.path.to_string()));
                    }
                }
                OutputMode::Count => {
                    let count = text.lines().filter(|line| regex.is_match(line)).count();
                    if count > 0 {
                        lines.push(format!("{}:{count}", file.path));
                    }
                }
                OutputMode::Content => content(
                    file.path,
                    &text,
                    &regex,
                    (before, after),
                    &mut grouped,
                    &mut lines,
                ),
            }
        })?;
    }
    matching_files.sort_by(|a, b| (Reverse(a.0), &a.1).cmp(&(Reverse(b.0), &b.1)));
    for (_, path) in matching_files {
        lines.push(path);
    }

    let mut answer = lines.kept;
    if answer.is_empty() {
        answer.push(format!(
            "no matches for {} under {}",
            args.pattern,
            shown(&roots)
        ));
    }
    if lines.more > 0 {
        answer.push(format!("[cut: {} more lines]", lines.more));
    }
    if skipped_large > 0 {
        answer.push(format!(
            "[skipped {skipped_large} file{} over {} MiB]",
            crate::read::plural(skipped_large),
            MAX_FILE_BYTES / (1024 * 1024)
        ));
    }
    answer.extend(walker.note());
    Ok(answer.join("\n"))
}

fn compile(pattern: &str, case_insensitive: bool) -> Result<Regex, ToolError> {
    if pattern.is_empty() {
        return Err(invalid("pattern must not be empty"));
    }
    RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| invalid(format!("bad regex: {e}")))
}

/// Which files a search looks at: `glob` and `type`.
struct Filter<'a> {
    /// Files must match this glob, if given.
    glob: Option<&'a GlobMatcher>,
    /// Whether the glob names paths below the root (it has a `/`) or file names.
    glob_by_path: bool,
    /// Files must have one of these extensions, if given.
    extensions: Option<&'static [&'static str]>,
}

impl Filter<'_> {
    fn admits(&self, file: &Found<'_>) -> bool {
        let name = file.relative.rsplit('/').next().unwrap_or(file.relative);
        if let Some(glob) = self.glob {
            let candidate = if self.glob_by_path {
                file.relative
            } else {
                name
            };
            if !glob.is_match(candidate) {
                return false;
            }
        }
        match self.extensions {
            None => true,
            Some(extensions) => name.rsplit_once('.').is_some_and(|(_, extension)| {
                extensions.contains(&extension.to_ascii_lowercase().as_str())
            }),
        }
    }
}

/// The file as text, or `None` for unreadable, binary (a NUL byte) or non-UTF-8 files.
fn read_text(path: &str) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Adds the matching lines of one file with their context, ripgrep style: `path:n:text`
/// for matches, `path-n-text` for context and, when there is context, `--` between
/// groups that do not touch (also across files; `grouped` says whether any group came
/// before).
fn content(
    path: &str,
    text: &str,
    regex: &Regex,
    (before, after): (usize, usize),
    grouped: &mut bool,
    out: &mut Lines,
) {
    let separate = before > 0 || after > 0;
    let all: Vec<&str> = text.lines().collect();
    // The last line shown from this file, and how many context lines after it are due.
    let mut last: Option<usize> = None;
    let mut after_due = 0;
    for (index, line) in all.iter().enumerate() {
        if regex.is_match(line) {
            let start = index
                .saturating_sub(before)
                .max(last.map_or(0, |shown| shown + 1));
            let touches = last.is_some_and(|shown| start == shown + 1);
            if separate && *grouped && !touches {
                out.push("--".into());
            }
            for (context, context_line) in all.iter().enumerate().take(index).skip(start) {
                out.push(shown_line(path, context, '-', context_line));
            }
            out.push(shown_line(path, index, ':', line));
            last = Some(index);
            after_due = after;
            *grouped = true;
        } else if after_due > 0 {
            out.push(shown_line(path, index, '-', line));
            last = Some(index);
            after_due -= 1;
        }
    }
}

/// `path{sep}number{sep}line`, with an over-long line cut.
fn shown_line(path: &str, index: usize, separator: char, line: &str) -> String {
    let number = index + 1;
    if line.len() <= MAX_LINE_BYTES {
        return format!("{path}{separator}{number}{separator}{line}");
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{path}{separator}{number}{separator}{} [line cut after {MAX_LINE_BYTES} bytes]",
        &line[..end]
    )
}
