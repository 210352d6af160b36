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
