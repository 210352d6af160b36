//! A task as its run's journal keeps it: what `GetTask` answers for a task this
//! server no longer holds (forgotten after `--task-retention`, or started before
//! `warren a2a` was restarted). Beside the run's journal, `a2a-task.json` (0600)
//! names the credential that started the task (its digest), its context and the
//! client's first message; written when the task starts, before the client hears
//! of it. The task's state, answer and history come from the journal.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::history::{self, Of};
use super::person::agent_message;
use crate::listener::auth::Owner;

/// The file beside a run's journal that makes the run an A2A task.
const TASK_FILE: &str = "a2a-task.json";
/// The largest such file read, in bytes.
const MAX_TASK_FILE: u64 = 1 << 20;

/// What makes a run an A2A task.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskFile {
    /// The SHA-256 of the bearer token that started it, hex.
    owner: String,
    context_id: String,
    /// The profile served.
    profile: String,
    /// The client's first message, as the history keeps it.
    first: Value,
}

/// Records that the run journaled at `journal` is a task of `owner`.
pub(super) fn save(
    journal: &Path,
    owner: &Owner,
    context_id: &str,
    profile: &str,
    first: &Value,
) -> std::io::Result<()> {
    let file = TaskFile {
        owner: hex::encode(owner),
        context_id: context_id.to_string(),
        profile: profile.to_string(),
        first: first.clone(),
    };
    let path = journal.with_file_name(TASK_FILE);
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    crate::journal::file::write_owner_only(&path, &bytes)
}

/// Task `id` of `owner` in journal directory `dir` as A2A writes it, with the last
/// `history_length` messages of its history: `None` when no such task of `owner`
/// was journaled there; `Err` when it was, and cannot be read.
pub(super) fn load(
    dir: &Path,
    owner: &Owner,
    id: &str,
    history_length: Option<usize>,
) -> Option<Result<Value, String>> {
    if !crate::journal::check::is_valid_id(id) {
        return None;
    }
    let run_dir: PathBuf = dir.join(id);
    let file = read_task_file(&run_dir.join(TASK_FILE))?;
    if file.owner != hex::encode(owner) {
        return None;
    }
    Some(wire(&run_dir, id, &file, history_length))
}

/// The tasks of `owner` journaled in `dir`, at most `max`, newest first: when
/// each started, its id and its context.
pub(super) fn owned(
    dir: &Path,
    owner: &Owner,
    max: usize,
) -> Vec<(std::time::SystemTime, String, String)> {
    let owner = hex::encode(owner);
    let mut found: Vec<(std::time::SystemTime, String, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let id = entry.file_name().to_str()?.to_string();
            let path = entry.path().join(TASK_FILE);
            let started = std::fs::symlink_metadata(&path).ok()?.modified().ok()?;
            Some((started, id, path))
        })
        .filter(|(_, id, _)| crate::journal::check::is_valid_id(id))
        .filter_map(|(started, id, path)| {
            let file = read_task_file(&path)?;
            (file.owner == owner).then_some((started, id, file.context_id))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.truncate(max);
    found
}

/// The task file at `path`, if one is there and reads: a symbolic link is not
/// followed, and a file past [`MAX_TASK_FILE`] is not one.
fn read_task_file(path: &Path) -> Option<TaskFile> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let mut bytes = Vec::new();
    opened
        .take(MAX_TASK_FILE + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_TASK_FILE {
        tracing::warn!(path = %path.display(), "an A2A task file past {MAX_TASK_FILE} bytes is ignored");
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

/// The task in `run_dir`.
fn wire(
    run_dir: &Path,
    id: &str,
    file: &TaskFile,
    history_length: Option<usize>,
) -> Result<Value, String> {
    let journal = run_dir.join(crate::journal::file::JOURNAL_FILE);
    let run = crate::journal::read::run(&journal)
        .map_err(|e| format!("task {id}'s journal cannot be read: {e}"))?;
    let root = run
        .agents
        .first()
        .ok_or_else(|| format!("task {id}'s journal names no agent"))?;
    let (state, said) = match (run.finished, root.state.as_str()) {
        (true, "ok") => ("TASK_STATE_COMPLETED", root.text.clone()),
        (true, "cancelled") => ("TASK_STATE_CANCELED", "cancelled".to_string()),
        (true, state) => (
            "TASK_STATE_FAILED",
            match &root.error {
                Some(error) => format!("{state}: {error}"),
                None => state.to_string(),
            },
        ),
        (false, _) => (
            "TASK_STATE_FAILED",
            format!("the process that ran this task stopped before it ended; `warren resume {id}` continues its run (as a run, not as this task)"),
        ),
    };
    let of = Of {
        task: id,
        context: &file.context_id,
        root: &root.id,
    };
    let mut message = agent_message(&said, None);
    message["taskId"] = json!(id);
    message["contextId"] = json!(file.context_id);
    let artifacts = match state {
        "TASK_STATE_COMPLETED" => {
            json!([{"artifactId": "answer", "name": "answer", "parts": [{"text": root.text}]}])
        }
        _ => json!([]),
    };
    let history = match history_length {
        Some(0) => Vec::new(),
        _ => history::read(&journal, &of, Some(&file.first))
            .map_err(|e| format!("task {id}'s journal cannot be read: {e}"))?,
    };
    let skip = history_length.map_or(0, |n| history.len().saturating_sub(n));
    Ok(json!({
        "id": id,
        "contextId": file.context_id,
        "status": {
            "state": state,
            "message": message,
            "timestamp": crate::journal::iso8601(std::time::UNIX_EPOCH + std::time::Duration::from_millis(run.last_ms)),
        },
        "artifacts": artifacts,
        "history": history[skip..],
        "metadata": {"warrenProfile": file.profile},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_file(owner: &str) -> String {
        serde_json::to_string(&TaskFile {
            owner: owner.into(),
            context_id: "c".into(),
            profile: "main".into(),
            first: json!({"role": "ROLE_USER"}),
        })
        .unwrap()
    }

    #[test]
    fn a_task_file_is_read_only_when_it_is_a_plain_file_within_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.json");
        std::fs::write(&plain, task_file("ab")).unwrap();
        assert_eq!(read_task_file(&plain).unwrap().owner, "ab");
        // A link to another user's (or any) file is not followed.
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&plain, &link).unwrap();
        assert!(read_task_file(&link).is_none());
        // One past the bound is not a task file, however it parses.
        let padded = format!("{}{}", task_file("ab"), " ".repeat(MAX_TASK_FILE as usize));
        let big = dir.path().join("big.json");
        std::fs::write(&big, padded).unwrap();
        assert!(read_task_file(&big).is_none());
    }
}
