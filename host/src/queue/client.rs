//! The parent's side of a remote sub-agent: enqueue it, mirror its events into the
//! run (so the live view and the event log show it and its descendants), wait for
//! its result, and cancel it.
//!
//! One [`RemoteQueue`] per host reads the queue's BullMQ event stream and routes
//! progress and completion events to the waiting children by job id. The job's hash
//! in Redis stays the source of truth: a child also checks its job's state every
//! second, so a result is never missed if events are lost (a Redis restart, a
//! trimmed stream).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bullmq::{
    JobOptions, JobState, Queue, QueueEvent, QueueEvents, QueueEventsOptions, QueueOptions,
};
use tokio::sync::mpsc;

use super::mirror::Mirror;
use super::wire::{
    heartbeat_every, process_name, progress_events, JobData, JobOutcome, StopRequest, CANCEL_GRACE,
    JOB_NAME, PARENT_POLL,
};
use crate::config::QueueConfig;
use crate::events::Event;
use crate::jobs::{Backend, ChildSpec, JobHandle};
use crate::llm::Usage;
use crate::outcome::{AgentOutcome, AgentState};

/// What the event listener tells a waiting child.
enum Notice {
    /// Agent events from the worker.
    Events(Vec<Event>),
    /// The job completed or failed: look at its state.
    Finished,
}

type Watchers = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Notice>>>>;

/// A connection to the queue: enqueues jobs and routes their events.
pub struct RemoteQueue {
    config: QueueConfig,
    queue: Queue,
    watchers: Watchers,
    events: Arc<QueueEvents>,
    router: tokio::task::JoinHandle<()>,
    /// This process's heartbeat id (see [`JobData::heartbeat`]).
    heartbeat: String,
    /// Heartbeats of processes that died, renewed by this one since it resumed their
    /// runs: their jobs' workers keep running them.
    adopted: Arc<Mutex<std::collections::BTreeSet<String>>>,
    beating: tokio::task::JoinHandle<()>,
}

impl Drop for RemoteQueue {
    fn drop(&mut self) {
        self.router.abort();
        self.beating.abort();
        let events = self.events.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { events.close().await });
        }
    }
}

impl RemoteQueue {
    /// Connects to the queue `config` names and starts reading its events.
    pub async fn connect(config: &QueueConfig) -> anyhow::Result<Arc<RemoteQueue>> {
        let where_ = format!("queue `{}` at {}", config.name, config.redacted_url());
        reachable(config)
            .await
            .with_context(|| format!("cannot connect to {where_}"))?;
        let queue = Queue::with_options(
            &config.name,
            QueueOptions {
                connection: config.connection(),
                ..QueueOptions::default()
            },
        )
        .await
        .with_context(|| format!("cannot connect to {where_}"))?;
        let events = Arc::new(
            QueueEvents::with_options(
                &config.name,
                QueueEventsOptions {
                    connection: config.connection(),
                    blocking_timeout: 1000,
                    ..QueueEventsOptions::default()
                },
            )
            .await
            .with_context(|| format!("cannot read the events of {where_}"))?,
        );
        let watchers = Watchers::default();
        let router = tokio::spawn(route(events.clone(), watchers.clone()));
        // Host and process id, for whoever reads the keys; the random part keeps two
        // processes with the same pid on same-named hosts apart.
        let heartbeat = format!("{}-{}", process_name(), crate::jobs::random_id());
        let key = config.alive_key(&heartbeat);
        let mut conn = queue.connection().connection();
        beat(&mut conn, &key, config.parent_timeout_s)
            .await
            .with_context(|| format!("cannot write to {where_}"))?;
        let every = heartbeat_every(config.parent_timeout_s);
        let timeout_s = config.parent_timeout_s;
        let adopted: Arc<Mutex<std::collections::BTreeSet<String>>> = Arc::default();
        let (beaten, keys) = (adopted.clone(), config.clone());
        let beating = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let others: Vec<String> = beaten
                    .lock()
                    .expect("heartbeats poisoned")
                    .iter()
                    .cloned()
                    .collect();
                let mine = std::iter::once(key.clone());
                for key in mine.chain(others.iter().map(|id| keys.alive_key(id))) {
                    if let Err(error) = beat(&mut conn, &key, timeout_s).await {
                        tracing::debug!("heartbeat: {error}");
                    }
                }
            }
        });
        Ok(Arc::new(RemoteQueue {
            config: config.clone(),
            queue,
            watchers,
            events,
            router,
            heartbeat,
            adopted,
            beating,
        }))
    }

    /// The queue's settings.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// The BullMQ queue.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Adds a job with warren's options: id, attempts with backoff, retention.
    /// When a worker's agent enqueues it, `owner` is the worker's job: the new job is
    /// recorded under it first, so that a retry of `owner` can cancel it.
    pub async fn enqueue(
        &self,
        id: &str,
        data: &JobData,
        owner: Option<&str>,
    ) -> anyhow::Result<()> {
        if let Some(owner) = owner {
            let mut conn = self.queue.connection().connection();
            let key = self.config.children_key(owner);
            redis::pipe()
                .sadd(&key, id)
                .ignore()
                .expire(&key, self.config.marker_ttl_s() as i64)
                .ignore()
                .query_async::<()>(&mut conn)
                .await
                .with_context(|| format!("recording job {id} under job {owner}"))?;
        }
        let options = JobOptions {
            job_id: Some(id.to_string()),
            attempts: Some(self.config.attempts),
            backoff: Some(bullmq::types::BackoffStrategy::Exponential(500)),
            remove_on_complete: self.config.retention(),
            // BullMQ's job-level option wins over the worker's: a failed job is kept as
            // `keep_failed_s` says (left out: kept until removed by hand).
            remove_on_fail: self.config.failed_retention(),
            ..JobOptions::default()
        };
        self.queue
            .add(JOB_NAME, data)
            .options(options)
            .await
            .with_context(|| {
                format!(
                    "cannot add job {id} to queue `{}` at {}",
                    self.config.name,
                    self.config.redacted_url()
                )
            })?;
        Ok(())
    }

    /// Takes over the heartbeat of the process that enqueued job `id`, when the job
    /// exists (a resumed run re-attaching to a child the dead process enqueued): its
    /// worker then keeps running it, and enqueuing it again is a no-op (BullMQ keeps
    /// one job per id), so the child is neither lost nor started twice.
    pub(crate) async fn adopt(&self, id: &str) {
        let job = match self.queue.get_job(id).await {
            Ok(job) => job,
            Err(error) => {
                tracing::warn!(job = %id, "reading the job to re-attach to it: {error}");
                return;
            }
        };
        let heartbeat =
            job.and_then(|job| job.data().get("heartbeat")?.as_str().map(str::to_string));
        if let Some(heartbeat) = heartbeat.filter(|h| *h != self.heartbeat) {
            tracing::info!(job = %id, "re-attached to a job of the resumed run");
            let mut conn = self.queue.connection().connection();
            if let Err(error) = beat(
                &mut conn,
                &self.config.alive_key(&heartbeat),
                self.config.parent_timeout_s,
            )
            .await
            {
                tracing::debug!("heartbeat: {error}");
            }
            self.adopted
                .lock()
                .expect("heartbeats poisoned")
                .insert(heartbeat);
        }
    }

    /// Cancels the sub-agent jobs an earlier attempt of job `owner` enqueued (its
    /// worker died or handed it back): the new attempt starts its own, and nothing
    /// would read theirs. Returns how many there were.
    pub(crate) async fn cancel_children_of(&self, owner: &str) -> anyhow::Result<usize> {
        let mut conn = self.queue.connection().connection();
        let key = self.config.children_key(owner);
        let children: Vec<String> = redis::cmd("SMEMBERS")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .context("reading the earlier attempt's sub-agent jobs")?;
        for child in &children {
            self.cancel(child).await?;
        }
        redis::cmd("DEL")
            .arg(&key)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(children.len())
    }

    /// Asks for job `id` to be cancelled. A job no worker has taken yet is removed
    /// at once (`true`); a running one is cancelled by its worker, which polls the
    /// cancel key (`false`).
    pub async fn cancel(&self, id: &str) -> anyhow::Result<bool> {
        let mut conn = self.queue.connection().connection();
        redis::cmd("SET")
            .arg(self.config.cancel_key(id))
            .arg("1")
            .arg("EX")
            .arg(self.config.marker_ttl_s())
            .query_async::<()>(&mut conn)
            .await
            .context("setting the cancel key")?;
        let state = self.queue.get_job_state(id).await?;
        if matches!(
            state,
            JobState::Waiting | JobState::Delayed | JobState::Prioritized
        ) {
            return Ok(self.queue.remove(id).await?);
        }
        Ok(false)
    }

    /// Whether `key` exists; `None` when Redis does not answer.
    async fn exists(&self, key: &str) -> Option<bool> {
        let mut conn = self.queue.connection().connection();
        redis::cmd("EXISTS")
            .arg(key)
            .query_async::<u32>(&mut conn)
            .await
            .ok()
            .map(|n| n > 0)
    }

    /// Whether the parent asked for job `id` to be cancelled (not when Redis does not
    /// answer: the worker asks again).
    pub(crate) async fn cancel_requested(&self, id: &str) -> bool {
        self.exists(&self.config.cancel_key(id)).await == Some(true)
    }

    /// Why running job `id` must stop, if it must: its parent set the cancel key, or
    /// another client finished or removed the job (a producer's BullMQ
    /// `job.moveToFailed(error, "0")`: a job some other client has ended is not the
    /// worker's to finish). `None` also when Redis does not answer (asked again).
    pub(crate) async fn stop_requested(&self, id: &str) -> Option<StopRequest> {
        let mut conn = self.queue.connection().connection();
        let job_key = self.config.job_key(id);
        let (cancel, exists, (finished_on, failed_reason)): (
            bool,
            bool,
            (Option<String>, Option<String>),
        ) = redis::pipe()
            .exists(self.config.cancel_key(id))
            .exists(&job_key)
            .cmd("HMGET")
            .arg(&job_key)
            .arg("finishedOn")
            .arg("failedReason")
            .query_async(&mut conn)
            .await
            .ok()?;
        StopRequest::of(cancel, exists, finished_on.is_some(), failed_reason)
    }

    /// Whether the parent process with heartbeat `id` is gone (its key expired).
    /// Unknown (Redis unreachable) counts as not gone.
    pub(crate) async fn parent_gone(&self, id: &str) -> bool {
        self.exists(&self.config.alive_key(id)).await == Some(false)
    }

    /// Waits (up to `within`) until Redis answers.
    pub(crate) async fn wait_until_reachable(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            let mut conn = self.queue.connection().connection();
            if redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The outcome of job `id` if it has finished (or vanished), from its hash.
    pub async fn finished(&self, id: &str) -> anyhow::Result<Option<AgentOutcome>> {
        let state = self.queue.get_job_state(id).await?;
        let job = match state {
            JobState::Completed | JobState::Failed => self.queue.get_job(id).await?,
            JobState::Unknown => None,
            _ => return Ok(None),
        };
        let Some(job) = job else {
            return Ok(Some(failed_outcome(format!(
                "job {id} is no longer in queue `{}` (removed, or its result expired after keep_results_s)",
                self.config.name
            ))));
        };
        if state == JobState::Completed {
            // A job some other consumer completed with a value of its own is finished
            // all the same: its sub-agent ends with an error saying so, never waits on.
            return Ok(Some(match serde_json::from_str::<JobOutcome>(job.returnvalue()) {
                Ok(outcome) => outcome.into_outcome(),
                Err(error) => failed_outcome(format!(
                    "job {id} was completed by something that is not a warren worker: its return value is not a warren outcome ({error}): {}",
                    crate::llm::excerpt(job.returnvalue())
                )),
            }));
        }
        let (logs, _) = self
            .queue
            .get_job_logs(id, 0, 50, true)
            .await
            .unwrap_or_default();
        // A cancelled job fails; its worker left the agent's outcome in its log.
        let (newest, _) = self
            .queue
            .get_job_logs(id, 0, 4, false)
            .await
            .unwrap_or_default();
        if let Some(outcome) = JobOutcome::from_log(&newest) {
            return Ok(Some(outcome.into_outcome()));
        }
        let mut error = format!(
            "job {id} failed after {} attempt(s): {}",
            job.attempts_made().max(1),
            job.failed_reason()
        );
        if !logs.is_empty() {
            error.push_str("\nattempts:\n");
            error.push_str(&logs.join("\n"));
        }
        Ok(Some(failed_outcome(error)))
    }

    fn watch(&self, id: &str) -> mpsc::UnboundedReceiver<Notice> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.watchers
            .lock()
            .expect("watchers poisoned")
            .insert(id.to_string(), sender);
        receiver
    }

    fn unwatch(&self, id: &str) {
        self.watchers.lock().expect("watchers poisoned").remove(id);
    }
}

/// Renews heartbeat `key` for `timeout_s`.
async fn beat(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    timeout_s: u64,
) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(key)
        .arg("1")
        .arg("EX")
        .arg(timeout_s)
        .query_async(conn)
        .await
}

/// Fails within a few seconds when Redis does not answer (the queue's own connection
/// retries for much longer before giving up).
pub(crate) async fn reachable(config: &QueueConfig) -> anyhow::Result<()> {
    let url = config.redis.as_deref().unwrap_or_default();
    let client = redis::Client::open(url).context("not a Redis URL")?;
    let ping = async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    match tokio::time::timeout(Duration::from_secs(5), ping).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(anyhow::anyhow!("Redis did not answer: {error}")),
        Err(_) => Err(anyhow::anyhow!("Redis did not answer within 5 s")),
    }
}

fn failed_outcome(error: String) -> AgentOutcome {
    AgentOutcome {
        state: AgentState::Error,
        text: String::new(),
        output: None,
        error: Some(error),
        turns: 0,
        usage: Usage::default(),
        cost_usd: 0.0,
        duration: Duration::ZERO,
    }
}

/// Reads the queue's event stream and hands each job's events to its watcher.
async fn route(events: Arc<QueueEvents>, watchers: Watchers) {
    while let Some(entry) = events.next_event().await {
        let (id, notice) = match entry.event {
            QueueEvent::Progress { job_id, data } => match progress_events(&data) {
                None => continue,
                Some(Ok(batch)) => (job_id, Notice::Events(batch)),
                Some(Err(error)) => {
                    tracing::warn!(%job_id, %error, "ignoring malformed warren events");
                    continue;
                }
            },
            QueueEvent::Completed { job_id, .. } | QueueEvent::Failed { job_id, .. } => {
                (job_id, Notice::Finished)
            }
            QueueEvent::Error { message } => {
                tracing::debug!(%message, "queue events: connection error (reconnecting)");
                continue;
            }
            _ => continue,
        };
        let watchers = watchers.lock().expect("watchers poisoned");
        if let Some(sender) = watchers.get(&id) {
            let _ = sender.send(notice);
        }
    }
}

/// Children run on workers: the job is enqueued, the remote agents' events are
/// mirrored into the parent's tree, and the job's outcome is returned once.
#[async_trait::async_trait]
impl Backend for RemoteQueue {
    async fn run(&self, job: &JobHandle, spec: ChildSpec) -> AgentOutcome {
        run_remote(job, self, JobData::from_spec(spec)).await
    }
}

async fn run_remote(job: &JobHandle, queue: &RemoteQueue, mut data: JobData) -> AgentOutcome {
    data.heartbeat = Some(queue.heartbeat.clone());
    let started = Instant::now();
    let child = job.place();
    let id = format!("{}-{}", child.tree.run_id, child.id);
    if child.tree.resume.is_some() {
        queue.adopt(&id).await;
    }
    let mut notices = queue.watch(&id);
    let mut mirror = Mirror::new(job);
    let mut outcome = wait_remote(child, queue, &id, &data, &mut notices, &mut mirror).await;
    queue.unwatch(&id);
    // Events that arrived with the result reach the view before the end.
    while let Ok(Notice::Events(events)) = notices.try_recv() {
        mirror.apply(events);
    }
    if outcome.duration.is_zero() {
        outcome.duration = started.elapsed();
    }
    // The subtree's cost was charged turn by turn as its events came; charge what
    // they missed (events lost to a Redis restart, or sent after the result).
    child
        .tree
        .charge((outcome.cost_usd - mirror.charged).max(0.0));
    mirror.finish_descendants();
    outcome
}

async fn wait_remote(
    child: &crate::jobs::Placement,
    queue: &RemoteQueue,
    id: &str,
    data: &JobData,
    notices: &mut mpsc::UnboundedReceiver<Notice>,
    mirror: &mut Mirror<'_>,
) -> AgentOutcome {
    if let Err(error) = queue
        .enqueue(id, data, child.tree.queue_job.as_deref())
        .await
    {
        return failed_outcome(format!("{error:#}"));
    }
    tracing::info!(job = %id, profile = %data.profile, "queued on redis");
    let mut poll = tokio::time::interval(PARENT_POLL);
    let mut cancel_deadline: Option<tokio::time::Instant> = None;
    // Set when the run's budget ran out while the job ran: it is cancelled and ends
    // `budget_exceeded`, as an in-process agent would at its next turn.
    let mut over_budget: Option<String> = None;
    loop {
        if over_budget.is_none() && cancel_deadline.is_none() && child.tree.over_budget() {
            let reason = format!(
                "the run's budget of ${:.4} is used up (spent ${:.4}; defaults.budget_usd)",
                child.tree.limits.budget_usd.unwrap_or_default(),
                child.tree.spent()
            );
            tracing::info!(job = %id, "{reason}: cancelling the remote job");
            over_budget = Some(reason);
            cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
            match queue.cancel(id).await {
                Ok(true) => {
                    return budget_outcome(AgentOutcome::cancelled_before_start(), over_budget)
                }
                Ok(false) => {}
                Err(error) => tracing::warn!(job = %id, "cancel: {error:#}"),
            }
        }
        let outcome = tokio::select! {
            _ = child.cancel.cancelled(), if cancel_deadline.is_none() => {
                cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                match queue.cancel(id).await {
                    Ok(true) => Some(AgentOutcome::cancelled_before_start()),
                    Ok(false) => None,
                    Err(error) => {
                        tracing::warn!(job = %id, "cancel: {error:#}");
                        None
                    }
                }
            }
            _ = async { tokio::time::sleep_until(cancel_deadline.expect("set")).await }, if cancel_deadline.is_some() => {
                Some(AgentOutcome {
                    error: Some(format!("cancelled; its worker did not confirm within {} s", CANCEL_GRACE.as_secs())),
                    ..AgentOutcome::cancelled_before_start()
                })
            }
            Some(notice) = notices.recv() => match notice {
                Notice::Events(events) => {
                    mirror.apply(events);
                    None
                }
                Notice::Finished => queue.finished(id).await.ok().flatten(),
            },
            _ = poll.tick() => match queue.finished(id).await {
                Ok(outcome) => outcome,
                Err(error) => {
                    tracing::debug!(job = %id, "checking the job: {error:#}");
                    None
                }
            },
        };
        if let Some(outcome) = outcome {
            return budget_outcome(outcome, over_budget);
        }
    }
}

/// A job cancelled because the run's budget ran out ends `budget_exceeded`, saying so.
fn budget_outcome(outcome: AgentOutcome, over_budget: Option<String>) -> AgentOutcome {
    match over_budget {
        Some(reason) if outcome.state == AgentState::Cancelled => AgentOutcome {
            state: AgentState::BudgetExceeded,
            error: Some(reason),
            ..outcome
        },
        _ => outcome,
    }
}
