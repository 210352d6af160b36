//! Journal files on disk: created owner-only (directories 0700, files 0600), opened
//! without following a symlink and only when a regular file, and read as a stream of
//! lines within bounds. So a journal torn by a crash, planted by another user, or
//! huge and sparse costs a reader at most a line's bound, and is never changed
//! before it is known to be a journal of the user's own.
//!
//! Who may read a journal: the user who owns it and its run directory. A journal or
//! run directory another user owns is refused for `warren resume` (it would run with
//! the reader's grants what someone else wrote) and read with a warning naming the
//! owner everywhere else.

use std::fs::File;
use std::io::{BufRead as _, BufReader, Read as _, Seek as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// The file of a run's journal inside its directory.
pub(crate) const JOURNAL_FILE: &str = "journal.jsonl";

/// The longest journal line read, in bytes: past it the journal is refused naming
/// the line, before more of it is held. Tool results are bounded by their
/// `max_output_kb` and model responses by `max_response_mib` (64 MiB by default),
/// so only a configuration raising those past this makes such a record, and the
/// writer ends the journal with `journal_full` in its place rather than write it.
pub(crate) const MAX_LINE_BYTES: usize = 128 << 20;

/// The largest journal read whole (`show`, `replay`, `diff`, the view), in bytes:
/// the default `[journal] max_run_mib`. A larger file is refused by its size before
/// any of it is read, and reading stops at this many bytes whatever the size said.
pub(crate) const MAX_JOURNAL_BYTES: u64 = 1 << 30;

/// The longest first line (`run_started`, the root's task whole) read when runs are
/// listed or `last` is looked for, in bytes: a worker's task is at most 4 MiB of job
/// data.
pub(crate) const MAX_HEAD_BYTES: usize = 8 << 20;

/// Journals up to this many bytes are listed from every record (`warren runs`, the
/// web view's list); a larger one from its first line and its last
/// [`LIST_TAIL_BYTES`], its agents and tokens then unknown.
pub(crate) const LIST_SCAN_BYTES: u64 = 4 << 20;

/// How much of the end of a large journal is read to list it, in bytes.
pub(crate) const LIST_TAIL_BYTES: u64 = 1 << 20;

/// Creates `dir` and every missing directory above it, owner-only (0700): what the
/// agents read and were told goes into journals.
pub(crate) fn create_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Creates the journal file `path`, owner-only (0600); it must not exist, and a
/// symlink in its place is not followed.
pub(crate) fn create_file(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Writes `bytes` to `path`, a file kept beside a journal (an ended MCP task),
/// owner-only (0600) like the journal; a symlink in its place is not followed.
pub(crate) fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?
        .write_all(bytes)
}

/// A journal file opened to read, or to continue.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The file.
    pub(crate) file: File,
    /// Its size when opened.
    pub(crate) len: u64,
    /// The path and owner of the journal or run directory another user owns, when
    /// one does.
    pub(crate) foreign: Option<(PathBuf, u32)>,
}

impl Opened {
    /// Refuses a journal another user owns, for `action`.
    pub(crate) fn own(&self, action: &str) -> anyhow::Result<()> {
        match &self.foreign {
            Some((path, uid)) => anyhow::bail!(
                "{} is owned by uid {uid}, not by you (uid {}): warren does not {action} a run another user wrote",
                path.display(),
                rustix::process::geteuid().as_raw()
            ),
            None => Ok(()),
        }
    }

    /// Warns, once, that what follows was written by another user.
    pub(crate) fn warn_if_foreign(&self) {
        if let Some((path, uid)) = &self.foreign {
            tracing::warn!(
                "{} is owned by uid {uid}, not by you: what it shows was written by another user",
                path.display()
            );
        }
    }
}

/// Opens the journal at `path` without following a symlink (`append`: to continue
/// it); it must be a regular file. Its owner and its run directory's are checked
/// against the user's, not enforced: see [`Opened::own`].
pub(crate) fn open(path: &Path, append: bool) -> anyhow::Result<Opened> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(append)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => anyhow::anyhow!(
                "{} is a symlink: a journal is read where it is, never through a link",
                path.display()
            ),
            _ => anyhow::anyhow!("cannot open the journal {}: {error}", path.display()),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    anyhow::ensure!(
        meta.file_type().is_file(),
        "{} is not a regular file, so not a journal",
        path.display()
    );
    let me = rustix::process::geteuid().as_raw();
    let mut foreign = (meta.uid() != me).then(|| (path.to_path_buf(), meta.uid()));
    if let Some(run_dir) = path
        .parent()
        .filter(|_| path.file_name().is_some_and(|name| name == JOURNAL_FILE))
    {
        if let Ok(dir) = std::fs::symlink_metadata(run_dir) {
            if dir.uid() != me && foreign.is_none() {
                foreign = Some((run_dir.to_path_buf(), dir.uid()));
            }
        }
    }
    Ok(Opened {
        file,
        len: meta.len(),
        foreign,
    })
}

/// One line of a journal: its 1-based number, its text, and whether a newline ended
/// it (a last line without one may be a write the crash cut short).
#[derive(Debug)]
pub(crate) struct RawLine {
    /// 1-based.
    pub(crate) number: usize,
    /// The line, without its newline.
    pub(crate) text: String,
    /// Whether a newline followed it.
    pub(crate) ended: bool,
}

/// The lines of a journal, read as a stream: split as bytes, each decoded by itself,
/// at most [`MAX_LINE_BYTES`] each and `max_bytes` in all. A last line that is not
/// UTF-8 and has no newline after it (a crash cut inside a character) is left out.
pub(crate) struct Lines {
    reader: BufReader<std::io::Take<File>>,
    path: PathBuf,
    number: usize,
    max_line: usize,
    max_bytes: u64,
    read: u64,
    /// Bytes read up to the end of the last line that ended with a newline.
    whole: u64,
}

impl Lines {
    /// The lines of `file` (the journal at `path`) from where it stands.
    pub(crate) fn new(file: File, path: &Path, max_line: usize, max_bytes: u64) -> Lines {
        Lines {
            reader: BufReader::with_capacity(64 << 10, file.take(max_bytes.saturating_add(1))),
            path: path.to_path_buf(),
            number: 0,
            max_line,
            max_bytes,
            read: 0,
            whole: 0,
        }
    }

    /// The lines of the journal `opened` at `path`, refused up front when it is
    /// larger than [`MAX_JOURNAL_BYTES`].
    pub(crate) fn whole(opened: Opened, path: &Path) -> anyhow::Result<Lines> {
        anyhow::ensure!(
            opened.len <= MAX_JOURNAL_BYTES,
            "{} is {} bytes: warren reads journals of at most {} MiB (journal::MAX_JOURNAL_BYTES)",
            path.display(),
            opened.len,
            MAX_JOURNAL_BYTES >> 20
        );
        Ok(Lines::new(
            opened.file,
            path,
            MAX_LINE_BYTES,
            MAX_JOURNAL_BYTES,
        ))
    }

    /// Bytes from where reading began to the end of the last whole line read: where
    /// a torn last line begins.
    pub(crate) fn whole_bytes(&self) -> u64 {
        self.whole
    }

    /// Skips what is left of a line begun before where reading began (after a seek
    /// into the middle of one), undecoded.
    fn skip_partial(&mut self) -> anyhow::Result<()> {
        loop {
            let chunk = self.reader.fill_buf()?;
            if chunk.is_empty() {
                return Ok(());
            }
            let (used, ended) = match chunk.iter().position(|b| *b == b'\n') {
                Some(at) => (at + 1, true),
                None => (chunk.len(), false),
            };
            self.reader.consume(used);
            self.read += used as u64;
            if ended {
                return Ok(());
            }
        }
    }

    fn next_line(&mut self) -> anyhow::Result<Option<RawLine>> {
        let mut bytes = Vec::new();
        let ended = loop {
            let chunk = self.reader.fill_buf().map_err(|e| {
                anyhow::anyhow!("cannot read the journal {}: {e}", self.path.display())
            })?;
            if chunk.is_empty() {
                break false;
            }
            let (take, ended) = match chunk.iter().position(|b| *b == b'\n') {
                Some(at) => (at, true),
                None => (chunk.len(), false),
            };
            anyhow::ensure!(
                bytes.len() + take <= self.max_line,
                "{}:{}: a line longer than {} bytes: not a journal warren reads",
                self.path.display(),
                self.number + 1,
                self.max_line
            );
            bytes.extend_from_slice(&chunk[..take]);
            let used = take + usize::from(ended);
            self.reader.consume(used);
            self.read += used as u64;
            anyhow::ensure!(
                self.read <= self.max_bytes,
                "{}: longer than {} bytes: not a journal warren reads whole",
                self.path.display(),
                self.max_bytes
            );
            if ended {
                self.whole = self.read;
                break true;
            }
        };
        if bytes.is_empty() && !ended {
            return Ok(None);
        }
        self.number += 1;
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            // A crash cut the last write inside a character.
            Err(_) if !ended => return Ok(None),
            Err(error) => anyhow::bail!(
                "{}:{}: not UTF-8 ({error})",
                self.path.display(),
                self.number
            ),
        };
        Ok(Some(RawLine {
            number: self.number,
            text,
            ended,
        }))
    }
}

impl Iterator for Lines {
    type Item = anyhow::Result<RawLine>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_line().transpose()
    }
}

/// The first line of the journal at `path` (at most [`MAX_HEAD_BYTES`]), and the
/// whole lines of its last `tail` bytes after it (numbered from the window's start,
/// since their place in the file is not known).
pub(crate) fn head_and_tail(
    opened: Opened,
    path: &Path,
    tail: u64,
) -> anyhow::Result<(Option<RawLine>, Vec<RawLine>)> {
    let len = opened.len;
    let mut file = opened.file;
    let mut head_reader = Lines::new(
        file.try_clone()?,
        path,
        MAX_HEAD_BYTES,
        MAX_HEAD_BYTES as u64 + 1,
    );
    let head = head_reader.next_line()?;
    let head_len = head_reader.read;
    let from = len.saturating_sub(tail).max(head_len);
    if from >= len {
        return Ok((head, Vec::new()));
    }
    // From the byte before the window: the window may begin inside a line, whose
    // rest is not a record (and when that byte ends a line, only it is skipped).
    let cut = from > head_len;
    file.seek(std::io::SeekFrom::Start(from - u64::from(cut)))?;
    let mut lines = Lines::new(file, path, tail as usize, tail + 1);
    if cut {
        lines.skip_partial()?;
    }
    let found = lines.collect::<anyhow::Result<Vec<_>>>()?;
    Ok((head, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_window_gives_the_whole_lines_after_the_head_wherever_it_begins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        std::fs::write(&path, "head\naaaa\nbbbb\ncccc\n").unwrap();
        for (tail, expected) in [
            (5, &["cccc"][..]),
            (6, &["cccc"]),
            (10, &["bbbb", "cccc"]),
            (14, &["bbbb", "cccc"]),
            (15, &["aaaa", "bbbb", "cccc"]),
            (100, &["aaaa", "bbbb", "cccc"]),
        ] {
            let (head, lines) = head_and_tail(open(&path, false).unwrap(), &path, tail).unwrap();
            assert_eq!(head.unwrap().text, "head");
            let texts: Vec<String> = lines.into_iter().map(|line| line.text).collect();
            assert_eq!(texts, expected, "the last {tail} bytes");
        }
    }

    #[test]
    fn a_line_past_its_bound_is_refused_before_more_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        std::fs::write(&path, format!("ok\n{}\n", "x".repeat(100))).unwrap();
        let opened = open(&path, false).unwrap();
        let mut lines = Lines::new(opened.file, &path, 64, 1 << 20);
        assert_eq!(lines.next().unwrap().unwrap().text, "ok");
        let error = lines.next().unwrap().unwrap_err().to_string();
        assert!(
            error.contains("run.jsonl:2: a line longer than 64 bytes"),
            "{error}"
        );
    }
}
