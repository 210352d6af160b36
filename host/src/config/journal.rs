//! `[journal]`: where runs are journaled (see `crate::journal`), or that they are not.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::values::Bounded;

/// The journal directory when `[journal] dir` is not set, relative to the directory
/// of `warren.toml`.
pub(crate) const DEFAULT_JOURNAL_DIR: &str = ".warren/runs";

/// How large one run's journal may grow by default, in MiB (`[journal] max_run_mib`).
pub(crate) const DEFAULT_MAX_RUN_MIB: u64 = 1024;

/// `[journal] max_run_mib`: up to a TiB.
pub(super) type RunMib = Bounded<1, 1_048_576>;

/// `[journal]` in `warren.toml`.
#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(super) struct RawJournal {
    /// Where runs are journaled (relative to the config's directory).
    dir: Option<PathBuf>,
    /// Whether runs are journaled at all (default true).
    enabled: Option<bool>,
    /// How large one run's journal may grow, in MiB.
    max_run_mib: Option<RunMib>,
}

impl RawJournal {
    /// The journal directory, `None` when journaling is off.
    pub(super) fn resolve(&self, base: &Path) -> Option<PathBuf> {
        if self.enabled == Some(false) {
            return None;
        }
        let dir = self
            .dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_JOURNAL_DIR));
        Some(base.join(dir))
    }

    /// How large one run's journal may grow, in bytes.
    pub(super) fn max_run_bytes(&self) -> u64 {
        self.max_run_mib.map_or(DEFAULT_MAX_RUN_MIB, |m| m.0) * 1024 * 1024
    }
}
