//! Reading journals back: a run's records (a torn last line, left by a crash in the
//! middle of a write, is ignored), the tree they describe, every run in a directory
//! newest first, and a run named by its id, a unique prefix of it, or `last`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::record::{Line, Record, RecordedLimits, VERSION};
use super::writer::JOURNAL_FILE;

/// One agent of a journaled run, as far as its records go.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AgentRecord {
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
pub struct RunRecord {
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
    /// Every agent, in the order they were registered (the root first).
    pub agents: Vec<AgentRecord>,
    /// The journal file.
    pub path: PathBuf,
    /// When the run is a fork: the run and agent it was forked from.
    pub forked_from: Option<super::record::ForkedFrom>,
}

impl RunRecord {
    /// Tokens of every agent.
    pub fn tokens(&self) -> u64 {
        self.agents.iter().map(|a| a.tokens).sum()
    }

    /// The run in one JSON object, as `warren runs --json` lists it.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "run_id": self.id,
            "started_ms": self.started_ms,
            "last_ms": self.last_ms,
            "task": self.task,
            "profile": self.profile,
            "state": self.state,
            "finished": self.finished,
            "agents": self.agents.len(),
            "tokens": self.tokens(),
            "cost_usd": self.cost_usd,
            "budget_usd": self.limits.and_then(|l| l.budget_usd),
            "max_concurrent": self.limits.map(|l| l.max_concurrent),
            "journal": self.path.display().to_string(),
            "forked_from": self.forked_from,
        })
    }
}

/// The records of the journal at `path`, in order. A last line that does not parse
/// (torn by a crash) is left out; any other bad line is an error naming it.
pub fn records(path: &Path) -> anyhow::Result<Vec<Line>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the journal {}: {e}", path.display()))?;
    let lines: Vec<&str> = text.split('\n').collect();
    let mut records = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(line) {
            Ok(record) => records.push(record),
            // The last line, with no newline after it: a write the crash cut short.
            Err(_) if index + 1 == lines.len() => {}
            Err(error) => anyhow::bail!(
                "{}:{}: not a journal record: {error}",
                path.display(),
                index + 1
            ),
        }
    }
    match records.first() {
        Some(Line {
            record: Record::RunStarted { v, .. },
            ..
        }) if *v <= VERSION => Ok(records),
        Some(Line {
            record: Record::RunStarted { v, .. },
            ..
        }) => anyhow::bail!(
            "{}: journal format {v} is newer than this warren reads ({VERSION}); use a newer warren",
            path.display()
        ),
        _ => anyhow::bail!("{}: does not start with run_started", path.display()),
    }
}

/// The run the journal at `path` describes.
pub fn run(path: &Path) -> anyhow::Result<RunRecord> {
    let lines = records(path)?;
    let Some(Line {
        ts_ms: started_ms,
        record:
            Record::RunStarted {
                run,
                task,
                profile,
                limits,
                forked_from,
                ..
            },
    }) = lines.first().cloned()
    else {
        unreachable!("records() checks the first line");
    };
    let mut agents: BTreeMap<String, AgentRecord> = BTreeMap::new();
    let mut order = Vec::new();
    let mut finished = None;
    let mut limits = limits;
    let mut last_ms = started_ms;
    for line in &lines {
        last_ms = last_ms.max(line.ts_ms);
        match &line.record {
            Record::AgentQueued(intro) => {
                order.push(intro.agent.clone());
                agents.insert(
                    intro.agent.clone(),
                    AgentRecord {
                        id: intro.agent.clone(),
                        parent: intro.parent.clone(),
                        profile: intro.profile.clone(),
                        label: intro.label.clone(),
                        task: intro.task.clone(),
                        state: "queued".into(),
                        ..AgentRecord::default()
                    },
                );
            }
            Record::RunFinished { state, cost_usd } => finished = Some((*state, *cost_usd)),
            Record::RunResumed {
                limits: Some(resumed),
                ..
            } => limits = Some(*resumed),
            record => update_agent(&mut agents, record),
        }
    }
    let mut agents: Vec<AgentRecord> = order.iter().filter_map(|id| agents.remove(id)).collect();
    if finished.is_none() {
        // Not ended: still being written, or its process died. An agent left running
        // or queued in a finished run was ended with it.
        for agent in &mut agents {
            if agent.state == "running" || agent.state == "queued" {
                agent.state = "interrupted".into();
            }
        }
    }
    let root_state = agents.first().map(|a| a.state.clone()).unwrap_or_default();
    let cost_usd = match finished {
        Some((_, cost)) => cost,
        None => agents.iter().map(|a| a.cost_usd).sum(),
    };
    Ok(RunRecord {
        id: run,
        started_ms,
        last_ms,
        task,
        profile,
        state: match finished {
            Some((state, _)) => state.as_str().into(),
            None => root_state,
        },
        finished: finished.is_some(),
        cost_usd,
        limits,
        agents,
        path: path.to_path_buf(),
        forked_from,
    })
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
        Record::AgentFinished {
            agent,
            state,
            text,
            error,
            turns,
            input_tokens,
            output_tokens,
            cost_usd,
            duration_ms,
            ..
        } => {
            if let Some(a) = agents.get_mut(agent) {
                a.state = state.as_str().into();
                a.text = text.clone();
                a.error = error.clone();
                a.turns = *turns;
                a.tokens = input_tokens + output_tokens;
                a.cost_usd = *cost_usd;
                a.duration_ms = Some(*duration_ms);
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

/// The journals in `dir`, each with its run's id (its directory's name).
fn journals(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| {
            let id = entry.file_name().to_string_lossy().into_owned();
            (id, entry.path().join(JOURNAL_FILE))
        })
        .filter(|(_, path)| path.is_file())
        .collect()
}

/// Every run journaled in `dir`, newest first. A journal that cannot be read is
/// reported in the second list, not fatal.
pub fn runs(dir: &Path) -> (Vec<RunRecord>, Vec<String>) {
    let mut runs = Vec::new();
    let mut problems = Vec::new();
    for (_, path) in journals(dir) {
        match run(&path) {
            Ok(record) => runs.push(record),
            Err(error) => problems.push(format!("{error:#}")),
        }
    }
    runs.sort_by(|a, b| b.started_ms.cmp(&a.started_ms).then(b.id.cmp(&a.id)));
    (runs, problems)
}

/// When the run of the journal at `path` started: its first line's time, read
/// without reading the rest.
fn started_ms(path: &Path) -> Option<u64> {
    use std::io::BufRead as _;
    let mut first = String::new();
    std::io::BufReader::new(std::fs::File::open(path).ok()?)
        .read_line(&mut first)
        .ok()?;
    serde_json::from_str::<Line>(&first)
        .ok()
        .map(|line| line.ts_ms)
}

/// The journal of the run `name` names in `dir`: its id, a unique prefix of it, or
/// `last` (the newest). Runs are found by their directories' names; only `last`
/// reads anything, each journal's first line.
pub fn find(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
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
