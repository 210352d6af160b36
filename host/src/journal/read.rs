//! Reading journals back: a run's records, streamed line by line within bounds and
//! each checked (a torn last line, left by a crash in the middle of a write, is
//! ignored), the tree they describe, every run in a directory newest first (a large
//! journal listed from its ends), and a run named by its id, a unique prefix of it,
//! or `last`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use super::check::{self, TreeCheck};
use super::file::{self, Lines, LIST_SCAN_BYTES, LIST_TAIL_BYTES, MAX_HEAD_BYTES};
use super::record::{Line, Record, RecordedLimits, VERSION};
use super::writer::JOURNAL_FILE;
use crate::events::Answered;
use crate::outcome::AgentState;

/// One agent of a journaled run, as far as its records go.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct AgentRecord {
    /// Its id.
    pub id: String,
    /// Who spawned it.
    pub parent: Option<String>,
    /// Its profile.
    pub profile: String,
    /// Its parent's label for it.
    pub label: Option<String>,
    /// Its task.
    pub task: String,
    /// `queued`, `running`, or how it ended; `interrupted` when the run's process
    /// died before it ended.
    pub state: String,
    /// Model turns recorded.
    pub turns: u32,
    /// Tokens recorded (prompt and generated).
    pub tokens: u64,
    /// Dollars recorded.
    pub cost_usd: f64,
    /// Its answer (or last text).
    pub text: String,
    /// Why it did not end well.
    pub error: Option<String>,
    /// Wall time, when it ended.
    pub duration_ms: Option<u64>,
    /// Tool calls that ended.
    pub tool_calls: u32,
    /// Of those, the ones the sandbox denied.
    pub denials: u32,
}

/// A journaled run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RunRecord {
    /// The run's id.
    pub id: String,
    /// When it started (milliseconds since the Unix epoch).
    pub started_ms: u64,
    /// When its last record was written.
    pub last_ms: u64,
    /// The root's task.
    pub task: String,
    /// The root's profile.
    pub profile: String,
    /// How the root ended, or `running` (still being written, or its process died:
    /// see [`RunRecord::finished`]).
    pub state: String,
    /// Whether the run's end was recorded.
    pub finished: bool,
    /// Dollars spent by the whole tree, as recorded.
    pub cost_usd: f64,
    /// The run's limits (budget, concurrency, depth), as last recorded: at its
    /// start, or at its last resume. `None` in journals from before they were.
    pub limits: Option<RecordedLimits>,
    /// Every agent, in the order they were registered (the root first); none when
    /// not [`counted`](RunRecord::counted).
    pub agents: Vec<AgentRecord>,
    /// Whether every record was read, so its agents and tokens are known: false for
    /// a journal listed from its ends (larger than [`LIST_SCAN_BYTES`]).
    pub counted: bool,
    /// The journal file.
    pub path: PathBuf,
    /// When the run is a fork: the run and agent it was forked from.
    pub forked_from: Option<super::record::ForkedFrom>,
}

impl RunRecord {
    /// Tokens of every agent.
    pub(crate) fn tokens(&self) -> u64 {
        self.agents.iter().map(|a| a.tokens).sum()
    }

    /// The run in one JSON object, as `warren runs --json` lists it.
    pub(crate) fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "run_id": self.id,
            "started_ms": self.started_ms,
            "started_utc": super::time::utc_text(self.started_ms),
            "last_ms": self.last_ms,
            "task": self.task,
            "profile": self.profile,
            "state": self.state,
            "finished": self.finished,
            "agents": self.counted.then_some(self.agents.len()),
            "tokens": self.counted.then(|| self.tokens()),
            "cost_usd": self.cost_usd,
            "budget_usd": self.limits.and_then(|l| l.budget_usd),
            "max_concurrent": self.limits.map(|l| l.max_concurrent),
            "journal": self.path.display().to_string(),
            "forked_from": self.forked_from,
        })
    }
}

/// The records of the journal at `path`, in order, each checked (ids, figures, the
/// tree: see `journal::check`). A last line with no newline after it that does not parse (torn
/// by a crash, even inside a character) is left out; any other bad line is an error
/// naming it. A journal another user owns is read with a warning.
pub(crate) fn records(path: &Path) -> anyhow::Result<Vec<Line>> {
    let mut records = Vec::new();
    each_record(path, |line| {
        records.push(line);
        Ok(())
    })?;
    Ok(records)
}

/// Hands each record of the journal at `path` to `each`, in order, as it is read:
/// what [`records`] reads, without holding every record at once.
pub(crate) fn each_record(
    path: &Path,
    each: impl FnMut(Line) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let opened = file::open(path, false)?;
    warn_once(&opened);
    read_lines(Lines::whole(opened, path)?, path, each).map(|_| ())
}

/// The records of the journal `opened` at `path` (a run to resume: its owner is
/// checked by the caller), and the bytes of its whole lines (where a torn last
/// line begins).
pub(super) fn records_to_resume(
    opened: file::Opened,
    path: &Path,
) -> anyhow::Result<(Vec<Line>, u64)> {
    let mut records = Vec::new();
    let whole = read_lines(Lines::whole(opened, path)?, path, |line| {
        records.push(line);
        Ok(())
    })?;
    Ok((records, whole))
}

/// Parses and checks each of `lines`, handing the records to `each`; returns the
/// bytes of the whole lines.
fn read_lines(
    mut lines: Lines,
    path: &Path,
    mut each: impl FnMut(Line) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut tree = TreeCheck::default();
    let mut first = true;
    for raw in &mut lines {
        let raw = raw?;
        if raw.text.trim().is_empty() {
            continue;
        }
        let line = match serde_json::from_str::<Line>(&raw.text) {
            Ok(line) => line,
            // The last line, with no newline after it: a write the crash cut short.
            Err(_) if !raw.ended => continue,
            Err(error) => anyhow::bail!(
                "{}:{}: not a journal record: {error}",
                path.display(),
                raw.number
            ),
        };
        if first {
            first = false;
            check_head(&line, path)?;
        }
        tree.check(&line.record).map_err(|error| {
            anyhow::anyhow!(
                "{}:{}: an unreadable record: {error}",
                path.display(),
                raw.number
            )
        })?;
        each(line)?;
    }
    anyhow::ensure!(
        !first,
        "{}: does not start with run_started",
        path.display()
    );
    Ok(lines.whole_bytes())
}

/// The first record must be `run_started`, of a format this warren reads.
fn check_head(line: &Line, path: &Path) -> anyhow::Result<()> {
    match &line.record {
        Record::RunStarted { v, .. } if *v <= VERSION => Ok(()),
        Record::RunStarted { v, .. } => anyhow::bail!(
            "{}: journal format {v} is newer than this warren reads ({VERSION}); use a newer warren",
            path.display()
        ),
        _ => anyhow::bail!("{}: does not start with run_started", path.display()),
    }
}

/// Warns that the journal `opened` belongs to another user, once per journal and
/// process (a command may read one journal twice).
fn warn_once(opened: &file::Opened) {
    static WARNED: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
    if let Some((path, _)) = &opened.foreign {
        let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
        if warned.insert(path.clone()) {
            opened.warn_if_foreign();
        }
    }
}

/// The run the journal at `path` describes, its records folded as they are read.
pub(crate) fn run(path: &Path) -> anyhow::Result<RunRecord> {
    let mut fold = Fold::default();
    each_record(path, |line| {
        fold.add(line);
        Ok(())
    })?;
    Ok(fold.finish(path))
}

/// A run as its records so far describe it.
#[derive(Default)]
struct Fold {
    /// The run's start: its time and record.
    head: Option<(u64, Record)>,
    agents: BTreeMap<String, AgentRecord>,
    order: Vec<String>,
    finished: Option<(AgentState, f64)>,
    limits: Option<RecordedLimits>,
    last_ms: u64,
}

impl Fold {
    fn add(&mut self, line: Line) {
        self.last_ms = self.last_ms.max(line.ts_ms);
        match line.record {
            record @ Record::RunStarted { .. } if self.head.is_none() => {
                if let Record::RunStarted { limits, .. } = &record {
                    self.limits = *limits;
                }
                self.head = Some((line.ts_ms, record));
            }
            Record::AgentQueued(intro) => {
                if self.agents.contains_key(&intro.agent) {
                    return;
                }
                self.order.push(intro.agent.clone());
                self.agents.insert(
                    intro.agent.clone(),
                    AgentRecord {
                        id: intro.agent,
                        parent: intro.parent,
                        profile: intro.profile,
                        label: intro.label,
                        task: intro.task,
                        state: "queued".into(),
                        ..AgentRecord::default()
                    },
                );
            }
            Record::RunFinished { state, cost_usd } => self.finished = Some((state, cost_usd)),
            Record::RunResumed {
                limits: Some(resumed),
                ..
            } => self.limits = Some(resumed),
            record => update_agent(&mut self.agents, &record),
        }
    }

    fn finish(mut self, path: &Path) -> RunRecord {
        let Some((
            started_ms,
            Record::RunStarted {
                run,
                task,
                profile,
                forked_from,
                ..
            },
        )) = self.head.take()
        else {
            unreachable!("every journal read starts with run_started");
        };
        let order = std::mem::take(&mut self.order);
        let mut agents: Vec<AgentRecord> = order
            .iter()
            .filter_map(|id| self.agents.remove(id))
            .collect();
        if self.finished.is_none() {
            // Not ended: still being written, or its process died. An agent left running
            // or queued in a finished run was ended with it.
            for agent in &mut agents {
                if agent.state == "running" || agent.state == "queued" {
                    agent.state = "interrupted".into();
                }
            }
        }
        let root_state = agents.first().map(|a| a.state.clone()).unwrap_or_default();
        let cost_usd = match self.finished {
            Some((_, cost)) => cost,
            None => agents.iter().map(|a| a.cost_usd).sum(),
        };
        RunRecord {
            id: run,
            started_ms,
            last_ms: self.last_ms.max(started_ms),
            task,
            profile,
            state: match self.finished {
                Some((state, _)) => state.as_str().into(),
                None => root_state,
            },
            finished: self.finished.is_some(),
            cost_usd,
            limits: self.limits,
            agents,
            counted: true,
            path: path.to_path_buf(),
            forked_from,
        }
    }
}

/// `record`'s change to the agent it concerns, in `agents` (none for a record of the
/// run, or of an agent `agents` does not hold).
fn update_agent(agents: &mut BTreeMap<String, AgentRecord>, record: &Record) {
    match record {
        Record::AgentStarted { agent } => {
            if let Some(a) = agents.get_mut(agent) {
                a.state = "running".into();
            }
        }
        Record::ModelResponse {
            agent,
            turn,
            text,
            input_tokens,
            output_tokens,
            cost_usd,
            ..
        } => {
            if let Some(a) = agents.get_mut(agent) {
                a.turns = *turn;
                a.tokens += input_tokens + output_tokens;
                a.cost_usd += cost_usd;
                a.text = text.clone();
            }
        }
        Record::AgentFinished { agent, .. } => {
            if let (Some(a), Some((_, ended))) = (agents.get_mut(agent), record.finished()) {
                a.state = ended.state.as_str().into();
                a.text = ended.text;
                a.error = ended.error;
                a.turns = ended.turns;
                a.tokens = ended.usage.input_tokens + ended.usage.output_tokens;
                a.cost_usd = ended.cost_usd;
                a.duration_ms = Some(ended.duration.as_millis() as u64);
            }
        }
        Record::InputRequested(request) => {
            if let Some(a) = agents.get_mut(&request.agent) {
                a.state = request.kind.waiting_state().into();
            }
        }
        Record::InputAnswered(Answered { agent, .. }) => {
            if let Some(a) = agents.get_mut(agent) {
                a.state = "running".into();
            }
        }
        Record::RunStarted { .. }
        | Record::RunResumed { .. }
        | Record::RunFinished { .. }
        | Record::AgentQueued(_)
        | Record::ToolSet { .. }
        | Record::SystemPrompt { .. }
        | Record::JournalFull { .. }
        | Record::AgentSpec { .. }
        | Record::MessageSent { .. }
        | Record::MessageDelivered { .. }
        | Record::ToolStarted { .. } => {}
        Record::ToolFinished {
            agent,
            outcome,
            content,
            ..
        } => {
            if let Some(a) = agents.get_mut(agent) {
                a.tool_calls += 1;
                if outcome.is_denial(content) {
                    a.denials += 1;
                }
            }
        }
    }
}

/// The journals in `dir`, each with its run's id (its directory's name): one in each
/// directory that is not a symlink (the journal itself is checked when opened).
fn journals(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| {
            let id = entry.file_name().to_string_lossy().into_owned();
            (id, entry.path().join(JOURNAL_FILE))
        })
        .filter(|(_, path)| std::fs::symlink_metadata(path).is_ok())
        .collect()
}

/// Every run journaled in `dir`, newest first. A journal that cannot be read is
/// reported in the second list, not fatal. A journal of up to [`LIST_SCAN_BYTES`] is
/// read whole; a larger one only from its first line and its last
/// [`LIST_TAIL_BYTES`] ([`RunRecord::counted`] false).
pub(crate) fn runs(dir: &Path) -> (Vec<RunRecord>, Vec<String>) {
    let mut runs = Vec::new();
    let mut problems = Vec::new();
    for (_, path) in journals(dir) {
        match listed(&path) {
            Ok(record) => runs.push(record),
            Err(error) => problems.push(format!("{error:#}")),
        }
    }
    runs.sort_by(|a, b| b.started_ms.cmp(&a.started_ms).then(b.id.cmp(&a.id)));
    (runs, problems)
}

/// The run of the journal at `path` as the list shows it.
fn listed(path: &Path) -> anyhow::Result<RunRecord> {
    let opened = file::open(path, false)?;
    if opened.len <= LIST_SCAN_BYTES {
        return run(path);
    }
    warn_once(&opened);
    let (head, tail) = file::head_and_tail(opened, path, LIST_TAIL_BYTES)?;
    let head = match head {
        Some(raw) if raw.ended => serde_json::from_str::<Line>(&raw.text)
            .map_err(|e| anyhow::anyhow!("{}:1: not a journal record: {e}", path.display()))?,
        _ => anyhow::bail!("{}: does not start with run_started", path.display()),
    };
    check_head(&head, path)?;
    let unreadable =
        |error: String| anyhow::anyhow!("{}: an unreadable record: {error}", path.display());
    check::record(&head.record).map_err(unreadable)?;
    let mut fold = Fold::default();
    fold.add(head);
    for raw in tail {
        let line = match serde_json::from_str::<Line>(&raw.text) {
            Ok(line) => line,
            Err(_) if !raw.ended => continue,
            Err(error) => anyhow::bail!(
                "{}: a line near its end is not a journal record: {error}",
                path.display()
            ),
        };
        // Only ids and figures: the agents, and so the tree, are not read here.
        check::record(&line.record).map_err(unreadable)?;
        match line.record {
            Record::RunFinished { .. } | Record::RunResumed { .. } => fold.add(line),
            _ => fold.last_ms = fold.last_ms.max(line.ts_ms),
        }
    }
    let mut record = fold.finish(path);
    record.counted = false;
    if !record.finished {
        record.state = "interrupted".into();
    }
    Ok(record)
}

/// When the run of the journal at `path` started: its first line's time, read
/// without reading the rest (at most [`MAX_HEAD_BYTES`]).
fn started_ms(path: &Path) -> Option<u64> {
    let opened = file::open(path, false).ok()?;
    let mut lines = Lines::new(opened.file, path, MAX_HEAD_BYTES, MAX_HEAD_BYTES as u64 + 1);
    let first = lines.next()?.ok()?;
    serde_json::from_str::<Line>(&first.text)
        .ok()
        .map(|line| line.ts_ms)
}

/// The journal of the run `name` names in `dir`: its id, a unique prefix of it, or
/// `last` (the newest). Runs are found by their directories' names; only `last`
/// reads anything, each journal's first line.
pub(crate) fn find(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let mut journals = journals(dir);
    if journals.is_empty() {
        anyhow::bail!("no runs are journaled in {}", dir.display());
    }
    if name == "last" {
        journals.sort_by_key(|(id, path)| (started_ms(path), id.clone()));
        return Ok(journals.pop().expect("not empty").1);
    }
    journals.retain(|(id, _)| id.starts_with(name));
    journals.sort();
    match journals.as_slice() {
        [(_, path)] => Ok(path.clone()),
        [] => anyhow::bail!(
            "no run `{name}` in {} (`warren runs` lists them)",
            dir.display()
        ),
        many => anyhow::bail!(
            "`{name}` names {} runs ({}): give more of the id",
            many.len(),
            many.iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(lines: &[&str]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        std::fs::write(&path, lines.join("\n")).unwrap();
        (dir, path)
    }

    const START: &str = r#"{"ts_ms":1,"type":"run_started","v":1,"run":"r1","task":"t","profile":"main","warren":"0","config":"c","config_sha256":"00"}"#;
    const QUEUED: &str = r#"{"ts_ms":2,"type":"agent_queued","agent":"a","parent":null,"profile":"main","task":"t"}"#;

    #[test]
    fn only_a_torn_last_line_is_forgiven() {
        let (_dir, path) = journal(&[START, QUEUED, r#"{"ts_ms":3,"type":"agent_st"#]);
        let run = run(&path).unwrap();
        assert_eq!(run.agents.len(), 1);
        assert_eq!(run.agents[0].state, "interrupted");
        let (_dir, path) = journal(&[START, r#"{"ts_ms":3,"type":"agent_st"#, QUEUED, ""]);
        let error = run_error(&path);
        assert!(error.contains(":2: not a journal record"), "{error}");
    }

    #[test]
    fn a_newer_format_or_a_headless_file_is_refused() {
        let newer = START.replace("\"v\":1", "\"v\":99");
        let (_dir, path) = journal(&[&newer, QUEUED]);
        assert!(run_error(&path).contains("journal format 99 is newer"));
        let (_dir, path) = journal(&[QUEUED]);
        assert!(run_error(&path).contains("does not start with run_started"));
    }

    fn run_error(path: &Path) -> String {
        format!("{:#}", run(path).unwrap_err())
    }
}
