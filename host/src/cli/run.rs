//! `warren run` and `warren resume`: driving a run in the foreground, its progress
//! on stderr, its answer (or JSON report) on stdout.

use std::fs::File;
use std::io::BufWriter;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;

use super::args::{OutputArgs, ResumeArgs, RunArgs};
use super::failure::{load, Failure};
use crate::cli::ui::{plain_line, AgentTree, ProgressMode};
use crate::config::AnswerPolicy;
use crate::config::Config;
use crate::events::{Event, EventStream};
use crate::host::{AgentReport, Run, RunReport};
use crate::outcome::AgentState;
use crate::term::outln;

/// `warren run TASK`: a new run of the root profile's agent.
pub(super) async fn run(config_path: &Path, args: RunArgs) -> Result<(), Failure> {
    let mut config = Config::load(config_path)?;
    args.queue.apply(&mut config)?;
    if args.no_journal {
        config.journal_dir = None;
    }
    config.profile(&args.profile)?;
    if let Some(id) = args
        .run_id
        .as_deref()
        .filter(|id| !crate::config::is_valid_name(id))
    {
        return Err(Failure::Usage(format!(
            "--run-id: use letters, digits, `_` and `-` (at most 64), got `{id}`"
        )));
    }
    let output_schema = args
        .output_schema
        .as_deref()
        .map(read_output_schema)
        .transpose()?;
    let log = args.output.event_log()?;
    config.run_limits.answers = args.output.answer_policy();
    let host = load(config).await?;
    // The one unknown-model check (in `Host::start`) is a configuration error:
    // exit 2, as for a bad file.
    let run = host.start_named(
        &args.profile,
        &args.task,
        args.model.as_deref(),
        args.run_id.as_deref(),
        output_schema,
    )?;
    let journal_dir = host.config().journal_dir.clone();
    let typed = args.output_schema.is_some();
    drive(run, &args.output, log, journal_dir, typed).await
}

/// `warren resume RUN`: a journaled run continued where its process died.
pub(super) async fn resume(config_path: &Path, args: ResumeArgs) -> Result<(), Failure> {
    let mut config = Config::load(config_path)?;
    args.queue.apply(&mut config)?;
    let log = args.output.event_log()?;
    config.run_limits.answers = args.output.answer_policy();
    let host = load(config).await?;
    let Some(follow_up) = args.follow_up.as_deref() else {
        let run = host.resume(&args.run, args.force)?;
        let journal_dir = host.config().journal_dir.clone();
        return drive(run, &args.output, log, journal_dir, false).await;
    };
    let [agent, text] = follow_up else {
        unreachable!("clap takes two values")
    };
    let follow_up = crate::journal::follow_up::FollowUp {
        agent: agent.clone(),
        text: text.clone(),
        from: super::send::sender(args.from),
    };
    let run = host.follow_up(&args.run, args.force, &follow_up)?;
    // The follow-up is on disk before the agent is brought back.
    if let Some(journal) = &run.tree.journal {
        journal.flush().await;
    }
    if !args.output.quiet {
        eprintln!(
            "warren: follow-up to {agent} recorded; resuming run {}",
            run.tree.run_id
        );
    }
    let journal_dir = host.config().journal_dir.clone();
    let shown = Shown::Agent(crate::jobs::JobId(agent.clone()));
    drive_showing(run, &args.output, log, journal_dir, shown).await
}

impl OutputArgs {
    /// Who answers the run's requests: `--approve`, else a person where one can be
    /// asked (an interactive terminal, a web view), else a denial.
    fn answer_policy(&self) -> AnswerPolicy {
        use std::io::IsTerminal as _;
        match self.approve.as_deref() {
            Some(policy) => AnswerPolicy::parse(policy).unwrap_or_default(),
            None if self.web.is_some() => AnswerPolicy::Ask,
            None if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() => {
                AnswerPolicy::Ask
            }
            None => AnswerPolicy::Deny,
        }
    }

    /// The `--events` file, created.
    fn event_log(&self) -> Result<Option<BufWriter<File>>, Failure> {
        let Some(path) = &self.events else {
            return Ok(None);
        };
        let file = File::create(path)
            .with_context(|| format!("creating the event log {}", path.display()))?;
        Ok(Some(BufWriter::new(file)))
    }
}

/// Shows `run`'s progress, waits for it and prints its answer or report; Ctrl-C
/// cancels it, a second Ctrl-C exits at once, leaving it to `warren resume`. A
/// `typed` root's answer is printed only when it is the checked JSON, so whatever
/// reads stdout never gets prose.
async fn drive(
    run: Run,
    output: &OutputArgs,
    log: Option<BufWriter<File>>,
    journal_dir: Option<PathBuf>,
    typed: bool,
) -> Result<(), Failure> {
    let shown = match typed {
        true => Shown::Typed,
        false => Shown::Root,
    };
    drive_showing(run, output, log, journal_dir, shown).await
}

/// Whose answer a run's command prints.
enum Shown {
    /// The root's.
    Root,
    /// The root's checked JSON, or nothing.
    Typed,
    /// This agent's (a follow-up's answer).
    Agent(crate::jobs::JobId),
}

impl Shown {
    /// The outcome whose answer is printed.
    fn outcome(&self, report: &crate::host::RunReport) -> crate::outcome::AgentOutcome {
        match self {
            Shown::Agent(id) => report
                .agents
                .iter()
                .find(|agent| agent.id == *id)
                .and_then(|agent| agent.outcome.clone())
                .unwrap_or_else(|| report.root.clone()),
            Shown::Root | Shown::Typed => report.root.clone(),
        }
    }
}

/// [`drive`], printing `shown`'s answer.
async fn drive_showing(
    run: Run,
    output: &OutputArgs,
    log: Option<BufWriter<File>>,
    journal_dir: Option<PathBuf>,
    shown: Shown,
) -> Result<(), Failure> {
    let mode = if output.quiet {
        ProgressMode::None
    } else {
        output.progress
    };
    if mode != ProgressMode::None {
        announce(&run);
    }
    let web = match output.web {
        Some(address) => Some(serve_live_view(&run, address, journal_dir).await?),
        None => None,
    };
    // This terminal answers the run's requests when it is asked to and can be.
    let prompter = {
        use std::io::IsTerminal as _;
        let asks = run.tree.requests.policy() == AnswerPolicy::Ask;
        let live = mode == ProgressMode::Tty
            || (mode == ProgressMode::Auto && std::io::stderr().is_terminal());
        (asks && live && std::io::stdin().is_terminal())
            .then(|| super::prompt::Prompter::new(run.tree.clone()))
    };
    let progress = tokio::spawn(show_progress(
        run.events(),
        run.root.0.clone(),
        mode,
        log,
        web.as_ref().map(|(live, _)| live.clone()),
        prompter,
    ));
    let interrupt = tokio::spawn(stop_on_signals(&run));
    let report = run.wait().await;
    progress.await.context("the progress task failed")??;
    // A reader gone from stdout does not hide how the run ended: the answer is
    // written first and its failure reported after the agent's.
    let answer = shown.outcome(&report);
    let shown = if output.json {
        outln!("{:#}", report_json(&report))
    } else if matches!(shown, Shown::Typed) && report.root.output.is_none() {
        Ok(())
    } else {
        outln!("{}", answer.text)
    };
    if !output.quiet && !output.json {
        eprint!("{}", summary(&report));
    }
    if let Some((_, url)) = &web {
        interrupt.abort();
        eprintln!("warren: the run is over; the web view stays up at {url} until Ctrl-C");
        let _ = tokio::signal::ctrl_c().await;
    }
    if report.root.state != AgentState::Ok {
        return Err(Failure::Run(anyhow::anyhow!(
            "the root agent ended {}: {}",
            report.root.state.as_str(),
            report.root.reason()
        )));
    }
    if answer.state != AgentState::Ok {
        return Err(Failure::Run(anyhow::anyhow!(
            "the agent ended {}: {}",
            answer.state.as_str(),
            answer.reason()
        )));
    }
    shown?;
    Ok(())
}

/// The run's id first, so a run whose process dies can be found and resumed.
fn announce(run: &Run) {
    match &run.tree.journal {
        Some(_) => eprintln!(
            "run {id} (journaled: `warren resume {id}` continues it if this process dies)",
            id = run.tree.run_id
        ),
        None => eprintln!("run {} (not journaled)", run.tree.run_id),
    }
}

/// `--web`: the live view of `run` served on `address` in the background; its
/// address is printed on stderr.
async fn serve_live_view(
    run: &Run,
    address: std::net::SocketAddr,
    journal_dir: Option<PathBuf>,
) -> anyhow::Result<(Arc<crate::web::LiveRun>, String)> {
    let live = crate::web::LiveRun::new(run.tree.clone(), &run.root);
    let source = crate::web::Source::Live {
        run: live.clone(),
        journal_dir,
    };
    let server = crate::web::WebServer::bind(address, source).await?;
    let url = server.url();
    eprintln!("warren: web view at {url}");
    tokio::spawn(server.serve(std::future::pending()));
    Ok((live, url))
}

/// Ctrl-C cancels the whole tree (a second one exits at once, 130); SIGTERM exits at
/// once (143), leaving a journaled run to `warren resume`.
fn stop_on_signals(run: &Run) -> impl std::future::Future<Output = ()> + Send + 'static {
    let cancel = run.cancel_token();
    let journaled = run.tree.journal.is_some().then(|| run.tree.run_id.clone());
    async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminated = async {
            match term.as_mut() {
                Some(term) => term.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            interrupted = tokio::signal::ctrl_c() => if interrupted.is_ok() {
                eprintln!("\ncancelling every agent (Ctrl-C again to exit at once)…");
                cancel.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            },
            // Stopped from outside: the run is left as it stands, to be resumed.
            _ = terminated => {
                match journaled {
                    Some(id) => eprintln!("\nwarren: terminated; run {id} is journaled: `warren resume {id}` continues it"),
                    None => eprintln!("\nwarren: terminated (the run was not journaled, so it cannot be resumed)"),
                }
                std::process::exit(143);
            }
        }
    }
}

/// One line per agent: id, parent, profile, state, turns, tokens, cost, time.
fn summary(report: &RunReport) -> String {
    let mut out = format!(
        "\n{:<8} {:<8} {:<14} {:<16} {:>5} {:>9} {:>9} {:>8}  {}\n",
        "agent", "parent", "profile", "state", "turns", "tokens", "cost", "time", "description"
    );
    // A large tree's table keeps the root and the agents that did not end ok first,
    // up to MAX_SUMMARY_ROWS; `warren show` lists every one.
    let not_ok = |job: &&AgentReport| {
        job.outcome
            .as_ref()
            .is_none_or(|o| o.state != AgentState::Ok)
    };
    let rows: Vec<&AgentReport> = match report.agents.len() > MAX_SUMMARY_ROWS {
        false => report.agents.iter().collect(),
        true => {
            let (root, rest) = report.agents.split_at(1);
            let (failed, ok): (Vec<&AgentReport>, Vec<&AgentReport>) =
                rest.iter().partition(not_ok);
            root.iter()
                .chain(failed)
                .chain(ok)
                .take(MAX_SUMMARY_ROWS)
                .collect()
        }
    };
    for job in &rows {
        let (state, turns, tokens, cost, time) = match &job.outcome {
            Some(o) => (
                o.state.as_str().to_string(),
                o.turns.to_string(),
                o.usage.total().to_string(),
                format!("${:.4}", o.cost_usd),
                format!("{:.1} s", o.duration.as_secs_f64()),
            ),
            None => (
                job.state().into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        let parent = job
            .parent
            .as_ref()
            .map_or("-".to_string(), ToString::to_string);
        let description = job.label.as_deref().unwrap_or("-");
        out.push_str(&format!(
            "{:<8} {:<8} {:<14} {:<16} {:>5} {:>9} {:>9} {:>8}  {description}\n",
            job.id, parent, job.profile, state, turns, tokens, cost, time
        ));
    }
    if rows.len() < report.agents.len() {
        let more = report.agents.len() - rows.len();
        out.push_str(&format!(
            "… {more} more agents, not listed (`warren show {}` lists all)\n",
            report.run_id
        ));
    }
    out.push_str(&format!("total cost ${:.4}\n", report.cost_usd));
    out
}

/// Rows of the table printed after a run: a larger tree's lists the root and the
/// agents that did not end ok first.
const MAX_SUMMARY_ROWS: usize = 40;

/// Feeds the event stream to the progress view, the JSONL log and the web view until
/// the root ends.
async fn show_progress(
    mut events: EventStream,
    root: String,
    mode: ProgressMode,
    mut log: Option<BufWriter<File>>,
    web: Option<Arc<crate::web::LiveRun>>,
    mut prompter: Option<super::prompt::Prompter>,
) -> anyhow::Result<()> {
    use std::io::{IsTerminal, Write};
    let live = match mode {
        ProgressMode::Tty => true,
        ProgressMode::Auto => std::io::stderr().is_terminal(),
        ProgressMode::Plain | ProgressMode::None => false,
    };
    let plain = mode == ProgressMode::Plain || (mode == ProgressMode::Auto && !live);
    let mut view = AgentTree::default();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    // Plain lines go out in bursts: every event already waiting is written, then one
    // flush, instead of one write per event (a thousand sub-agents make ~6000 events).
    let mut out = std::io::BufWriter::new(std::io::stderr());
    loop {
        tokio::select! {
            record = events.next() => {
                let Some(mut record) = record else { break };
                let root_finished = loop {
                    if let Some(log) = log.as_mut() {
                        serde_json::to_writer(&mut *log, &record)?;
                        log.write_all(b"\n")?;
                    }
                    view.apply(&record);
                    if let Some(web) = &web {
                        web.apply(&record);
                    }
                    if let Some(line) = plain.then(|| plain_line(&record.event)).flatten() {
                        writeln!(out, "{line}")?;
                    }
                    if matches!(&record.event, Event::AgentFinished { agent, .. } if *agent == root) {
                        break true;
                    }
                    match events.try_next() {
                        Some(next) => record = next,
                        None => break false,
                    }
                };
                out.flush()?;
                if let Some(web) = &web {
                    web.flush();
                }
                // Under a prompt the tree is drawn when it changes, not on every tick
                // (each draw clears what was typed but not yet entered).
                if live && view.prompting() {
                    view.redraw()?;
                }
                if root_finished {
                    break;
                }
            }
            (prompt, typed) = async { prompter.as_mut().expect("present").next().await }, if prompter.is_some() => {
                view.prompt(prompt, typed)?;
            }
            _ = tick.tick(), if live && !view.prompting() => view.redraw()?,
        }
    }
    if live {
        view.finish()?;
    }
    if let Some(mut log) = log {
        log.flush()?;
    }
    Ok(())
}

/// `--output-schema FILE`: read within [`crate::config::MAX_OUTPUT_SCHEMA_BYTES`]
/// (pretty-printed, up to four times that) and checked; a usage error naming the file.
fn read_output_schema(path: &Path) -> Result<crate::config::OutputSchema, Failure> {
    let limit = crate::config::MAX_OUTPUT_SCHEMA_BYTES as u64 * 4;
    let mut text = String::new();
    File::open(path)
        .and_then(|file| file.take(limit + 1).read_to_string(&mut text))
        .map_err(|e| Failure::Usage(format!("--output-schema {}: {e}", path.display())))?;
    crate::config::OutputSchema::from_json(&text)
        .map_err(|e| Failure::Usage(format!("--output-schema {}: {e}", path.display())))
}

/// `warren run --json`: the result and every agent's usage.
fn report_json(report: &RunReport) -> serde_json::Value {
    let outcome = |o: &crate::outcome::AgentOutcome| {
        serde_json::json!({
            "state": o.state.as_str(),
            "text": o.text,
            "output": o.output,
            "error": o.error,
            "turns": o.turns,
            "input_tokens": o.usage.input_tokens,
            "output_tokens": o.usage.output_tokens,
            "cost_usd": o.cost_usd,
            "duration_ms": o.duration.as_millis() as u64,
        })
    };
    let agents: Vec<serde_json::Value> = report
        .agents
        .iter()
        .map(|job| {
            let mut value = match &job.outcome {
                Some(o) => outcome(o),
                None => serde_json::json!({"state": job.state()}),
            };
            value["id"] = job.id.0.clone().into();
            value["parent"] = job.parent.as_ref().map(|p| p.0.clone()).into();
            value["profile"] = job.profile.clone().into();
            value["description"] = job.label.clone().into();
            value
        })
        .collect();
    let mut root = outcome(&report.root);
    root["run_id"] = report.run_id.clone().into();
    root["total_cost_usd"] = report.cost_usd.into();
    root["agents"] = agents.into();
    root
}
