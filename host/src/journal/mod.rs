//! The run journal: every run is recorded as it goes, one JSON line per boundary
//! (the run's start, each job queued, started and finished, each model response, each
//! tool call and its result, the run's end), in `RUN_ID/journal.jsonl` under the
//! journal directory (`[journal] dir`, default `.warren/runs` beside `warren.toml`).
//! `warren runs` lists runs, `warren show` prints one; both read journals written by
//! any earlier process, finished or not.
//!
//! Layout: [`record`] (the format, versioned), [`fact`] (the moments both published
//! and journaled, each made into its event and its record from one value), [`writer`] (appending, with group
//! commit and what is durable when), `file` (journal files: created owner-only,
//! opened without following links, read as bounded lines), `check` (what every
//! record read must hold: ids, figures, a tree), [`read`] (reading back, a torn last
//! line ignored), [`time`] (how journal times are shown).

pub(crate) mod check;
pub(crate) mod fact;
pub(crate) mod file;
pub(crate) mod follow_up;
pub(crate) mod prune;
pub(crate) mod read;
pub(crate) mod record;
pub(crate) mod resume;
pub(crate) mod time;
pub(crate) mod writer;

pub(crate) use self::fact::{Fact, Journaling};
pub(crate) use self::record::{
    Drained, ForkedFrom, Record, RecordedCall, RecordedLimits, RecordedToolDef, VERSION,
};
pub(crate) use self::resume::Resume;
pub(crate) use self::time::{iso8601, utc_text};
pub(crate) use self::writer::Journal;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{Config, RunLimits};

/// The journal of a new run `run_id` under `limits`, its first record written:
/// `None` when journaling is off, or (with a warning) when the journal directory
/// cannot be written, so a read-only project still runs. A run id that is already
/// journaled is an error: a journal names one run.
pub(crate) fn open(
    config: &Config,
    plugins: BTreeMap<String, String>,
    limits: &RunLimits,
    run_id: &str,
    profile: &str,
    task: &str,
    forked_from: Option<ForkedFrom>,
) -> anyhow::Result<Option<Arc<Journal>>> {
    let Some(dir) = &config.journal_dir else {
        return Ok(None);
    };
    let journal = match Journal::create(dir, run_id, config.journal_max_run_bytes) {
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
    journal.record(Record::RunStarted {
        v: VERSION,
        run: run_id.to_string(),
        task: task.to_string(),
        profile: profile.to_string(),
        warren: env!("CARGO_PKG_VERSION").to_string(),
        config: config.path.display().to_string(),
        config_sha256: config_digest(config),
        plugins_sha256: plugins,
        limits: Some(limits.into()),
        forked_from,
    });
    Ok(Some(Arc::new(journal)))
}

/// SHA-256 of the configuration file's text, hex.
fn config_digest(config: &Config) -> String {
    let text = std::fs::read(&config.path).unwrap_or_default();
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&text))
}

/// The journal file `name` names: a path to a journal file or to the directory
/// holding one (a run kept as a fixture), or else a run in `config`'s journal
/// directory (an id, a unique prefix, or `last`).
pub(crate) fn locate(config: &Config, name: &str) -> anyhow::Result<std::path::PathBuf> {
    let path = std::path::Path::new(name);
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if path.join(writer::JOURNAL_FILE).is_file() {
        return Ok(path.join(writer::JOURNAL_FILE));
    }
    match &config.journal_dir {
        Some(dir) => read::find(dir, name),
        None => anyhow::bail!(
            "`{name}` is not a journal file, and journaling is off in {} ([journal] enabled = false), so no run id can name one",
            config.path.display()
        ),
    }
}

/// Reads the journal at `path` for a replay: what it recorded.
pub(crate) fn recording(path: &std::path::Path) -> anyhow::Result<Resume> {
    Resume::new(read::records(path)?)
        .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))
}

/// Takes over run `name` (an id, a unique prefix, or `last`) in `config`'s journal
/// directory to continue it: its journal, locked and open for appending, and what it
/// recorded. Refused when the run finished, when another process holds it, and when
/// the configuration or a plugin (`plugins`: SHA-256 by name) changed since, naming
/// what changed, unless `force`.
pub(crate) fn take_over(
    config: &Config,
    plugins: &BTreeMap<String, String>,
    name: &str,
    force: bool,
    follow_up: Option<&follow_up::FollowUp>,
) -> anyhow::Result<(Arc<Journal>, Resume)> {
    let Some(dir) = &config.journal_dir else {
        anyhow::bail!(
            "journaling is off in {} ([journal] enabled = false): there is no run to resume",
            config.path.display()
        );
    };
    let path = read::find(dir, name)?;
    let cannot = |error: anyhow::Error| anyhow::anyhow!("cannot resume run `{name}`: {error:#}");
    // Nothing is changed before the file is known to be the user's own journal,
    // whole, and resumable.
    let opened = file::open(&path, true).map_err(cannot)?;
    opened.own("resume").map_err(cannot)?;
    writer::lock(&opened.file, &path).map_err(|e| cannot(e.into()))?;
    let appending = opened.file.try_clone()?;
    let (lines, whole) = read::records_to_resume(opened, &path)?;
    let mut resume =
        Resume::new(lines).map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
    let message = follow_up
        .map(|follow_up| resume.follow_up(follow_up, &config.run_limits))
        .transpose()
        .map_err(cannot)?;
    match resume.finished {
        Some(state) if message.is_none() => anyhow::bail!(
            "run {} already finished ({}): there is nothing to resume (`warren show {}` prints it; `warren resume {} --follow-up AGENT TEXT` asks one of its agents more)",
            resume.run,
            state.as_str(),
            resume.run,
            resume.run
        ),
        _ => {}
    }
    if let Some(mib) = resume.full {
        anyhow::bail!(
            "run {}'s journal reached its size bound ({mib} MiB, [journal] max_run_mib): what the run did after it was not recorded, so it cannot be resumed",
            resume.run
        );
    }
    let changed = changes(&resume, &config_digest(config), plugins);
    if !changed.is_empty() && !force {
        anyhow::bail!(
            "run {} was made with a different setup: {}. Resuming could mix two setups in one run; restore them, or pass --force to resume anyway",
            resume.run,
            changed.join("; ")
        );
    }
    let journal = Journal::append(appending, &path, whole, config.journal_max_run_bytes)
        .map_err(|error| anyhow::anyhow!("cannot resume run `{name}`: {error}"))?;
    journal.record(Record::RunResumed {
        warren: env!("CARGO_PKG_VERSION").to_string(),
        forced_over: changed,
        limits: Some((&config.run_limits).into()),
    });
    if let Some(message) = message {
        journal.record(message.clone());
        resume.sent(crate::events::now_ms(), message);
    }
    Ok((Arc::new(journal), resume))
}

/// What differs between the setup run `resume` started with and today's.
fn changes(resume: &Resume, config: &str, plugins: &BTreeMap<String, String>) -> Vec<String> {
    let mut changed = Vec::new();
    if resume.config_sha256 != config {
        changed.push("the configuration file changed".to_string());
    }
    for (name, digest) in &resume.plugins_sha256 {
        match plugins.get(name) {
            None => changed.push(format!("plugin `{name}` is gone")),
            Some(now) if now != digest => changed.push(format!("plugin `{name}` changed")),
            Some(_) => {}
        }
    }
    for name in plugins.keys() {
        if !resume.plugins_sha256.contains_key(name) {
            changed.push(format!("plugin `{name}` is new"));
        }
    }
    changed
}
