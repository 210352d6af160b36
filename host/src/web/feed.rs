//! Journaled runs as the view's clients see them. Each journal is read once, from
//! where the last read stopped, and folded into one state ([`Feed`]) that every
//! client's snapshot and event stream is served from: eight clients of a growing
//! journal cost one read of what it gained, not eight reads of the whole file each
//! time it grows. A transcript is read as a stream, keeping only its agent's records.
//! A line is at most [`MAX_JOURNAL_LINE_BYTES`]; a longer one makes the journal
//! unreadable here, naming the line, rather than held whole.

use std::collections::VecDeque;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::api::{self, RunInfo};
use crate::jobs::run_state::RunState;
use crate::journal::record::Line;
use crate::journal::{Record, RecordedLimits, VERSION};

/// The longest journal line the view reads (a record holding a tool result or a
/// model response); a journal with a longer one is unreadable in the view, naming the
/// line (`warren show` still reads it). Only one line is held while it is read, once
/// for all the view's clients.
pub(crate) const MAX_JOURNAL_LINE_BYTES: usize = 64 << 20;

/// Bytes read from a journal at a time.
const READ_CHUNK: usize = 1 << 20;
/// Journals whose fold is kept between requests (the least recently asked for is
/// dropped first); a client's event stream keeps its own alive.
const KEPT_FEEDS: usize = 16;

/// The journals the view's clients follow, each folded once for all of them.
#[derive(Default)]
pub(super) struct Feeds {
    /// The kept feeds, the most recently asked for last.
    kept: Mutex<VecDeque<Arc<Feed>>>,
}

impl Feeds {
    /// The feed of the journal at `path`, shared with every other client of it.
    pub(super) fn of(&self, path: &Path) -> Arc<Feed> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let feed = match kept.iter().position(|feed| feed.path == path) {
            Some(at) => kept.remove(at).expect("the position is in range"),
            None => Arc::new(Feed {
                path: path.to_path_buf(),
                fold: Mutex::default(),
            }),
        };
        kept.push_back(feed.clone());
        if kept.len() > KEPT_FEEDS {
            kept.pop_front();
        }
        feed
    }
}

/// One journal, followed.
pub(super) struct Feed {
    /// The journal file.
    path: PathBuf,
    /// What its lines so far come to; one reader at a time, the others wait and
    /// then find it current.
    fold: Mutex<Fold>,
}

/// What a journal's lines so far come to.
#[derive(Default)]
struct Fold {
    /// Bytes of the file read (the last line's, unfinished, included).
    read: u64,
    /// The line being read.
    lines: LineSplitter,
    /// The run as its `run_started` gives it.
    run: Option<RunInfo>,
    /// Where every agent stands.
    state: RunState,
    /// The snapshot of what was read, made once per growth.
    snapshot: Option<Arc<Value>>,
    /// Why the journal cannot be read (kept until the file is replaced).
    failed: Option<String>,
}

impl Feed {
    /// The run's snapshot (`/api/run`), and the number of bytes of the journal it
    /// covers (a client sends a new snapshot when that changes).
    pub(super) fn snapshot(&self) -> Result<(u64, Arc<Value>), String> {
        let mut fold = self.fold.lock().unwrap_or_else(PoisonError::into_inner);
        let mut file = open(&self.path)?;
        let size = file
            .metadata()
            .map_err(|e| format!("cannot read the journal {}: {e}", self.path.display()))?
            .len();
        if size < fold.read {
            // Replaced or cut: read it again from the start.
            *fold = Fold::default();
        }
        if let Some(failed) = &fold.failed {
            return Err(failed.clone());
        }
        if size > fold.read || fold.snapshot.is_none() {
            if let Err(error) = fold.read_from(&mut file, &self.path, size) {
                fold.failed = Some(error.clone());
                return Err(error);
            }
            fold.snapshot = Some(Arc::new(fold.snapshot_value(&self.path)?));
        }
        let snapshot = fold.snapshot.clone().expect("made above");
        Ok((fold.read, snapshot))
    }
}

impl Fold {
    /// Reads and folds `file` from where the last read stopped up to `size`.
    fn read_from(
        &mut self,
        file: &mut std::fs::File,
        path: &Path,
        size: u64,
    ) -> Result<(), String> {
        let unreadable =
            |e: std::io::Error| format!("cannot read the journal {}: {e}", path.display());
        file.seek(SeekFrom::Start(self.read)).map_err(unreadable)?;
        let mut chunk = vec![0; READ_CHUNK];
        while self.read < size {
            let want =
                usize::try_from(size - self.read).map_or(READ_CHUNK, |left| left.min(READ_CHUNK));
            let got = file.read(&mut chunk[..want]).map_err(unreadable)?;
            if got == 0 {
                break;
            }
            self.read += got as u64;
            let mut lines = std::mem::take(&mut self.lines);
            let fed = lines.feed(&chunk[..got], |number, text| self.apply(path, number, text));
            self.lines = lines;
            fed.map_err(|error| format!("{}: {error}", path.display()))?;
        }
        Ok(())
    }

    /// Folds in line `number` (its bytes `text`, no newline).
    fn apply(&mut self, path: &Path, number: usize, text: &[u8]) -> Result<(), String> {
        let line: Line = serde_json::from_slice(text)
            .map_err(|error| format!("{}: not a journal record: {error}", number))?;
        match (&mut self.run, &line.record) {
            (
                None,
                Record::RunStarted {
                    v,
                    run,
                    task,
                    profile,
                    limits,
                    ..
                },
            ) => {
                if *v > VERSION {
                    return Err(format!(
                        "journal format {v} is newer than this warren reads ({VERSION}); use a newer warren"
                    ));
                }
                self.run = Some(RunInfo {
                    id: run.clone(),
                    task: task.clone(),
                    profile: profile.clone(),
                    live: false,
                    finished: false,
                    state: String::new(),
                    budget_usd: limits.and_then(|l| l.budget_usd),
                    max_concurrent: limits.map(|l| l.max_concurrent),
                    cost_usd: 0.0,
                });
            }
            (None, _) => {
                return Err(format!(
                    "{} does not start with run_started",
                    path.display()
                ))
            }
            (
                Some(run),
                Record::RunResumed {
                    limits: Some(limits),
                    ..
                },
            ) => set_limits(run, limits),
            (Some(run), Record::RunFinished { state, cost_usd }) => {
                run.finished = true;
                run.state = state.as_str().into();
                run.cost_usd = *cost_usd;
            }
            _ => {}
        }
        self.state.apply_line(&line);
        Ok(())
    }

    /// The snapshot of the run so far: an unfinished run's unended agents (and its
    /// root, so the run) are `interrupted`, as `warren show` judges them.
    fn snapshot_value(&self, path: &Path) -> Result<Value, String> {
        let Some(run) = &self.run else {
            return Err(format!(
                "{} does not start with run_started",
                path.display()
            ));
        };
        let mut info = run.clone();
        if !info.finished {
            let root = self.state.root().and_then(|id| self.state.agent(id));
            info.state = match root {
                Some(root) if root.finished_ms.is_some() => root.state.to_string(),
                Some(_) => "interrupted".into(),
                None => String::new(),
            };
            info.cost_usd = self.state.agents().map(|agent| agent.cost_usd).sum();
        }
        let finished = info.finished;
        Ok(api::snapshot(&info, &self.state, |agent| {
            (!finished && agent.finished_ms.is_none()).then_some("interrupted")
        }))
    }
}

fn set_limits(run: &mut RunInfo, limits: &RecordedLimits) {
    run.budget_usd = limits.budget_usd;
    run.max_concurrent = Some(limits.max_concurrent);
}

/// Opens the journal at `path` for reading as every journal reader does
/// ([`crate::journal::file::open`]): a regular file, no symlink followed, opened
/// without blocking.
fn open(path: &Path) -> Result<std::fs::File, String> {
    crate::journal::file::open(path, false)
        .map(|opened| opened.file)
        .map_err(|error| format!("{error:#}"))
}

/// The run id and agent `agent`'s records in the journal at `path`, read as a stream:
/// only that agent's records are held.
pub(super) fn agent_records(path: &Path, agent: &str) -> Result<(String, Vec<Line>), String> {
    let mut file = open(path)?;
    let mut lines = LineSplitter::default();
    let (mut run_id, mut records) = (None::<String>, Vec::new());
    let mut chunk = vec![0; READ_CHUNK];
    loop {
        let got = file
            .read(&mut chunk)
            .map_err(|e| format!("cannot read the journal {}: {e}", path.display()))?;
        if got == 0 {
            break;
        }
        lines
            .feed(&chunk[..got], |number, text| {
                let line: Line = serde_json::from_slice(text)
                    .map_err(|error| format!("{number}: not a journal record: {error}"))?;
                match (&line.record, &run_id) {
                    (Record::RunStarted { run, .. }, None) => run_id = Some(run.clone()),
                    (_, None) => return Err("does not start with run_started".into()),
                    _ => {
                        if line.record.agent() == Some(agent) {
                            records.push(line);
                        }
                    }
                }
                Ok(())
            })
            .map_err(|error| format!("{}: {error}", path.display()))?;
    }
    Ok((run_id.unwrap_or_default(), records))
}

/// Cuts bytes read from a journal into lines, holding at most one unfinished line of
/// at most [`MAX_JOURNAL_LINE_BYTES`]. An unfinished last line (still being written,
/// or torn by a crash) is never given out.
#[derive(Default)]
struct LineSplitter {
    /// The unfinished line's bytes so far.
    partial: Vec<u8>,
    /// Lines ended so far (for messages, 1-based).
    ended: usize,
}

impl LineSplitter {
    /// Takes the next `bytes`, calling `each` with every line they end (its number
    /// and its bytes; blank lines are skipped).
    fn feed(
        &mut self,
        mut bytes: &[u8],
        mut each: impl FnMut(usize, &[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        while !bytes.is_empty() {
            let (piece, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..at], true),
                None => (bytes, false),
            };
            bytes = &bytes[(piece.len() + usize::from(ended)).min(bytes.len())..];
            if self.partial.len() + piece.len() > MAX_JOURNAL_LINE_BYTES {
                return Err(format!(
                    "{}: the line is longer than {MAX_JOURNAL_LINE_BYTES} bytes, the most the web view reads (web::MAX_JOURNAL_LINE_BYTES)",
                    self.ended + 1
                ));
            }
            if !ended {
                self.partial.extend_from_slice(piece);
                break;
            }
            self.ended += 1;
            let line = if self.partial.is_empty() {
                piece
            } else {
                self.partial.extend_from_slice(piece);
                &self.partial[..]
            };
            if !line.iter().all(u8::is_ascii_whitespace) {
                each(self.ended, line)?;
            }
            self.partial.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_cut_anywhere_come_out_whole_and_an_unfinished_one_never() {
        let text = b"{\"a\":1}\n\n{\"b\":22}\n{\"c\":3";
        for cut in 0..text.len() {
            let mut splitter = LineSplitter::default();
            let mut seen = Vec::new();
            for part in [&text[..cut], &text[cut..]] {
                splitter
                    .feed(part, |number, line| {
                        seen.push((number, String::from_utf8(line.to_vec()).unwrap()));
                        Ok(())
                    })
                    .unwrap();
            }
            assert_eq!(
                seen,
                [(1, "{\"a\":1}".to_string()), (3, "{\"b\":22}".to_string())],
                "cut at {cut}"
            );
        }
    }
}
