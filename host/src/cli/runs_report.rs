//! `warren runs` and `warren show`: journaled runs as tables, trees and transcripts,
//! or JSON, read from the journal directory by any process after the run's own.

use std::collections::HashMap;
use std::path::Path;

use serde_json::json;

use crate::jobs::{thousands, title};
use crate::journal::read::{self, AgentRecord, RunRecord};
use crate::journal::record::{Line, Record};
use crate::term::{outln, reportln};

/// Prints every run journaled in `dir`, newest first.
pub(crate) fn list(dir: &Path, as_json: bool) -> anyhow::Result<()> {
    let (runs, problems) = read::runs(dir);
    for problem in &problems {
        tracing::warn!("skipping a journal: {problem}");
    }
    if as_json {
        let runs: Vec<_> = runs.iter().map(RunRecord::summary).collect();
        outln!(
            "{:#}",
            json!({ "dir": dir.display().to_string(), "runs": runs })
        )?;
        return Ok(());
    }
    if runs.is_empty() {
        reportln!("no runs journaled in {}", dir.display())?;
        return Ok(());
    }
    reportln!(
        "{:<16}  {:<19}  {:<15}  {:>6}  {:>10}  {:>9}  {:>8}  task",
        "run",
        "started (UTC)",
        "state",
        "agents",
        "tokens",
        "cost",
        "time"
    )?;
    for run in &runs {
        reportln!(
            "{:<16}  {:<19}  {:<15}  {:>6}  {:>10}  {:>9}  {:>8}  {}",
            run.id,
            crate::journal::utc_text(run.started_ms),
            state(run),
            if run.counted {
                run.agents.len().to_string()
            } else {
                "?".into()
            },
            if run.counted {
                thousands(run.tokens())
            } else {
                "?".into()
            },
            format!("${:.4}", run.cost_usd),
            format!(
                "{:.1} s",
                run.last_ms.saturating_sub(run.started_ms) as f64 / 1000.0
            ),
            match &run.forked_from {
                Some(from) => format!(
                    "[fork of {} from {}] {}",
                    from.run,
                    from.agent,
                    one_line(&run.task, 40)
                ),
                None => one_line(&run.task, 60),
            }
        )?;
    }
    Ok(())
}

/// Prints run `name` (an id, a unique prefix, or `last`) in `dir`: its tree, or with
/// `agent` that agent's whole transcript.
/// `warren runs prune`: deletes the runs `options` select and says which.
pub(crate) fn prune(
    dir: &Path,
    options: crate::journal::prune::Prune,
    as_json: bool,
) -> anyhow::Result<()> {
    let (pruned, problems) = crate::journal::prune::prune(dir, options)?;
    for problem in &problems {
        tracing::warn!("left alone, unreadable: {problem}");
    }
    let bytes: u64 = pruned.iter().map(|p| p.bytes).sum();
    if as_json {
        outln!(
            "{:#}",
            json!({"dir": dir.display().to_string(), "dry_run": options.dry_run, "pruned": pruned, "bytes": bytes})
        )?;
        return Ok(());
    }
    let verb = if options.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    for run in &pruned {
        reportln!("{verb} {} ({} bytes)", run.run_id, thousands(run.bytes))?;
    }
    reportln!(
        "{verb} {} run(s), {} bytes, in {}",
        pruned.len(),
        thousands(bytes),
        dir.display()
    )?;
    Ok(())
}

pub(crate) fn show(
    dir: &Path,
    name: &str,
    agent: Option<&str>,
    as_json: bool,
) -> anyhow::Result<()> {
    let path = read::find(dir, name)?;
    let run = read::run(&path)?;
    match agent {
        Some(agent) => transcript(&path, &run, agent, as_json),
        None if as_json => {
            outln!("{:#}", json!({"run": run.summary(), "agents": run.agents}))?;
            Ok(())
        }
        None => tree(&run),
    }
}

/// A run's state for people: an unfinished journal is `interrupted` or `running`.
fn state(run: &RunRecord) -> String {
    if run.finished {
        run.state.clone()
    } else {
        format!("{} (no end)", run.state)
    }
}

fn tree(run: &RunRecord) -> anyhow::Result<()> {
    let budget = match run.limits.and_then(|l| l.budget_usd) {
        Some(budget) => format!(" of ${budget:.4} budget"),
        None => String::new(),
    };
    reportln!(
        "run {} · {} · {} agents · {} tokens · ${:.4}{budget} · started {} UTC",
        run.id,
        state(run),
        run.agents.len(),
        thousands(run.tokens()),
        run.cost_usd,
        crate::journal::utc_text(run.started_ms)
    )?;
    reportln!("task: {}", one_line(&run.task, 200))?;
    // Walked with a stack, children in order under their parent: no recursion, so
    // no tree can overflow the stack.
    let mut children: HashMap<&str, Vec<&AgentRecord>> = HashMap::new();
    for agent in &run.agents {
        if let Some(parent) = &agent.parent {
            children.entry(parent.as_str()).or_default().push(agent);
        }
    }
    let mut stack: Vec<(usize, &AgentRecord)> = run
        .agents
        .iter()
        .rev()
        .filter(|a| a.parent.is_none())
        .map(|a| (0, a))
        .collect();
    while let Some((depth, agent)) = stack.pop() {
        agent_lines(agent, depth)?;
        for child in children.get(agent.id.as_str()).into_iter().flatten().rev() {
            stack.push((depth + 1, child));
        }
    }
    Ok(())
}

fn agent_lines(agent: &AgentRecord, depth: usize) -> anyhow::Result<()> {
    let indent = "  ".repeat(depth);
    let mark = match agent.state.as_str() {
        "ok" => '✓',
        "queued" | "running" => '…',
        _ => '✗',
    };
    reportln!(
        "{indent}{mark} {} {} · {} · {} turns · {} tok · ${:.4}",
        agent.id,
        title(&agent.profile, agent.label.as_deref()),
        agent.state,
        agent.turns,
        thousands(agent.tokens),
        agent.cost_usd
    )?;
    let said = match &agent.error {
        Some(error) => format!("error: {error}"),
        None => agent.text.clone(),
    };
    if !said.trim().is_empty() {
        reportln!("{indent}  {}", one_line(&said, 200))?;
    }
    Ok(())
}

/// Prints one agent's records: what it was given, each model response, each tool
/// call and its result, how it ended.
fn transcript(path: &Path, run: &RunRecord, agent: &str, as_json: bool) -> anyhow::Result<()> {
    let Some(found) = run.agents.iter().find(|a| a.id == agent) else {
        anyhow::bail!(
            "run {} has no agent `{agent}` (it has: {})",
            run.id,
            run.agents
                .iter()
                .map(|a| a.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let lines: Vec<Line> = read::records(path)?
        .into_iter()
        .filter(|line| line.record.agent() == Some(agent))
        .collect();
    if as_json {
        outln!(
            "{:#}",
            json!({"run_id": run.id, "agent": found, "records": lines})
        )?;
        return Ok(());
    }
    reportln!(
        "agent {} of run {} · {} · {}",
        found.id,
        run.id,
        title(&found.profile, found.label.as_deref()),
        found.state
    )?;
    for line in lines {
        print_record(line.record)?;
    }
    Ok(())
}

/// Prints one record of an agent's transcript (records the transcript does not show
/// print nothing).
fn print_record(record: Record) -> anyhow::Result<()> {
    match record {
        Record::AgentSpec {
            message,
            model,
            tools,
            max_turns,
            ..
        } => {
            reportln!(
                "── given (model {}, max_turns {max_turns}, tools: {})",
                model.as_deref().unwrap_or("-"),
                tools.join(", ")
            )?;
            reportln!("{message}")?;
        }
        Record::ModelResponse {
            turn,
            text,
            tool_calls,
            finish,
            input_tokens,
            output_tokens,
            ..
        } => {
            reportln!(
                "── turn {turn} ({finish}; {} + {} tokens)",
                thousands(input_tokens),
                thousands(output_tokens)
            )?;
            if !text.is_empty() {
                reportln!("{text}")?;
            }
            for call in tool_calls {
                let code = written_code(&call.name, &call.arguments).unwrap_or_default();
                reportln!("→ {} {}{code}", call.name, call.arguments)?;
            }
        }
        Record::ToolFinished {
            call_id,
            outcome,
            content,
            duration_ms,
            figures,
            ..
        } => {
            let memory = figures
                .memory_peak_bytes
                .map(|bytes| format!(", memory peak {} KiB", thousands(bytes / 1024)))
                .unwrap_or_default();
            reportln!(
                "← {call_id} {outcome} ({duration_ms} ms, fuel {}, {} bytes{memory})",
                figures.fuel_used.map_or("—".to_string(), thousands),
                thousands(figures.output_bytes)
            )?;
            reportln!("{content}")?;
        }
        Record::MessageSent {
            seq,
            from,
            mode,
            text,
            ..
        } => {
            reportln!("── message #{seq} from {from} ({})", mode.as_str())?;
            reportln!("{text}")?;
        }
        Record::MessageDelivered { seq, turn, .. } => {
            reportln!("── message #{seq} read in turn {turn}")?;
        }
        Record::AgentFinished { state, error, .. } => {
            reportln!(
                "── finished {state}{}",
                error.map(|e| format!(": {e}")).unwrap_or_default()
            )?;
        }
        _ => {}
    }
    Ok(())
}

/// `text` on one line, cut at `max` characters.
fn one_line(text: &str, max: usize) -> String {
    crate::term::bounded(&text.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

/// The code of a `run_python` or `run_js` call, as the model wrote it, framed, on the
/// lines after its call.
fn written_code(tool: &str, arguments: &str) -> Option<String> {
    if !crate::config::NAMED_ONLY.contains(&tool) {
        return None;
    }
    let arguments: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let code = arguments.get("code")?.as_str()?;
    Some(format!("\n┌ code\n{}\n└", code.trim_end()))
}
