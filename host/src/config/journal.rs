//! `[journal]`: where runs are journaled (see `crate::journal`), or that they are not.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The journal directory when `[journal] dir` is not set, relative to the directory
/// of `warren.toml`.
pub const DEFAULT_JOURNAL_DIR: &str = ".warren/runs";

/// `[journal]` in `warren.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJournal {
    /// Where runs are journaled (relative to the config's directory).
    dir: Option<PathBuf>,
    /// Whether runs are journaled at all (default true).
    enabled: Option<bool>,
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
}
