//! The run journal: every run is recorded as it goes, one JSON line per boundary
//! (the run's start, each job queued, started and finished, each model response, each
//! tool call and its result, the run's end), in `RUN_ID/journal.jsonl` under the
//! journal directory (`[journal] dir`, default `.warren/runs` beside `warren.toml`).
//! `warren runs` lists runs, `warren show` prints one; both read journals written by
//! any earlier process, finished or not.
//!
//! Layout: [`record`] (the format, versioned), [`writer`] (appending, with group
//! commit and what is durable when), [`read`] (reading back, a torn last line
//! ignored).

pub mod read;
pub mod record;
pub mod writer;

pub use self::record::{Record, RecordedCall, VERSION};
pub use self::writer::Journal;

use std::sync::Arc;

use crate::config::Config;

/// The journal of a new run `run_id`, its first record written: `None` when
/// journaling is off, or (with a warning) when the journal directory cannot be
/// written, so a read-only project still runs. A run id that is already journaled
/// is an error: a journal names one run.
pub fn open(
    config: &Config,
    run_id: &str,
    profile: &str,
    task: &str,
) -> anyhow::Result<Option<Arc<Journal>>> {
    let Some(dir) = &config.journal_dir else {
        return Ok(None);
    };
    let journal = match Journal::create(dir, run_id) {
        Ok(journal) => journal,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            anyhow::bail!(
                "run `{run_id}` is already journaled in {}: a run id names one run (choose another --run-id)",
                dir.display()
            )
        }
        Err(error) => {
            tracing::warn!(
                "cannot journal run {run_id} in {}: {error}; it runs unjournaled (set [journal] dir, or enabled = false)",
                dir.display()
            );
            return Ok(None);
        }
    };
    let config_text = std::fs::read(&config.path).unwrap_or_default();
    journal.record(Record::RunStarted {
        v: VERSION,
        run: run_id.to_string(),
        task: task.to_string(),
        profile: profile.to_string(),
        warren: env!("CARGO_PKG_VERSION").to_string(),
        config: config.path.display().to_string(),
        config_sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&config_text)),
    });
    Ok(Some(Arc::new(journal)))
}
