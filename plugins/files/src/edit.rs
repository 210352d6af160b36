//! Changing files: `write_file`, and `edit_file`, exact string replacement applied to
//! the text in memory and written once, so a failing edit leaves the file untouched.

use std::fs;

use serde::Deserialize;

use crate::exports::warren::plugin::tool::ToolError;
use crate::read::plural;
use crate::{invalid, io_error, write_error};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    append: bool,
}

/// `edit_file`'s arguments: one replacement inline, or a list of them in `edits`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditArgs {
    path: String,
    old: Option<String>,
    new: Option<String>,
    replace_all: Option<bool>,
    edits: Option<Vec<Edit>>,
}

/// One exact replacement.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Edit {
    old: String,
    new: String,
    #[serde(default)]
    replace_all: bool,
}

pub(crate) fn write_file(args: &WriteArgs) -> Result<String, ToolError> {
    if args.append {
        use std::io::Write as _;
        fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&args.path)
            .and_then(|mut file| file.write_all(args.content.as_bytes()))
            .map_err(|e| write_error(&args.path, e))?;
        return Ok(format!(
            "appended {} bytes to {}",
            args.content.len(),
            args.path
        ));
    }
    fs::write(&args.path, &args.content).map_err(|e| write_error(&args.path, e))?;
    Ok(format!(
        "wrote {} bytes to {}",
        args.content.len(),
        args.path
    ))
}

pub(crate) fn edit_file(args: EditArgs) -> Result<String, ToolError> {
    let path = args.path;
    let inline = args.old.is_some() || args.new.is_some() || args.replace_all.is_some();
    let (edits, listed) = match (args.edits, inline) {
        (Some(_), true) => {
            return Err(invalid(
                "give either `old`/`new` (with `replace_all`) or `edits`, not both",
            ))
        }
        (Some(edits), false) if edits.is_empty() => {
            return Err(invalid("`edits` must hold at least one edit"))
        }
        (Some(edits), false) => (edits, true),
        (None, _) => {
            let (Some(old), Some(new)) = (args.old, args.new) else {
                return Err(invalid("give `old` and `new`, or `edits`"));
            };
            let replace_all = args.replace_all.unwrap_or(false);
            (
                vec![Edit {
                    old,
                    new,
                    replace_all,
                }],
                false,
            )
        }
    };
    // Arguments are checked before the file is touched.
    for (index, edit) in edits.iter().enumerate() {
        let problem = if edit.old.is_empty() {
            Some("`old` must not be empty")
        } else if edit.old == edit.new {
            Some("`old` and `new` are the same, so there is nothing to change")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(invalid(label(listed, index, problem)));
        }
    }

    let mut text = fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
    let mut replacements = 0;
    for (index, edit) in edits.iter().enumerate() {
        let count = text.matches(edit.old.as_str()).count();
        if count == 0 {
            return Err(invalid(label(
                listed,
                index,
                &format!("`old` not found in {path}"),
            )));
        }
        if count > 1 && !edit.replace_all {
            return Err(invalid(label(
                listed,
                index,
                &format!(
                    "`old` occurs {count} times in {path}; give more context or set replace_all"
                ),
            )));
        }
        text = if edit.replace_all {
            text.replace(&edit.old, &edit.new)
        } else {
            text.replacen(&edit.old, &edit.new, 1)
        };
        replacements += count;
    }
    fs::write(&path, &text).map_err(|e| write_error(&path, e))?;
    let mut summary = format!(
        "edited {path}: {replacements} replacement{}",
        plural(replacements)
    );
    if listed {
        summary.push_str(&format!(" in {} edit{}", edits.len(), plural(edits.len())));
    }
    Ok(summary)
}

/// Prefixes a problem with the edit it belongs to when the call used `edits`.
fn label(listed: bool, index: usize, problem: &str) -> String {
    if listed {
        format!("edits[{index}]: {problem}")
    } else {
        problem.to_string()
    }
}
