//! Appending to a run's journal: one writer thread per run takes records in order and
//! writes each batch with one `write`, syncing it with one `fdatasync` when someone
//! waits for it (group commit), so a thousand agents recording at once share writes
//! and syncs instead of queueing for a thousand.
//!
//! What is durable when. A record is written within [`WRITE_DELAY`] of being made
//! (with the records made meanwhile; within [`COMMIT_DELAY`] when it is awaited:
//! the end of a call that could have had an effect is, before its agent goes on); from then on it survives the death of the
//! process (a crash, SIGKILL, the OOM killer), being in the kernel's page cache. It
//! survives a crash of the machine once synced: a batch is synced when a record in it
//! is awaited ([`Journal::record_durably`]: the start of a tool call that could have an
//! effect, before the call runs, which syncs its model response before it as well) and
//! when the run ends ([`Journal::flush`]). So a crash of the process at any instant
//! loses at most the records of the last [`WRITE_DELAY`], the boundaries in progress: a model
//! response not yet written is asked for again, a call that can have no effect is run
//! again, and no call that could have one runs before its start is on disk.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};

use super::record::Record;

/// The file of a run's journal inside its directory.
pub const JOURNAL_FILE: &str = "journal.jsonl";

/// How long the writer lets a batch gather after its first record when someone waits
/// for it to be durable.
const COMMIT_DELAY: std::time::Duration = std::time::Duration::from_micros(500);

/// How long it lets a batch gather when nobody waits for it (an awaited or urgent
/// record arriving meanwhile cuts the wait to [`COMMIT_DELAY`]): fewer, larger
/// writes, and fewer wake-ups of the writer thread. What a crash can lose is a
/// model response (asked for again on resume) or the result of a call that could
/// have no effect (run again); the end of one that could is written at once.
const WRITE_DELAY: std::time::Duration = std::time::Duration::from_millis(20);

/// A record on its way to disk, and whoever waits for it to be durable.
struct Pending {
    /// The serialized line, newline included (empty for a flush).
    line: Vec<u8>,
    /// Told when the line is written (and synced, with `sync`).
    waiter: Option<oneshot::Sender<()>>,
    /// Synced before the waiter is told.
    sync: bool,
}

/// The journal of one run, open for appending.
pub struct Journal {
    /// Where its records go.
    sender: mpsc::UnboundedSender<Pending>,
    /// The writer thread, woken early for a record someone waits for.
    writer: std::thread::Thread,
    /// Set when a write failed: the run goes on, unjournaled from then on, and the
    /// failure is logged once.
    failed: std::sync::Arc<AtomicBool>,
}

impl Journal {
    /// Creates run `run_id`'s journal in `dir` (`dir/RUN_ID/journal.jsonl`); a
    /// journal of that id must not exist yet.
    pub fn create(dir: &Path, run_id: &str, max_bytes: u64) -> std::io::Result<Journal> {
        let run_dir = dir.join(run_id);
        std::fs::create_dir_all(&run_dir)?;
        let path = run_dir.join(JOURNAL_FILE);
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)?;
        // Held while the run's process lives, so no `warren resume` takes it over.
        lock(&file, &path)?;
        Journal::start(file, path, 0, max_bytes)
    }

    /// Opens the existing journal at `path` to append to it (a resumed run), first
    /// cutting a torn last line left by a crash. Fails with `WouldBlock` while another
    /// process holds it (the run is still going, or being resumed).
    pub fn append(path: &Path, max_bytes: u64) -> std::io::Result<Journal> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)?;
        lock(&file, path)?;
        let bytes = std::fs::read(path)?;
        let whole = bytes
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |at| at + 1);
        if whole < bytes.len() {
            file.set_len(whole as u64)?;
            file.sync_data()?;
        }
        Journal::start(file, path.to_path_buf(), whole as u64, max_bytes)
    }

    fn start(
        file: File,
        path: std::path::PathBuf,
        written: u64,
        max_bytes: u64,
    ) -> std::io::Result<Journal> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let failed = std::sync::Arc::new(AtomicBool::new(false));
        let writer_failed = failed.clone();
        let writer = std::thread::Builder::new()
            .name("warren-journal".into())
            .spawn(move || {
                let mut out = Output {
                    file,
                    written,
                    max_bytes,
                };
                write_batches(&mut out, receiver, &path, &writer_failed);
            })?
            .thread()
            .clone();
        Ok(Journal {
            sender,
            writer,
            failed,
        })
    }

    /// Appends `record` with the next batch, without waiting.
    pub fn record(&self, record: Record) {
        self.send(record, None, false);
    }

    /// Appends `record` and waits until it is written (within [`COMMIT_DELAY`]),
    /// not synced: it survives the death of the process from then on.
    pub async fn record_written(&self, record: Record) {
        let (written, wait) = oneshot::channel();
        self.send(record, Some(written), false);
        self.writer.unpark();
        let _ = wait.await;
    }

    /// Appends `record` and waits until it is on disk.
    pub async fn record_durably(&self, record: Record) {
        let (synced, wait) = oneshot::channel();
        self.send(record, Some(synced), true);
        self.writer.unpark();
        let _ = wait.await;
    }

    /// Waits until every record sent so far is on disk.
    pub async fn flush(&self) {
        let (synced, wait) = oneshot::channel();
        let _ = self.sender.send(Pending {
            line: Vec::new(),
            waiter: Some(synced),
            sync: true,
        });
        self.writer.unpark();
        let _ = wait.await;
    }

    fn send(&self, record: Record, waiter: Option<oneshot::Sender<()>>, sync: bool) {
        if self.failed.load(Ordering::Relaxed) {
            if let Some(waiter) = waiter {
                let _ = waiter.send(());
            }
            return;
        }
        let line = line_bytes(now_ms(), &record);
        let _ = self.sender.send(Pending { line, waiter, sync });
    }
}

/// Takes the journal's lock (advisory, released when the file closes: when the
/// process ends, however it ends).
fn lock(file: &File, path: &Path) -> std::io::Result<()> {
    file.try_lock().map_err(|error| match error {
        std::fs::TryLockError::WouldBlock => std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            format!(
                "{} is held by another process: the run is still going, or another `warren resume` has it",
                path.display()
            ),
        ),
        std::fs::TryLockError::Error(error) => error,
    })
}

/// The journal file, and how much it may still grow.
struct Output {
    file: File,
    /// Bytes in it.
    written: u64,
    /// Bytes it may hold (`[journal] max_run_mib`).
    max_bytes: u64,
}

impl Output {
    /// Appends `bytes`, synced when `sync`; past the size bound, writes the
    /// `journal_full` record instead and fails with what happened.
    fn write(&mut self, bytes: &[u8], sync: bool) -> std::io::Result<()> {
        if self.written + bytes.len() as u64 > self.max_bytes {
            let mib = self.max_bytes / (1024 * 1024);
            let full = line_bytes(now_ms(), &Record::JournalFull { max_run_mib: mib });
            self.file.write_all(&full)?;
            self.file.sync_data()?;
            return Err(std::io::Error::other(format!(
                "it reached {mib} MiB ([journal] max_run_mib), so it cannot be resumed"
            )));
        }
        self.file.write_all(bytes)?;
        self.written += bytes.len() as u64;
        if sync {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

/// One journal line, newline included: what a [`Line`](super::record::Line) serializes to, written
/// directly (`{"ts_ms":…,` then the record's own fields) rather than through serde's
/// `flatten`, which costs a map serializer per record.
fn line_bytes(ts_ms: u64, record: &Record) -> Vec<u8> {
    let mut line = Vec::with_capacity(256);
    write!(line, "{{\"ts_ms\":{ts_ms}").expect("writing to a Vec");
    let opening = line.len();
    serde_json::to_writer(&mut line, record).expect("records serialize");
    // A record is an object with at least its `type`: its `{` becomes the comma
    // after `ts_ms`, so the line is built in one buffer, with no copy.
    line[opening] = b',';
    line.push(b'\n');
    line
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The writer thread: each batch (what has arrived since the last) is written whole
/// and synced once, then everyone waiting on it is told.
fn write_batches(
    out: &mut Output,
    mut receiver: mpsc::UnboundedReceiver<Pending>,
    path: &Path,
    failed: &AtomicBool,
) {
    // One buffer for every batch's bytes, grown to the largest batch.
    let mut bytes = Vec::new();
    while let Some(first) = receiver.blocking_recv() {
        // A moment for the records of other agents to join this batch: one write,
        // one sync and one wake-up serve them all (a group-commit delay, as databases
        // have): short when someone waits, longer otherwise, cut short by `unpark`
        // when an awaited record comes meanwhile.
        let delay = if first.waiter.is_some() {
            COMMIT_DELAY
        } else {
            WRITE_DELAY
        };
        let started = std::time::Instant::now();
        std::thread::park_timeout(delay);
        let elapsed = started.elapsed();
        if elapsed < COMMIT_DELAY {
            std::thread::park_timeout(COMMIT_DELAY - elapsed);
        }
        let mut batch = vec![first];
        while let Ok(more) = receiver.try_recv() {
            batch.push(more);
        }
        if !failed.load(Ordering::Relaxed) {
            bytes.clear();
            for pending in &batch {
                bytes.extend_from_slice(&pending.line);
            }
            let awaited = batch.iter().any(|p| p.sync);
            let written = out.write(&bytes, awaited);
            if let Err(error) = written {
                failed.store(true, Ordering::Relaxed);
                tracing::error!(
                    "cannot write the run journal {}: {error}; the run goes on without it",
                    path.display()
                );
            }
        }
        for pending in batch {
            if let Some(waiter) = pending.waiter {
                let _ = waiter.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::Line;
    use super::*;

    #[test]
    fn a_line_written_directly_reads_back_as_the_record_it_holds() {
        for record in [
            Record::AgentStarted {
                agent: "a\"b".into(),
            },
            Record::JournalFull { max_run_mib: 3 },
            Record::ToolFinished {
                agent: "a".into(),
                call_id: "c".into(),
                outcome: crate::sandbox::ToolOutcome::OutOfFuel,
                content: "é".into(),
                duration_ms: 7,
                fuel_used: Some(u64::MAX),
                output_bytes: 2,
            },
            Record::RunResumed {
                warren: "0".into(),
                forced_over: vec!["x".into()],
                limits: Some(crate::journal::RecordedLimits {
                    budget_usd: Some(0.5),
                    max_concurrent: 3,
                    max_depth: 1,
                }),
            },
        ] {
            let bytes = line_bytes(42, &record);
            assert!(bytes.ends_with(b"}\n"));
            let line: Line = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(line, Line { ts_ms: 42, record });
        }
    }
}
