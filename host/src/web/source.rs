//! What a web server shows: a run of this process as it goes, or journaled runs.

use std::path::PathBuf;
use std::sync::Arc;

use super::live::LiveRun;

/// What a web server shows.
#[derive(Clone)]
pub(crate) enum Source {
    /// A run of this process, as it goes; the journal directory (when runs are
    /// journaled) serves earlier runs and this one's transcripts.
    Live {
        /// The run.
        run: Arc<LiveRun>,
        /// Where runs are journaled.
        journal_dir: Option<PathBuf>,
    },
    /// Journaled runs: the one named, or the list when `run` is `None`.
    Journal {
        /// Where runs are journaled.
        dir: PathBuf,
        /// The run's journal file.
        run: Option<PathBuf>,
    },
}
