//! The files an ended task is kept in beside its run's journal
//! (`RUN/mcp-task-ID.json`), read back when a server starts as agent files are read
//! ([`crate::config::read_text`]): regular files only (a FIFO would stop the server
//! from ever serving, `/dev/zero` would be read for ever), opened without blocking,
//! and at most a bounded number of bytes each. A file that cannot be read so is
//! skipped with a warning naming it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Weak;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::stamps::epoch_ms;
use super::table::{State, Task};

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

/// An ended task as its file keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    task_id: String,
    /// The owner's digest, hex.
    owner: String,
    /// Milliseconds since the epoch.
    created_ms: u64,
    updated_ms: u64,
    state: State,
    message: Option<String>,
}

/// Writes ended task `id` to `path` (beside its run's journal); a failure is logged,
/// and the task is then kept in memory only.
pub(super) fn save(path: &std::path::Path, id: &str, task: &Task) {
    let saved = Saved {
        task_id: id.to_string(),
        owner: hex::encode(task.owner),
        created_ms: epoch_ms(task.created),
        updated_ms: epoch_ms(task.updated),
        state: task.state.clone(),
        message: task.message.clone(),
    };
    let written = serde_json::to_vec(&saved)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::journal::file::write_owner_only(path, &bytes));
    if let Err(error) = written {
        tracing::warn!(task = id, path = %path.display(), %error, "could not keep the ended MCP task beside its journal: it will not survive a restart");
    }
}

/// The ended tasks kept in the runs of journal `dir` that ended less than
/// `retention` ago (each file at most `max_bytes`).
pub(super) fn load(
    dir: &std::path::Path,
    retention: Duration,
    max_bytes: usize,
) -> HashMap<String, Task> {
    let now = SystemTime::now();
    let mut kept = HashMap::new();
    for text in task_files(dir, max_bytes) {
        let Ok(stored) = serde_json::from_str::<Saved>(&text) else {
            continue;
        };
        let mut owner = [0; 32];
        if hex::decode_to_slice(&stored.owner, &mut owner).is_err() {
            continue;
        }
        let updated = UNIX_EPOCH + Duration::from_millis(stored.updated_ms);
        let age = now.duration_since(updated).unwrap_or_default();
        if age >= retention || matches!(stored.state, State::Working) {
            continue;
        }
        let (_, done) = watch::channel(true);
        kept.insert(
            stored.task_id,
            Task {
                owner,
                created: UNIX_EPOCH + Duration::from_millis(stored.created_ms),
                updated,
                state: stored.state,
                message: stored.message,
                ended: Some(Instant::now().checked_sub(age).unwrap_or_else(Instant::now)),
                cancel: CancellationToken::new(),
                done,
                tree: Weak::new(),
            },
        );
    }
    kept
}
