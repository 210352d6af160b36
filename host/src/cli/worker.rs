//! `warren worker`: takes sub-agent jobs from the queue and runs each as the root of
//! an agent tree on this machine, with this machine's plugins, models and profiles.
//!
//! A job names a profile; the worker uses its own profile of that name, narrowed by
//! the job (its tools subset, its limits, the parent's capability ceiling, and the
//! parent's model when the profile says `model: inherit`), so a job can never widen
//! what the worker's profile allows. While the agent runs, its events
//! go back to the parent in batches (job progress), and the worker polls the job's
//! cancel key. Jobs that cannot run here (no such profile, bad job data) fail at once
//! with the reason (a job whose data passes `MAX_JOB_DATA_BYTES` too, checked first);
//! jobs whose agent cannot start (no model on this worker, or not the
//! model a `model: inherit` child takes from its parent) are retried with backoff, on
//! any worker, up to `[queue] attempts`, and each attempt's reason is kept in the
//! job's log.
//!
//! Shutdown (SIGTERM or Ctrl-C): the worker stops taking jobs and lets running ones
//! finish for `[queue] shutdown_grace_s`; then (or at a second signal) it hands the
//! rest back to the queue, where another worker takes them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bullmq::types::JobProgress;
use bullmq::worker::CancellationToken as JobToken;
use bullmq::{Job, Worker};
use serde_json::Value;
use tokio::sync::watch;

use super::worker_job::{job_start, read_job, unnamed_jobs_profile};
use crate::config::{names_or_none, QueueConfig};
use crate::events::{Event, EventStream};
use crate::host::{Host, Run, RunReport};
use crate::jobs::{History, Tree};
use crate::outcome::{AgentOutcome, AgentState};
use crate::queue::client::RemoteQueue;
use crate::queue::wire::{
    events_progress, fits, JobData, JobOutcome, StopRequest, CANCEL_POLL, EVENT_BATCH,
    HEARTBEAT_POLL, OUTCOME_LOG_PREFIX,
};

pub(super) use crate::queue::wire::process_name as default_name;

/// How a worker runs.
#[derive(Clone, Debug)]
pub(super) struct WorkerOptions {
    /// Jobs run at once, not counting those whose agent only waits for its own
    /// sub-agents.
    pub concurrency: usize,
    /// Jobs held at most beyond `concurrency` whose agents only wait.
    pub max_waiting: usize,
    /// Shown in logs and stored on each job it runs (default `HOST:PID`).
    pub name: String,
}

struct Shared {
    host: Host,
    /// The host's queue connection (a worker always has one).
    queue: Arc<RemoteQueue>,
    name: String,
    /// Flips to `true` when running jobs must be handed back.
    hand_back: watch::Receiver<bool>,
}

/// Runs a worker until `shutdown` resolves (the first signal), then shuts down
/// gracefully; `hand_back_now` resolving (a second signal) cuts the grace short.
pub(super) async fn run(
    host: Host,
    options: WorkerOptions,
    shutdown: impl Future<Output = ()>,
    hand_back_now: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let queue = host.remote_queue().cloned().with_context(|| {
        format!(
            "no Redis URL: pass --redis URL or set [queue] redis in {}",
            host.config().path.display()
        )
    })?;
    let config = queue.config().clone();
    let (hand_back_tx, hand_back) = watch::channel(false);
    let shared = Arc::new(Shared {
        host: host.clone(),
        queue,
        name: options.name.clone(),
        hand_back,
    });
    let processor = move |job: Job, token: JobToken| {
        let shared = shared.clone();
        async move { process(&shared, job, token).await }
    };
    let worker = Worker::with_options(&config.name, processor, bullmq_options(&config, &options))
        .await
        .with_context(|| {
            format!(
                "cannot connect to queue `{}` at {}",
                config.name,
                config.redacted_url()
            )
        })?;
    eprintln!(
        "warren worker {}: taking jobs from queue `{}` at {} (concurrency {}; profiles: {}; a job naming no profile runs as `{}`)",
        options.name,
        config.name,
        config.redacted_url(),
        options.concurrency,
        names_or_none(host.config().profile_names().iter()),
        unnamed_jobs_profile(host.config()),
    );
    tokio::select! {
        _ = shutdown => {}
        _ = make_room_for_waiting(&worker, host.roots_waiting(), &options) => {}
    }
    let active = worker.active_count().await;
    eprintln!(
        "warren worker {}: shutting down; letting {active} running job(s) finish (up to {} s, signal again to hand them back now)",
        options.name, config.shutdown_grace_s
    );
    let grace = Duration::from_secs(config.shutdown_grace_s);
    let close = worker.close((grace + Duration::from_secs(30)).as_millis() as u64);
    tokio::pin!(close);
    tokio::select! {
        result = &mut close => return result.context("closing the worker"),
        _ = tokio::time::sleep(grace) => {}
        _ = hand_back_now => {}
    }
    let active = worker.active_count().await;
    eprintln!(
        "warren worker {}: handing {active} job(s) back to the queue",
        options.name
    );
    hand_back_tx.send_replace(true);
    close.await.context("closing the worker")
}

/// The BullMQ worker's options: its name and concurrency, and the queue's locks,
/// stall checks and retention.
fn bullmq_options(config: &QueueConfig, options: &WorkerOptions) -> bullmq::WorkerOptions {
    bullmq::WorkerOptions {
        connection: config.connection(),
        name: Some(options.name.clone()),
        concurrency: options.concurrency,
        lock_duration: config.lock_ms,
        stalled_interval: config.stalled_interval_ms,
        max_stalled_count: config.max_stalled,
        drain_delay: 1,
        remove_on_complete: config.retention(),
        remove_on_fail: config.failed_retention(),
        ..bullmq::WorkerOptions::default()
    }
}

/// Keeps the worker's BullMQ concurrency at `concurrency` plus the jobs whose agents
/// only wait for their sub-agents (at most `max_waiting` of them): a job waiting for
/// children frees its place for another, which may be one of those children. Without
/// it, a worker whose places all hold parents waiting for their children never takes
/// those children, and the tree stalls.
async fn make_room_for_waiting(
    worker: &Worker,
    mut waiting: watch::Receiver<usize>,
    options: &WorkerOptions,
) {
    loop {
        let now = (*waiting.borrow_and_update()).min(options.max_waiting);
        worker.set_concurrency(options.concurrency + now);
        if waiting.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// Runs one job; the `Ok` value is the job's return value ([`JobOutcome`]).
async fn process(shared: &Shared, mut job: Job, token: JobToken) -> Result<Value, bullmq::Error> {
    let id = job.id().to_string();
    let worker = &shared.name;
    let (data, base) = read_job(&shared.host, worker, &job, &id)?;
    let queue = &shared.queue;
    let refused = |error: anyhow::Error| {
        bullmq::Error::ProcessingError(format!(
            "cannot cancel the sub-agents of an earlier attempt: {error:#}"
        ))
    };
    let (cancel, earlier) = queue.before_start(&id).await.map_err(refused)?;
    if cancel {
        let outcome = AgentOutcome::cancelled_before_start();
        return Err(cancelled(&mut job, &outcome, 0.0, worker).await);
    }
    queue
        .abandon_children(&id, &earlier)
        .await
        .map_err(refused)?;
    if !earlier.is_empty() {
        let n = earlier.len();
        let line = format!("worker {worker}: cancelled {n} sub-agent job(s) of an earlier attempt");
        tracing::info!(job = %id, "{line}");
        let _ = job.log(&line).await;
    }
    let started = match job_start(&shared.host, worker, &id, &data, base)? {
        Err(reason) => Err(reason),
        Ok(start) => shared
            .host
            .start_job(start)
            .map_err(|error| format!("{error:#}")),
    };
    let run = match started {
        Ok(run) => run,
        Err(reason) => {
            let attempt = job.attempts_made() + 1;
            let _ = job
                .log(&format!("attempt {attempt} on worker {worker}: {reason}"))
                .await;
            tracing::warn!(job = %id, attempt, "{reason}");
            return Err(bullmq::Error::ProcessingError(reason));
        }
    };
    tracing::info!(job = %id, profile = %data.profile, "running");
    let tree = run.tree.clone();
    let watched = watch_run(shared, &mut job, &id, &data, run, &token).await;
    // The agent's history, kept for a follow-up when the job asked for it.
    let history = tree.carried.take_kept().filter(|h| fits(&id, h));
    finish(shared, &mut job, &id, watched, history).await
}

/// How a job's run went while the worker watched it.
struct Watched {
    /// The run's report.
    report: RunReport,
    /// The run's id.
    run_id: String,
    /// Why it was cancelled, when its parent process was gone.
    orphaned: Option<String>,
    /// Whether it was cancelled to be handed back at shutdown.
    handing_back: bool,
    /// Why it was cancelled, when another client ended or removed the job.
    ended_elsewhere: Option<String>,
    /// Events not yet sent to the parent.
    batch: Vec<Event>,
}

/// Waits for `run` to end, sending its events to the parent in batches and
/// cancelling it when the parent asks, the parent's heartbeat stops, BullMQ cancels
/// the job or the worker hands its jobs back.
async fn watch_run(
    shared: &Shared,
    job: &mut Job,
    id: &str,
    data: &JobData,
    run: Run,
    token: &JobToken,
) -> Watched {
    let (queue, worker) = (&shared.queue, &shared.name);
    let cancel = run.cancel_token();
    let run_id = run.id().to_string();
    let (tree, root) = (run.tree.clone(), run.root.clone());
    let mut events = run.events();
    let wait = run.wait();
    tokio::pin!(wait);
    let mut batch: Vec<Event> = Vec::new();
    let mut flush = tokio::time::interval(EVENT_BATCH);
    let mut poll = tokio::time::interval(CANCEL_POLL);
    let mut heartbeat = heartbeat_looks();
    // Set when the parent process is gone and the job was cancelled for it.
    let mut orphaned: Option<String> = None;
    let mut hand_back = shared.hand_back.clone();
    let mut handing_back = *hand_back.borrow();
    let mut ended_elsewhere: Option<String> = None;
    let report = loop {
        tokio::select! {
            report = &mut wait => break report,
            Some(record) = events.next() => {
                batch.extend(Some(record.event).filter(|e| !matches!(e, Event::Lagged { .. })));
            }
            _ = flush.tick() => {
                send_events(job, &run_id, &mut batch).await;
            }
            _ = poll.tick(), if ended_elsewhere.is_none() => {
                match look_at_job(shared, id, &tree, &root).await {
                    Some(StopRequest::Parent) => {
                        tracing::info!(job = %id, "cancel requested by the parent");
                        cancel.cancel();
                    }
                    Some(StopRequest::EndedElsewhere(why)) => {
                        tracing::info!(job = %id, "cancelled: {why}");
                        ended_elsewhere = Some(why);
                        cancel.cancel();
                    }
                    None => {}
                }
            }
            _ = heartbeat.tick(), if orphaned.is_none() && data.heartbeat.is_some() => {
                let parent = data.heartbeat.as_deref().expect("checked");
                if queue.parent_gone(parent).await {
                    let reason = format!(
                        "cancelled: its parent process stopped renewing its heartbeat for {} s (parent_timeout_s); it died or lost Redis",
                        queue.config().parent_timeout_s
                    );
                    tracing::warn!(job = %id, "{reason}");
                    let _ = job.log(&format!("worker {worker}: {reason}")).await;
                    orphaned = Some(reason);
                    cancel.cancel();
                }
            },
            _ = token.cancelled() => cancel.cancel(),
            Ok(()) = hand_back.changed(), if !handing_back => {
                handing_back = true;
                cancel.cancel();
            }
        }
    };
    take_last_events(&mut events, &tree, &mut batch).await;
    Watched {
        report,
        run_id,
        orphaned,
        handing_back,
        ended_elsewhere,
        batch,
    }
}

/// When to look at the parent's heartbeat: every [`HEARTBEAT_POLL`], the first a
/// beat in, so a short job spends no round trip on it and an orphan (its parent gone
/// for `parent_timeout_s`) is found at most a beat later.
fn heartbeat_looks() -> tokio::time::Interval {
    let first = tokio::time::Instant::now() + HEARTBEAT_POLL;
    tokio::time::interval_at(first, HEARTBEAT_POLL)
}

/// Adds the events published before the run ended to `batch`: those waiting, and,
/// while a sub-agent of `tree` is still ending, those that come within a millisecond
/// of each other. With none left (each publishes its end before it stops counting)
/// nothing more can come, and the job's end is not held back waiting for it.
async fn take_last_events(events: &mut EventStream, tree: &Tree, batch: &mut Vec<Event>) {
    let settled = tree.active_subagents() == 0;
    loop {
        let next = match events.try_next() {
            Some(record) => Some(record),
            None if settled => None,
            None => tokio::time::timeout(Duration::from_millis(1), events.next())
                .await
                .ok()
                .flatten(),
        };
        let Some(record) = next else { return };
        if !matches!(record.event, Event::Lagged { .. }) {
            batch.push(record.event);
        }
    }
}

/// A look at running job `id` in Redis: the messages sent to its agent (the root of
/// `tree`) are left for it, and why it must stop, if it must, is returned.
async fn look_at_job(
    shared: &Shared,
    id: &str,
    tree: &std::sync::Arc<crate::jobs::Tree>,
    root: &crate::jobs::JobId,
) -> Option<StopRequest> {
    let polled = shared.queue.poll_job(id).await.unwrap_or_default();
    for letter in polled.mail {
        // To the job's root, or to one of its sub-agents by id (any agent of this
        // tree: the job's subtree).
        let to = letter
            .agent
            .clone()
            .map_or_else(|| root.clone(), crate::jobs::JobId);
        let receipt = shared.host.relay(tree, &to, letter).await;
        tracing::info!(job = %id, receipt = ?receipt, "a message from the parent's run");
    }
    for answered in polled.answers {
        let given = tree.requests.answer(&answered.request, answered.answer);
        tracing::info!(job = %id, request = %answered.request, given = ?given.map(|r| r.tool), "a person's answer from the parent's run");
    }
    polled.stop
}

/// The job's end: handed back to the queue, failed (for a state in `[queue]
/// fail_jobs_on`) or completed with the agent's outcome.
async fn finish(
    shared: &Shared,
    job: &mut Job,
    id: &str,
    mut watched: Watched,
    history: Option<History>,
) -> Result<Value, bullmq::Error> {
    let worker = &shared.name;
    if watched.handing_back {
        let _ = job
            .log(&format!("handed back by worker {worker} at shutdown"))
            .await;
        return match job.move_to_wait(None).await {
            // The job is back in the queue: tell BullMQ not to finish it.
            Ok(_) => Err(bullmq::Error::Delayed),
            Err(error) => Err(bullmq::Error::ProcessingError(format!(
                "worker {worker} shut down and could not hand the job back: {error}"
            ))),
        };
    }
    // A result finished while Redis restarts is saved once it is back, not lost to a
    // failed write (the last events reaching it say it is there).
    if !send_events(job, &watched.run_id, &mut watched.batch).await {
        shared
            .queue
            .wait_until_reachable(Duration::from_secs(60))
            .await;
    }
    let report = watched.report;
    tracing::info!(job = %id, state = report.root.state.as_str(), "finished");
    if let Some(why) = watched.ended_elsewhere {
        // The job has the end that client gave it; it is not this worker's to change.
        let _ = job
            .log(&format!("worker {worker}: agent cancelled: {why}"))
            .await;
        return Err(bullmq::Error::Delayed);
    }
    let mut root = report.root;
    if let Some(reason) = watched
        .orphaned
        .filter(|_| root.state == AgentState::Cancelled)
    {
        root.error = Some(reason);
    }
    if root.state == AgentState::Cancelled {
        return Err(cancelled(job, &root, report.cost_usd, worker).await);
    }
    // States the queue is told to treat as failures fail the job, so the producer's
    // attempts and backoff apply.
    if shared
        .host
        .config()
        .queue
        .fail_jobs_on
        .contains(&root.state)
    {
        let reason = format!(
            "agent ended {} on worker {worker}: {}",
            root.state.as_str(),
            root.error.as_deref().unwrap_or("no answer")
        );
        let attempt = job.attempts_made() + 1;
        let _ = job.log(&format!("attempt {attempt}: {reason}")).await;
        return Err(bullmq::Error::ProcessingError(reason));
    }
    outcome_value(&root, report.cost_usd, worker, history)
}

/// A cancelled job fails, unrecoverably (it is not retried), with the reason, as
/// BullMQ's consumers expect of a job that did not complete; the agent's outcome goes
/// to the job's log ([`OUTCOME_LOG_PREFIX`]) for a warren parent to read.
async fn cancelled(job: &mut Job, root: &AgentOutcome, cost: f64, worker: &str) -> bullmq::Error {
    let why = root.error.as_deref().unwrap_or("cancelled by its parent");
    let reason = if why.starts_with("cancelled") {
        format!("{why} (worker {worker})")
    } else {
        format!("cancelled: {why} (worker {worker})")
    };
    match serde_json::to_string(&JobOutcome::new(root, cost, worker)) {
        Ok(outcome) => {
            let _ = job.log(&format!("{OUTCOME_LOG_PREFIX}{outcome}")).await;
        }
        Err(error) => tracing::warn!(job = %job.id(), "encoding the outcome: {error}"),
    }
    bullmq::Error::Unrecoverable(reason)
}

fn outcome_value(
    outcome: &AgentOutcome,
    cost: f64,
    worker: &str,
    history: Option<History>,
) -> Result<Value, bullmq::Error> {
    let value = JobOutcome {
        history,
        ..JobOutcome::new(outcome, cost, worker)
    };
    serde_json::to_value(value)
        .map_err(|e| bullmq::Error::ProcessingError(format!("encoding the outcome: {e}")))
}

/// Sends the batched events as one progress update (BullMQ publishes it on the
/// queue's event stream, where the parent reads it), and says whether they reached
/// Redis (`false` too when there were none).
async fn send_events(job: &mut Job, run: &str, batch: &mut Vec<Event>) -> bool {
    if batch.is_empty() {
        return false;
    }
    let events = std::mem::take(batch);
    match job
        .update_progress(JobProgress::Object(events_progress(run, &events)))
        .await
    {
        Ok(_) => true,
        Err(error) => {
            tracing::debug!(job = %job.id(), %error, "could not send events (Redis unreachable?)");
            false
        }
    }
}
