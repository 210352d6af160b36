//! Deleting old runs (`warren runs prune`): finished runs beyond the newest `keep`, or
//! older than a given age. A run still held by a process (running, or being resumed)
//! is never deleted; an unfinished one only when asked, since it may be resumed.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::read::{runs, RunRecord};

/// Which runs to delete.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Prune {
    /// Keep the newest this many runs.
    pub keep: Option<usize>,
    /// Delete runs that started longer ago than this.
    pub older_than: Option<Duration>,
    /// Delete unfinished runs too (they could be resumed).
    pub unfinished: bool,
    /// Only say what would be deleted.
    pub dry_run: bool,
}

/// A run deleted (or, in a dry run, that would be).
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Pruned {
    /// Its id.
    pub run_id: String,
    /// Bytes its directory held.
    pub bytes: u64,
}

/// Deletes from `dir` the runs `prune` selects; returns them, oldest last, and the
/// journals that could not be read (left alone).
pub(crate) fn prune(dir: &Path, prune: Prune) -> anyhow::Result<(Vec<Pruned>, Vec<String>)> {
    anyhow::ensure!(
        prune.keep.is_some() || prune.older_than.is_some(),
        "say which runs to delete: --keep N (the newest N stay) and/or --older-than DAYS"
    );
    let (listed, problems) = runs(dir);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut pruned = Vec::new();
    for (index, run) in listed.iter().enumerate() {
        let beyond_keep = prune.keep.is_some_and(|keep| index >= keep);
        let too_old = prune
            .older_than
            .is_some_and(|age| now.saturating_sub(run.started_ms) > age.as_millis() as u64);
        if !(beyond_keep || too_old) || (!run.finished && !prune.unfinished) || held(run) {
            continue;
        }
        let run_dir = run
            .path
            .parent()
            .expect("a journal is in its run's directory");
        let bytes = size(run_dir);
        if !prune.dry_run {
            std::fs::remove_dir_all(run_dir)
                .map_err(|e| anyhow::anyhow!("cannot delete {}: {e}", run_dir.display()))?;
        }
        pruned.push(Pruned {
            run_id: run.id.clone(),
            bytes,
        });
    }
    Ok((pruned, problems))
}

/// Whether a process holds the run's journal (it runs, or is being resumed).
fn held(run: &RunRecord) -> bool {
    let Ok(file) = std::fs::File::open(&run.path) else {
        return false;
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(_) => true,
    }
}

/// The bytes of the files directly in `dir`.
fn size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}
