//! Reading: `read_file`, raw or as numbered lines (`cat -n` style) with a window and
//! caps, and `list_dir`.

use std::fs;

use serde::Deserialize;

use crate::exports::warren::plugin::tool::ToolError;
use crate::{invalid, io_error};

/// A numbered read shows at most this many lines, so one call cannot flood the model's
/// context; the cut note says where to go on.
const MAX_READ_LINES: usize = 2000;

/// A numbered read produces at most this many bytes (numbers included).
const MAX_READ_BYTES: usize = 256 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
    line_numbers: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathArgs {
    path: String,
}

pub(crate) fn read_file(args: &ReadArgs) -> Result<String, ToolError> {
    let numbered = args.offset.is_some() || args.limit.is_some() || args.line_numbers == Some(true);
    if args.offset == Some(0) {
        return Err(invalid("offset is 1-based: the first line is offset 1"));
    }
    if args.limit == Some(0) {
        return Err(invalid("limit must be at least 1"));
    }
    let text = fs::read_to_string(&args.path).map_err(|e| io_error(&args.path, e))?;
    if !numbered {
        return Ok(text);
    }
    numbered_lines(&args.path, &text, args.offset.unwrap_or(1), args.limit)
}

/// Lines `offset..offset + limit` of `text`, numbered, within the caps.
fn numbered_lines(
    path: &str,
    text: &str,
    offset: usize,
    limit: Option<usize>,
) -> Result<String, ToolError> {
    let total = text.lines().count();
    // Offset 1 of an empty file is the (empty) whole file, not an error.
    if offset > total.max(1) {
        return Err(invalid(format!(
            "offset {offset} is past the end: {path} has {total} line{}",
            plural(total)
        )));
    }
    let wanted_end = limit.map_or(total, |limit| total.min(offset - 1 + limit));
    let mut out = String::new();
    let mut last = offset - 1;
    let mut line_cut = None;
    for (index, line) in text.lines().enumerate().take(wanted_end).skip(offset - 1) {
        let number = index + 1;
        if number - offset >= MAX_READ_LINES {
            break;
        }
        let entry = format!("{number:>6}\t{line}\n");
        if out.len() + entry.len() > MAX_READ_BYTES {
            if out.is_empty() {
                // A single line larger than the whole budget: show its start, or the
                // reader could never get past it.
                let mut end = MAX_READ_BYTES;
                while !entry.is_char_boundary(end) {
                    end -= 1;
                }
                out.push_str(&entry[..end]);
                out.push('\n');
                last = number;
                line_cut = Some(number);
            }
            break;
        }
        out.push_str(&entry);
        last = number;
    }
    if last < wanted_end || line_cut.is_some() {
        out.push_str(&format!("[cut: showing lines {offset}-{last} of {total}"));
        if let Some(number) = line_cut {
            out.push_str(&format!(", line {number} cut after {MAX_READ_BYTES} bytes"));
        }
        if last < total {
            out.push_str(&format!("; use offset={} to read on", last + 1));
        }
        out.push(']');
    } else if out.ends_with('\n') {
        out.pop();
    }
    Ok(out)
}

pub(crate) fn list_dir(args: &PathArgs) -> Result<String, ToolError> {
    let path = &args.path;
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

/// `"s"` unless `n` is 1.
pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
