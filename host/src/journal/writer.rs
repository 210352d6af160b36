//! Appending to a run's journal: records are serialized straight into one shared
//! buffer, and one writer thread per run takes what has gathered and writes it with one
//! `write`, syncing it with one `fdatasync` when someone waits for it (group commit),
//! so a thousand agents recording at once share writes and syncs instead of queueing
//! for a thousand, and a record costs no allocation of its own on its way to disk.
//!
//! What is durable when. A record is written within [`WRITE_DELAY`] of being made
//! (with the records made meanwhile; within [`COMMIT_DELAY`] when it is awaited:
//! the end of a call that could have had an effect is, before its agent goes on);
//! from then on it survives the death of the process (a crash, SIGKILL, the OOM
//! killer), being in the kernel's page cache. It survives a crash of the machine once
//! synced: a batch is synced when a record in it is awaited
//! ([`Journal::record_durably`]: the start of a tool call that could have an effect,
//! before the call runs, which syncs its model response before it as well) and when
//! the run ends ([`Journal::flush`]). So a crash of the process at any instant loses
//! at most the records of the last [`WRITE_DELAY`], the boundaries in progress: a
//! model response not yet written is asked for again, a call that can have no effect
//! is run again, and no call that could have one runs before its start is on disk.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;

use super::record::Record;

pub(crate) use super::file::JOURNAL_FILE;
use super::file::MAX_LINE_BYTES;

/// How long the writer lets a batch gather after its first record when someone waits
/// for it to be durable.
const COMMIT_DELAY: Duration = Duration::from_micros(500);

/// How long it lets a batch gather when nobody waits for it (an awaited record
/// arriving meanwhile cuts the wait to [`COMMIT_DELAY`]): fewer, larger writes, and
/// fewer wake-ups of the writer thread. What a crash can lose is a model response
/// (asked for again on resume) or the result of a call that could have no effect
/// (run again); the end of one that could is written at once.
const WRITE_DELAY: Duration = Duration::from_millis(50);

/// Bytes of buffer the writer keeps between batches (more only while a larger
/// batch is written).
const KEEP_BYTES: usize = 1 << 20;

/// What has gathered for the next write.
#[derive(Default)]
struct Batch {
    /// Serialized lines, newlines included.
    bytes: Vec<u8>,
    /// Told when the batch is written (and synced, when `sync`); while anyone
    /// waits, the writer waits [`COMMIT_DELAY`], not [`WRITE_DELAY`].
    waiters: Vec<oneshot::Sender<()>>,
    /// Whether someone waits for the batch to be on disk.
    sync: bool,
    /// Set when the batch got its first record or waiter.
    since: Option<Instant>,
    /// Set when a write failed: the run goes on, unjournaled from then on, and the
    /// failure is logged once.
    failed: bool,
    /// Set when the journal is dropped: the writer writes what is left and ends.
    closed: bool,
    /// Set when the run's end waits for the batch ([`Journal::flush`]): it is written
    /// at once, as nothing more is coming to share the write with.
    urgent: bool,
    /// Set, to the record's size, when a record was longer than a journal line may
    /// be: the batch ends with `journal_full` in its place, and nothing more is
    /// recorded.
    oversized: Option<usize>,
    /// Set while the writer sleeps until rung (nothing came while it lingered after
    /// its last write): the record that begins a batch rings it.
    idle: bool,
}

/// What a waiter waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Its batch written (within [`COMMIT_DELAY`]), not synced.
    Written,
    /// Its batch synced (within [`COMMIT_DELAY`]).
    Synced,
    /// Its batch synced at once: the run's end ([`Journal::flush`]).
    SyncedNow,
}

/// The batch and the writer's bell, shared by the journal and its writer thread.
#[derive(Default)]
struct Shared {
    batch: Mutex<Batch>,
    /// Rung when a batch begins while the writer is idle, when someone starts
    /// waiting, and on close.
    bell: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Batch> {
        self.batch
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The journal of one run, open for appending.
pub(crate) struct Journal {
    shared: Arc<Shared>,
    /// The writer thread, joined on drop.
    writer: Option<std::thread::JoinHandle<()>>,
    /// The journal file: readers of the run (the web view's transcripts) open it
    /// here, never at a path made from a recorded id.
    path: std::path::PathBuf,
    /// The longest line written ([`MAX_LINE_BYTES`]): a longer record ends the
    /// journal, since no reader would read past it.
    max_line: usize,
    /// The size bound, in MiB, that `journal_full` names.
    max_run_mib: u64,
}

impl Drop for Journal {
    /// Writes what is left (not synced) before the journal is gone.
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.bell.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Journal {
    /// Creates run `run_id`'s journal in `dir` (`dir/RUN_ID/journal.jsonl`), the
    /// directories 0700 and the file 0600; a journal of that id must not exist yet.
    pub(crate) fn create(dir: &Path, run_id: &str, max_bytes: u64) -> std::io::Result<Journal> {
        if !super::check::is_valid_id(run_id) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("`{run_id}` is not a run id"),
            ));
        }
        let run_dir = dir.join(run_id);
        super::file::create_dir(&run_dir)?;
        let path = run_dir.join(JOURNAL_FILE);
        let file = super::file::create_file(&path)?;
        // Held while the run's process lives, so no `warren resume` takes it over.
        lock(&file, &path)?;
        Journal::start(file, path, 0, max_bytes)
    }

    /// Continues the journal at `path`, open in `file` (for appending, locked, and
    /// read: `whole` is the size of its whole lines), first cutting a torn last line
    /// left by a crash.
    pub(super) fn append(
        file: File,
        path: &Path,
        whole: u64,
        max_bytes: u64,
    ) -> std::io::Result<Journal> {
        if whole < file.metadata()?.len() {
            file.set_len(whole)?;
            file.sync_data()?;
        }
        Journal::start(file, path.to_path_buf(), whole, max_bytes)
    }

    fn start(
        file: File,
        path: std::path::PathBuf,
        written: u64,
        max_bytes: u64,
    ) -> std::io::Result<Journal> {
        let shared = Arc::new(Shared::default());
        let writer_shared = shared.clone();
        let writer_path = path.clone();
        let writer = std::thread::Builder::new()
            .name("warren-journal".into())
            .spawn(move || {
                let mut out = Output {
                    file,
                    written,
                    max_bytes,
                };
                write_batches(&mut out, &writer_shared, &writer_path);
            })?;
        Ok(Journal {
            shared,
            writer: Some(writer),
            path,
            max_line: MAX_LINE_BYTES,
            max_run_mib: max_bytes / (1024 * 1024),
        })
    }

    /// The journal file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` with the next batch, without waiting.
    pub(crate) fn record(&self, record: Record) {
        self.send(Some(&record), None);
    }

    /// Appends `record` and waits until it is written (within [`COMMIT_DELAY`]),
    /// not synced: it survives the death of the process from then on.
    pub(crate) async fn record_written(&self, record: Record) {
        self.send_and_wait(Some(&record), Wait::Written).await;
    }

    /// Appends `record` and waits until it is on disk.
    pub(crate) async fn record_durably(&self, record: Record) {
        self.send_and_wait(Some(&record), Wait::Synced).await;
    }

    /// Waits until every record sent so far is written (not synced): a reader of
    /// the file sees them.
    pub(crate) async fn written(&self) {
        self.send_and_wait(None, Wait::Written).await;
    }

    /// Waits until every record sent so far is on disk, written at once rather than
    /// after [`COMMIT_DELAY`]: the run has ended, and nothing more is coming to share
    /// the write with (a worker runs each job as a run, whose end would otherwise
    /// wait for the delay).
    pub(crate) async fn flush(&self) {
        self.send_and_wait(None, Wait::SyncedNow).await;
    }

    /// Appends `record` (if any) and waits until its batch is as `wait` says.
    async fn send_and_wait(&self, record: Option<&Record>, wait: Wait) {
        let (done, written) = oneshot::channel();
        self.send(record, Some((done, wait)));
        let _ = written.await;
    }

    /// Adds `record` (if any) to the batch, and `waiter` to those told when it is as
    /// the waiter's [`Wait`] says; rings the writer when it is idle and the batch
    /// begins, or someone starts waiting on it, or the batch is due at once.
    fn send(&self, record: Option<&Record>, waiter: Option<(oneshot::Sender<()>, Wait)>) {
        let mut batch = self.shared.lock();
        if batch.failed || batch.oversized.is_some() {
            drop(batch);
            if let Some((waiter, _)) = waiter {
                let _ = waiter.send(());
            }
            return;
        }
        let began = batch.since.is_none();
        if began {
            batch.since = Some(Instant::now());
        }
        if let Some(record) = record {
            let start = batch.bytes.len();
            append_line(&mut batch.bytes, now_ms(), record);
            let len = batch.bytes.len() - start;
            if len > self.max_line {
                batch.bytes.truncate(start);
                let full = Record::JournalFull {
                    max_run_mib: self.max_run_mib,
                };
                append_line(&mut batch.bytes, now_ms(), &full);
                batch.oversized = Some(len);
                batch.sync = true;
            }
        }
        let hurried = match waiter {
            Some((waiter, wait)) => {
                batch.waiters.push(waiter);
                batch.sync |= wait != Wait::Written;
                batch.urgent |= wait == Wait::SyncedNow;
                batch.waiters.len() == 1 || wait == Wait::SyncedNow
            }
            None => false,
        };
        let ring = began && batch.idle || hurried;
        drop(batch);
        if ring {
            self.shared.bell.notify_one();
        }
    }
}

/// Takes the journal's lock (advisory, released when the file closes: when the
/// process ends, however it ends). Fails with `WouldBlock` while another process
/// holds it (the run is still going, or being resumed).
pub(super) fn lock(file: &File, path: &Path) -> std::io::Result<()> {
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
    /// Appends `bytes` (whole lines), synced when `sync`; past the size bound, the
    /// lines that fit, then the `journal_full` record, and fails with what happened.
    fn write(&mut self, bytes: &[u8], sync: bool) -> std::io::Result<()> {
        if self.written + bytes.len() as u64 > self.max_bytes {
            let room = self.max_bytes.saturating_sub(self.written) as usize;
            let fits = bytes[..room.min(bytes.len())]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |at| at + 1);
            let mib = self.max_bytes / (1024 * 1024);
            let mut last = bytes[..fits].to_vec();
            append_line(
                &mut last,
                now_ms(),
                &Record::JournalFull { max_run_mib: mib },
            );
            self.file.write_all(&last)?;
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

/// Appends one journal line to `out`, newline included: what a
/// [`Line`](super::record::Line) serializes to, written directly (`{"ts_ms":…,` then
/// the record's own fields) rather than through serde's `flatten`, which costs a map
/// serializer per record.
fn append_line(out: &mut Vec<u8>, ts_ms: u64, record: &Record) {
    write!(out, "{{\"ts_ms\":{ts_ms}").expect("writing to a Vec");
    let opening = out.len();
    serde_json::to_writer(&mut *out, record).expect("records serialize");
    // A record is an object with at least its `type`: its `{` becomes the comma
    // after `ts_ms`, so the line is built in place, with no copy.
    out[opening] = b',';
    out.push(b'\n');
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The writer thread. After each write it lingers for [`WRITE_DELAY`]: what arrives
/// meanwhile is the next batch, written when the linger ends, so under steady traffic
/// it wakes once per batch and nobody rings it. When nothing came it sleeps until
/// rung, then lets the new batch gather for [`WRITE_DELAY`] (a group-commit delay, as
/// databases have). A batch someone waits for is written [`COMMIT_DELAY`] after it
/// began, synced once when awaited durably, and everyone waiting on it told. Ends when
/// the journal is dropped, after writing what is left.
fn write_batches(out: &mut Output, shared: &Shared, path: &Path) {
    // The buffer being written, swapped with the one gathering: two buffers, each
    // grown to the largest batch, serve the whole run.
    let mut writing = Vec::new();
    let mut batch = shared.lock();
    loop {
        batch = gather(shared, batch, Instant::now());
        if batch.since.is_none() {
            batch.idle = true;
            while batch.since.is_none() && !batch.closed {
                batch = shared.bell.wait(batch).unwrap_or_else(|p| p.into_inner());
            }
            batch.idle = false;
            let Some(since) = batch.since else {
                return; // closed, with nothing left
            };
            batch = gather(shared, batch, since);
        }
        std::mem::swap(&mut writing, &mut batch.bytes);
        let waiters = std::mem::take(&mut batch.waiters);
        let sync = std::mem::take(&mut batch.sync);
        batch.since = None;
        batch.urgent = false;
        let failed = batch.failed;
        let oversized = batch.oversized;
        drop(batch);
        if !failed && (sync || !writing.is_empty()) {
            let written = out.write(&writing, sync).and_then(|()| match oversized {
                Some(len) => Err(std::io::Error::other(format!(
                    "a record of {len} bytes is longer than a journal line may be ({MAX_LINE_BYTES} bytes, journal::MAX_LINE_BYTES), so it ends there and cannot be resumed"
                ))),
                None => Ok(()),
            });
            if let Err(error) = written {
                shared.lock().failed = true;
                tracing::error!(
                    "cannot write the run journal {}: {error}; the run goes on without it",
                    path.display()
                );
            }
        }
        writing.clear();
        // A batch of one huge record leaves no huge buffer behind.
        writing.shrink_to(KEEP_BYTES);
        for waiter in waiters {
            let _ = waiter.send(());
        }
        batch = shared.lock();
    }
}

/// Waits until the batch is due: [`WRITE_DELAY`] after `start`, or [`COMMIT_DELAY`]
/// after it began once someone waits for it, or at once when the journal is closed or
/// the run's end waits for it.
fn gather<'a>(
    shared: &'a Shared,
    mut batch: MutexGuard<'a, Batch>,
    start: Instant,
) -> MutexGuard<'a, Batch> {
    loop {
        let due = match batch.since {
            Some(since) if !batch.waiters.is_empty() => since + COMMIT_DELAY,
            _ => start + WRITE_DELAY,
        };
        let left = due.saturating_duration_since(Instant::now());
        if left.is_zero() || batch.closed || batch.urgent {
            return batch;
        }
        batch = shared
            .bell
            .wait_timeout(batch, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
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
                figures: crate::sandbox::CallFigures {
                    fuel_used: Some(u64::MAX),
                    output_bytes: 2,
                    memory_peak_bytes: Some(u64::MAX),
                },
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
            let mut bytes = b"earlier\n".to_vec();
            append_line(&mut bytes, 42, &record);
            let line = bytes.strip_prefix(b"earlier\n").unwrap();
            assert!(line.ends_with(b"}\n"));
            let line: Line = serde_json::from_slice(line).unwrap();
            assert_eq!(line, Line { ts_ms: 42, record });
        }
    }

    fn started(agent: &str) -> Record {
        Record::AgentStarted {
            agent: agent.into(),
        }
    }

    fn agents_in(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| {
                let line: Line = serde_json::from_str(line).unwrap();
                line.record.agent().unwrap().to_string()
            })
            .collect()
    }

    #[tokio::test]
    async fn an_awaited_record_is_in_the_file_with_every_record_before_it_when_the_wait_ends() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::create(dir.path(), "r", u64::MAX).unwrap();
        let path = dir.path().join("r").join(JOURNAL_FILE);
        journal.record(started("a"));
        journal.record(started("b"));
        journal.record_written(started("c")).await;
        assert_eq!(agents_in(&path), ["a", "b", "c"]);
        journal.record(started("d"));
        journal.record_durably(started("e")).await;
        assert_eq!(agents_in(&path), ["a", "b", "c", "d", "e"]);
        journal.record(started("f"));
        journal.flush().await;
        assert_eq!(agents_in(&path), ["a", "b", "c", "d", "e", "f"]);
    }

    #[tokio::test]
    async fn a_record_nobody_waits_for_is_written_by_itself_and_dropping_writes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::create(dir.path(), "r", u64::MAX).unwrap();
        let path = dir.path().join("r").join(JOURNAL_FILE);
        // Once after a batch the writer lingers, once it is idle and rung.
        for (round, agent) in ["a", "b"].into_iter().enumerate() {
            journal.record(started(agent));
            let deadline = Instant::now() + Duration::from_secs(10);
            while agents_in(&path).len() <= round {
                assert!(Instant::now() < deadline, "`{agent}` was never written");
                std::thread::sleep(WRITE_DELAY);
            }
            std::thread::sleep(WRITE_DELAY * 3);
        }
        journal.record(started("c"));
        drop(journal);
        assert_eq!(agents_in(&path), ["a", "b", "c"]);
    }

    /// Every line of the journal file at `path`, parsed.
    fn written_lines(path: &std::path::Path) -> Vec<Line> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_record_longer_than_a_line_may_be_ends_the_journal_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = Journal::create(dir.path(), "r", 3 << 20).unwrap();
        journal.max_line = 100;
        let path = dir.path().join("r").join(JOURNAL_FILE);
        journal.record(started("a"));
        journal.record_written(started(&"b".repeat(200))).await;
        journal.record_written(started("c")).await;
        let lines = written_lines(&path);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0].record, started("a"));
        assert_eq!(lines[1].record, Record::JournalFull { max_run_mib: 3 });
    }

    #[tokio::test]
    async fn past_its_size_bound_the_journal_says_so_and_takes_no_more() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::create(dir.path(), "r", 100).unwrap();
        let path = dir.path().join("r").join(JOURNAL_FILE);
        // One batch: the lines that fit are written, then the bound's record.
        journal.record(started("a"));
        journal.record(started("b"));
        journal.record_written(started("c")).await;
        journal.record_written(started("d")).await;
        let lines = written_lines(&path);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0].record, started("a"));
        assert_eq!(lines[1].record, Record::JournalFull { max_run_mib: 0 });
    }
}
