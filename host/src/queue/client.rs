//! The parent's side of a remote sub-agent: enqueue it, mirror its events into the
//! run (so the live view and the event log show it and its descendants), wait for
//! its result, and cancel it.
//!
//! One [`RemoteQueue`] per host reads the queue's BullMQ event stream and routes
//! progress and completion events to the waiting children by job id. The job's hash
//! in Redis stays the source of truth: one task per host also looks at the hashes of
//! every job it waits for, about once a second, so a result is never missed if events
//! are lost (a Redis restart, a trimmed stream). That look costs Redis O(1) per job
//! (a field of the job's hash, many jobs per round trip): BullMQ's `getState` scans
//! the wait list, and ten thousand children each asking it every second kept Redis so
//! busy that workers' locks lapsed and the tree stalled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use bullmq::{
    JobOptions, JobState, Queue, QueueEvent, QueueEvents, QueueEventsOptions, QueueOptions,
};
use tokio::sync::mpsc;

mod mail;

use super::wire::{
    heartbeat_every, process_name, progress_events, JobData, JobOutcome, Progress, JOB_NAME,
    PARENT_POLL,
};
use crate::config::QueueConfig;
use crate::jobs::RemoteEnd;
use crate::outcome::{AgentOutcome, AgentState};

/// What the event listener tells a waiting child.
pub(super) enum Notice {
    /// Agent events from the worker.
    Events(Progress),
    /// The job completed or failed: look at its state.
    Finished,
}

/// Who waits for which job: its notices, and whether the job was added yet (until it
/// is, a missing hash means "not yet", not "removed").
type Watchers = Arc<Mutex<HashMap<String, Watcher>>>;

struct Watcher {
    notices: mpsc::UnboundedSender<Notice>,
    added: bool,
}

/// A connection to the queue: enqueues jobs and routes their events.
pub(crate) struct RemoteQueue {
    config: QueueConfig,
    queue: Queue,
    watchers: Watchers,
    events: Arc<QueueEvents>,
    router: tokio::task::JoinHandle<()>,
    /// Looks at the waited-for jobs' hashes (events may be lost).
    poller: tokio::task::JoinHandle<()>,
    /// This process's heartbeat id (see [`JobData::heartbeat`]).
    pub(super) heartbeat: String,
    /// Heartbeats of processes that died, renewed by this one since it resumed their
    /// runs: their jobs' workers keep running them.
    adopted: Arc<Mutex<std::collections::BTreeSet<String>>>,
    beating: tokio::task::JoinHandle<()>,
}

impl Drop for RemoteQueue {
    fn drop(&mut self) {
        self.router.abort();
        self.poller.abort();
        self.beating.abort();
        let events = self.events.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { events.close().await });
        }
    }
}

impl RemoteQueue {
    /// Connects to the queue `config` names and starts reading its events.
    pub(crate) async fn connect(config: &QueueConfig) -> anyhow::Result<Arc<RemoteQueue>> {
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
        let poller = tokio::spawn(poll_finished(
            config.clone(),
            queue.connection().connection(),
            watchers.clone(),
        ));
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
            poller,
            heartbeat,
            adopted,
            beating,
        }))
    }

    /// The queue's settings.
    pub(crate) fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Adds a job with warren's options: id, attempts with backoff, retention.
    /// When a worker's agent enqueues it, `owner` is the worker's job: the new job is
    /// recorded under it first, so that a retry of `owner` can cancel it.
    pub(crate) async fn enqueue(
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

    /// Before job `id` runs, in one round trip: whether its parent asked for it to be
    /// cancelled, and the sub-agent jobs an earlier attempt of it enqueued (its worker
    /// died or handed it back), for [`RemoteQueue::abandon_children`].
    pub(crate) async fn before_start(&self, id: &str) -> anyhow::Result<(bool, Vec<String>)> {
        let mut conn = self.queue.connection().connection();
        let (cancel, children): (u32, Vec<String>) = redis::pipe()
            .exists(self.config.cancel_key(id))
            .cmd("SMEMBERS")
            .arg(self.config.children_key(id))
            .query_async(&mut conn)
            .await
            .context("reading the job's cancel flag and an earlier attempt's sub-agent jobs")?;
        Ok((cancel > 0, children))
    }

    /// Cancels `children`, the sub-agent jobs an earlier attempt of job `owner`
    /// enqueued: the new attempt starts its own, and nothing would read theirs. They
    /// stay listed as abandoned ([`RemoteQueue::abandoned`]), so the parent accounts
    /// for each.
    pub(crate) async fn abandon_children(
        &self,
        owner: &str,
        children: &[String],
    ) -> anyhow::Result<()> {
        if children.is_empty() {
            return Ok(()); // the first attempt, or one that spawned nothing
        }
        let mut conn = self.queue.connection().connection();
        let key = self.config.children_key(owner);
        for child in children {
            self.cancel(child).await?;
        }
        let abandoned = self.config.abandoned_key(owner);
        redis::pipe()
            .atomic()
            .cmd("SUNIONSTORE")
            .arg(&abandoned)
            .arg(&abandoned)
            .arg(&key)
            .ignore()
            .del(&key)
            .ignore()
            .expire(&abandoned, self.config.marker_ttl_s() as i64)
            .ignore()
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    /// The sub-agent jobs earlier attempts of job `owner` enqueued and a later
    /// attempt cancelled.
    pub(crate) async fn abandoned(&self, owner: &str) -> anyhow::Result<Vec<String>> {
        let mut conn = self.queue.connection().connection();
        Ok(redis::cmd("SMEMBERS")
            .arg(self.config.abandoned_key(owner))
            .query_async(&mut conn)
            .await?)
    }

    /// The profile and task of job `id`, from its data.
    pub(crate) async fn profile_and_task(&self, id: &str) -> Option<(String, String)> {
        let job = self.queue.get_job(id).await.ok()??;
        let data = job.data();
        let field = |name: &str| data.get(name).and_then(serde_json::Value::as_str);
        Some((
            field("profile")?.to_string(),
            field("task").unwrap_or_default().to_string(),
        ))
    }

    /// Asks for job `id` to be cancelled. A job no worker has taken yet is removed
    /// at once (`true`); a running one is cancelled by its worker, which polls the
    /// cancel key (`false`).
    pub(crate) async fn cancel(&self, id: &str) -> anyhow::Result<bool> {
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
    pub(crate) async fn finished(&self, id: &str) -> anyhow::Result<Option<RemoteEnd>> {
        // Its hash first: BullMQ's `getState` scans the wait list for a job that is
        // neither completed nor failed, and a failed attempt that will be retried
        // sends a `failed` event too.
        let mut conn = self.queue.connection().connection();
        let (finished_on, timestamp): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(self.config.job_key(id))
            .arg("finishedOn")
            .arg("timestamp")
            .query_async(&mut conn)
            .await?;
        if finished_on.is_none() && timestamp.is_some() {
            return Ok(None);
        }
        let state = self.queue.get_job_state(id).await?;
        let job = match state {
            JobState::Completed | JobState::Failed => self.queue.get_job(id).await?,
            JobState::Unknown => None,
            _ => return Ok(None),
        };
        let Some(job) = job else {
            return Ok(Some(
                failed_outcome(format!(
                    "job {id} is no longer in queue `{}` (removed, or its result expired after keep_results_s)",
                    self.config.name
                ))
                .into(),
            ));
        };
        if state == JobState::Completed {
            // A job some other consumer completed with a value of its own is finished
            // all the same: its sub-agent ends with an error saying so, never waits on.
            return Ok(Some(match serde_json::from_str::<JobOutcome>(job.returnvalue()) {
                Ok(mut outcome) => RemoteEnd {
                    history: outcome.history.take(),
                    outcome: outcome.into_outcome(),
                },
                Err(error) => failed_outcome(format!(
                    "job {id} was completed by something that is not a warren worker: its return value is not a warren outcome ({error}): {}",
                    crate::llm::excerpt(job.returnvalue())
                ))
                .into(),
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
            return Ok(Some(outcome.into_outcome().into()));
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
        Ok(Some(failed_outcome(error).into()))
    }

    pub(super) fn watch(&self, id: &str) -> mpsc::UnboundedReceiver<Notice> {
        let (notices, receiver) = mpsc::unbounded_channel();
        let watcher = Watcher {
            notices,
            added: false,
        };
        self.watchers
            .lock()
            .expect("watchers poisoned")
            .insert(id.to_string(), watcher);
        receiver
    }

    /// Job `id` is in the queue now: from here a missing hash means it was removed.
    pub(super) fn added(&self, id: &str) {
        if let Some(watcher) = self.watchers.lock().expect("watchers poisoned").get_mut(id) {
            watcher.added = true;
        }
    }

    pub(super) fn unwatch(&self, id: &str) {
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

/// An agent that failed before it ran, for `error`.
pub(super) fn failed_outcome(error: String) -> AgentOutcome {
    AgentOutcome {
        state: AgentState::Error,
        error: Some(error),
        ..AgentOutcome::cancelled_before_start()
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
        if let Some(watcher) = watchers.get(&id) {
            let _ = watcher.notices.send(notice);
        }
    }
}

/// Jobs looked at per round trip by [`poll_finished`].
const POLL_BATCH: usize = 1000;

/// Every [`PARENT_POLL`], tells each waiting child whose job's hash says it finished
/// (or whose hash is gone) to look at its job. One pipelined `HMGET` per job, a
/// thousand per round trip; with more than a thousand jobs waited for, the round
/// takes proportionally longer, so Redis is never asked more than about a thousand
/// of these a second by one host.
async fn poll_finished(
    config: QueueConfig,
    mut conn: impl redis::aio::ConnectionLike + Send,
    watchers: Watchers,
) {
    loop {
        let ids: Vec<String> = watchers
            .lock()
            .expect("watchers poisoned")
            .iter()
            .filter(|(_, watcher)| watcher.added)
            .map(|(id, _)| id.clone())
            .collect();
        let rounds = ids.len().div_ceil(POLL_BATCH).max(1) as u32;
        tokio::time::sleep(PARENT_POLL * rounds).await;
        for batch in ids.chunks(POLL_BATCH) {
            let mut pipe = redis::pipe();
            for id in batch {
                pipe.cmd("HMGET")
                    .arg(config.job_key(id))
                    .arg("finishedOn")
                    .arg("timestamp");
            }
            let found: Vec<(Option<String>, Option<String>)> =
                match pipe.query_async(&mut conn).await {
                    Ok(found) => found,
                    Err(error) => {
                        tracing::debug!("looking at the jobs waited for: {error}");
                        break;
                    }
                };
            let watchers = watchers.lock().expect("watchers poisoned");
            for (id, (finished_on, timestamp)) in batch.iter().zip(found) {
                if finished_on.is_some() || timestamp.is_none() {
                    if let Some(watcher) = watchers.get(id) {
                        let _ = watcher.notices.send(Notice::Finished);
                    }
                }
            }
        }
    }
}
