//! Tree walks for `glob` and `grep`: where to start (a given path, or every directory
//! the profile grants) and a depth-first walk in sorted order that never follows
//! symlinks and stops after a fixed number of entries.

use std::fs;
use std::time::SystemTime;

use crate::exports::warren::plugin::tool::ToolError;
use crate::mounts;
use crate::{invalid, io_error, NO_GRANTS};

/// A walk visits at most this many entries (files and directories, over every root),
/// so a huge tree ends with a note rather than at the call's time limit.
const MAX_WALK_ENTRIES: usize = 100_000;

/// A regular file the walk reached.
pub(crate) struct Found<'a> {
    /// Absolute guest path, as results show it.
    pub(crate) path: &'a str,
    /// Path below the root, `/`-separated, for matching globs; the file name when the
    /// root itself is a file.
    pub(crate) relative: &'a str,
    /// Last modification, for newest-first listings (the epoch when unknown).
    pub(crate) modified: SystemTime,
    /// Size in bytes, to skip files too large to search.
    pub(crate) len: u64,
}

/// Where a search starts: `path` (made absolute, trailing slashes dropped), or every
/// preopened directory when it is absent.
pub(crate) fn roots(path: Option<&str>) -> Result<Vec<String>, ToolError> {
    if let Some(path) = path {
        if path.is_empty() {
            return Err(invalid(
                "path must not be empty (leave it out to search every granted directory)",
            ));
        }
        let trimmed = path.trim_end_matches('/');
        return Ok(vec![if trimmed.starts_with('/') {
            trimmed.to_string()
        } else {
            format!("/{trimmed}")
        }]);
    }
    let names: Vec<String> = mounts::granted()
        .into_iter()
        .map(|mount| mount.path)
        .collect();
    // A preopen inside another is walked with its parent; listing it twice would
    // repeat its files.
    let nested = |name: &String| {
        names
            .iter()
            .any(|other| other != name && mounts::contains(other, name))
    };
    let roots: Vec<String> = names.iter().filter(|n| !nested(n)).cloned().collect();
    if roots.is_empty() {
        return Err(ToolError::Failed(NO_GRANTS.into()));
    }
    Ok(roots)
}

/// The roots as the answer names them: `/docs, /out`.
pub(crate) fn shown(roots: &[String]) -> String {
    roots.join(", ")
}

/// Walks one or more roots, counting entries against [`MAX_WALK_ENTRIES`].
#[derive(Default)]
pub(crate) struct Walker {
    /// Entries visited so far, over every root.
    visited: usize,
    /// Whether the entry cap stopped a walk.
    stopped: bool,
}

impl Walker {
    /// Calls `visit` for every regular file under `root` (or `root` itself when it is a
    /// file), in sorted depth-first order. Symlinks are skipped; an unreadable entry
    /// below the root is skipped, while a root that cannot be read is an error.
    pub(crate) fn walk(
        &mut self,
        root: &str,
        visit: &mut dyn FnMut(&Found<'_>),
    ) -> Result<(), ToolError> {
        let meta = fs::metadata(root).map_err(|e| io_error(root, e))?;
        if meta.is_file() {
            let name = root.rsplit('/').next().unwrap_or(root);
            visit(&found(root, name, &meta));
            return Ok(());
        }
        if !meta.is_dir() {
            return Ok(());
        }
        // Popping takes the smallest name first, so children are pushed in reverse.
        let mut pending = Vec::new();
        fs::read_dir(root).map_err(|e| io_error(root, e))?;
        push_children(root, "", &mut pending);
        while let Some((relative, is_dir)) = pending.pop() {
            if self.visited >= MAX_WALK_ENTRIES {
                self.stopped = true;
                break;
            }
            self.visited += 1;
            let path = join(root, &relative);
            if is_dir {
                push_children(&path, &relative, &mut pending);
            } else if let Ok(meta) = fs::symlink_metadata(&path) {
                if meta.is_file() {
                    visit(&found(&path, &relative, &meta));
                }
            }
        }
        Ok(())
    }

    /// A final line for the answer when the entry cap cut the walk short.
    pub(crate) fn note(&self) -> Option<String> {
        self.stopped
            .then(|| format!("[stopped after {MAX_WALK_ENTRIES} entries; give a narrower path]"))
    }
}

fn found<'a>(path: &'a str, relative: &'a str, meta: &fs::Metadata) -> Found<'a> {
    Found {
        path,
        relative,
        modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        len: meta.len(),
    }
}

/// Adds the entries of `dir` to `pending` as (relative path, is a directory), largest
/// name first; symlinks, non-UTF-8 names and unreadable entries are left out.
fn push_children(dir: &str, relative: &str, pending: &mut Vec<(String, bool)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<(String, bool)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let kind = entry.file_type().ok()?;
            if kind.is_symlink() {
                return None;
            }
            let name = entry.file_name().into_string().ok()?;
            let child = if relative.is_empty() {
                name
            } else {
                format!("{relative}/{name}")
            };
            Some((child, kind.is_dir()))
        })
        .collect();
    children.sort_by(|a, b| b.0.cmp(&a.0));
    pending.extend(children);
}

fn join(root: &str, relative: &str) -> String {
    if root.is_empty() || root == "/" {
        format!("/{relative}")
    } else {
        format!("{root}/{relative}")
    }
}
