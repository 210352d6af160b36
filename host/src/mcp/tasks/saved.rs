//! The files an ended task is kept in beside its run's journal
//! (`RUN/mcp-task-ID.json`), read back when a server starts as agent files are read
//! ([`crate::config::read_text`]): regular files only (a FIFO would stop the server
//! from ever serving, `/dev/zero` would be read for ever), opened without blocking,
//! and at most a bounded number of bytes each. A file that cannot be read so is
//! skipped with a warning naming it.

use std::path::Path;

/// The files beside a task's run journal that keep its ended tasks:
/// `mcp-task-ID.json`.
pub(super) const TASK_FILE_PREFIX: &str = "mcp-task-";

/// What a task file holds beyond its result (bounded by
/// [`super::TaskLimits::max_result_bytes`]): its id, owner, times, status and last
/// progress message.
pub(super) const TASK_FILE_SLACK_BYTES: usize = 64 * 1024;

/// The text of every task file in the runs of journal `dir`, each at most
/// `max_bytes`.
pub(super) fn task_files(dir: &Path, max_bytes: usize) -> Vec<String> {
    let files = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|run| {
            std::fs::read_dir(run.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|file| {
            let name = file.file_name();
            let name = name.to_string_lossy();
            name.starts_with(TASK_FILE_PREFIX) && name.ends_with(".json")
        });
    let mut texts = Vec::new();
    for file in files {
        match crate::config::read_text(&file.path(), max_bytes, None) {
            Ok(text) => texts.push(text),
            Err(why) => tracing::warn!(
                path = %file.path().display(),
                "an MCP task file was not read: {why}"
            ),
        }
    }
    texts
}
