//! `warren runs`, `warren show`, `warren replay` and `warren diff`: reading back the
//! journaled runs.

use std::path::{Path, PathBuf};

use super::args::{DiffArgs, ReplayArgs, ReplayToolsArg, RunsAction, RunsArgs, ShowArgs};
use super::failure::{load, Failure};
use crate::config::Config;
use crate::host::Host;
use crate::term::outln;

/// `warren runs`: the list of runs, or with `prune`, deleting old ones.
pub(super) fn runs(config_path: &Path, args: RunsArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    let Some(RunsAction::Prune(prune)) = args.action else {
        return Ok(crate::cli::runs_report::list(
            &journal_dir(&config)?,
            args.json,
        )?);
    };
    let older_than = match prune.older_than {
        Some(days) if !(days.is_finite() && days >= 0.0) => {
            return Err(Failure::Usage(format!(
                "--older-than: a number of days, 0 or more, got {days}"
            )))
        }
        days => days.map(|days| std::time::Duration::from_secs_f64(days * 86_400.0)),
    };
    let options = crate::journal::prune::Prune {
        keep: prune.keep,
        older_than,
        unfinished: prune.unfinished,
        dry_run: prune.dry_run,
    };
    crate::cli::runs_report::prune(&journal_dir(&config)?, options, args.json)?;
    Ok(())
}

/// `warren show RUN`: a run's tree, or one agent's transcript.
pub(super) fn show(config_path: &Path, args: ShowArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    crate::cli::runs_report::show(
        &journal_dir(&config)?,
        &args.run,
        args.agent.as_deref(),
        args.json,
    )?;
    Ok(())
}

/// `warren diff RUN_A RUN_B`: two runs' trees side by side.
pub(super) fn diff(config_path: &Path, args: DiffArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    let a = crate::journal::read::run(&crate::journal::locate(&config, &args.run_a)?)?;
    let b = crate::journal::read::run(&crate::journal::locate(&config, &args.run_b)?)?;
    crate::cli::diff_report::print(&a, &b)?;
    Ok(())
}

/// `warren replay`: recorded runs again, offline unless forking with `--from`.
pub(super) async fn replay(config_path: &Path, args: ReplayArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    // A fork calls models: their keys are needed as for a run.
    let host = if args.from.is_some() {
        load(config).await?
    } else {
        Host::load_offline(config).await?
    };
    let tools = match args.tools {
        ReplayToolsArg::Rerun => crate::jobs::ReplayTools::Rerun,
        ReplayToolsArg::Recorded => crate::jobs::ReplayTools::Recorded,
    };
    replay_runs(&host, &args, tools).await
}

/// Where `config` journals runs; an error when journaling is off.
pub(super) fn journal_dir(config: &Config) -> Result<PathBuf, Failure> {
    config.journal_dir.clone().ok_or_else(|| {
        Failure::Usage(format!(
            "runs are not journaled: [journal] enabled = false in {}",
            config.path.display()
        ))
    })
}

/// `warren replay`: each run in full, or with `--all` one line per run and a summary.
async fn replay_runs(
    host: &Host,
    args: &ReplayArgs,
    tools: crate::jobs::ReplayTools,
) -> Result<(), Failure> {
    use crate::cli::replay_report as report;
    if let Some(from) = &args.from {
        let [run] = args.runs.as_slice() else {
            return Err(Failure::Usage(
                "--from forks one run: give exactly one RUN".into(),
            ));
        };
        let prompt =
            match &args.prompt_file {
                Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                    Failure::Usage(format!("--prompt-file {}: {e}", path.display()))
                })?),
                None => None,
            };
        let fork = crate::jobs::Fork {
            from: from.clone(),
            profile: args.profile.clone(),
            model: args.model.clone(),
            prompt,
        };
        let journal = crate::journal::locate(host.config(), run)?;
        return report::fork(host, &journal, tools, fork)
            .await
            .map_err(Failure::Run);
    }
    let (journals, one_line) = match &args.all {
        Some(dir) => (report::journals_in(dir)?, true),
        None => {
            let mut found = Vec::new();
            for name in &args.runs {
                found.push(crate::journal::locate(host.config(), name)?);
            }
            (found, false)
        }
    };
    let mut differ = 0;
    for journal in &journals {
        let name = journal_name(journal);
        let verdict = report::replay(host, journal, tools).await;
        if one_line {
            crate::term::reportln!("{}", report::line(&name, &verdict))?;
            if !verdict.as_ref().is_ok_and(report::Verdict::matched) {
                differ += 1;
            }
        } else {
            let verdict = verdict.map_err(Failure::Run)?;
            report::print(&name, &verdict)?;
            if !verdict.matched() {
                differ += 1;
            }
        }
    }
    if one_line {
        outln!(
            "{} replayed: {} the same, {differ} differ or failed",
            journals.len(),
            journals.len() - differ
        )?;
    }
    if differ > 0 {
        return Err(Failure::Run(anyhow::anyhow!(
            "{differ} of {} replay(s) differ from the recording",
            journals.len()
        )));
    }
    Ok(())
}

/// How a journal is named in replay reports: its run directory's name, or its file.
fn journal_name(journal: &Path) -> String {
    let file = journal.file_name().map(|f| f.to_string_lossy().to_string());
    match (
        file.as_deref(),
        journal.parent().and_then(|p| p.file_name()),
    ) {
        (Some(crate::journal::writer::JOURNAL_FILE), Some(dir)) => {
            dir.to_string_lossy().to_string()
        }
        _ => journal.display().to_string(),
    }
}
