//! MCP tasks (the `tasks` utility of the 2025-11-25 revision) for `spawn_agent` and
//! `await_agents` over Streamable HTTP: a `tools/call` with a `task` parameter answers
//! at once with a task id; `tasks/get`, `tasks/result`, `tasks/list` and
//! `tasks/cancel` follow it. An `await_agents` task waits for its MCP session's jobs
//! (which end with the session).
//!
//! A `spawn_agent` task is not its MCP session's: it runs in a warren [`Session`] of its own (a
//! journaled run whose root is the task), held by the server's task table, so its
//! agents keep running when the client disconnects and any later session with the
//! same credential ([`Owner`]) can fetch it. A finished task is kept for
//! [`TaskLimits::retention`] after it ends; an owner holds at most
//! [`TaskLimits::max_tasks`] tasks (running or kept), and a result over
//! [`TaskLimits::max_result_bytes`] is kept as a tool error saying so.
//!
//! A task's run is journaled as any session's; when it ends, the task (its id, owner,
//! times, status and kept result) is written beside that run's journal
//! (`mcp-task-ID.json`), and a server started later loads the tasks still within their
//! retention from there, so their results survive a restart. A task still working
//! when the server stops is not restored (its run stays in the journal, unfinished).
//!
//! rmcp 3.11 speaks the later tasks extension (SEP-2663), not this revision's
//! methods, so the HTTP gate hands these requests here before rmcp sees them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::auth::Owner;
use super::progress::CallProgress;
use super::server::tool_result;
use super::server::SessionOptions;
use crate::host::{Answer, Host, Session};
use saved::TASK_FILE_PREFIX;
use stamps::{epoch_ms, iso8601, task_id};

mod saved;
mod stamps;

/// How long an `await_agents` task without `timeout_s` waits at most: its agents'
/// session ends first.
const AWAIT_TASK_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// How often a client is told to poll `tasks/get`, in milliseconds.
const POLL_INTERVAL_MS: u64 = 500;

/// What the task table may hold (`warren mcp` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskLimits {
    /// How long a finished task stays fetchable after it ends (`--task-retention`,
    /// default 1 h).
    pub retention: Duration,
    /// Tasks one owner may hold at once, running or finished and kept
    /// (`--max-tasks`, default 32); a task over it is refused.
    pub max_tasks: usize,
    /// The largest result kept, serialized (`--task-result-limit`, default 1 MiB);
    /// a larger one is replaced by a tool error naming its size.
    pub max_result_bytes: usize,
}

impl Default for TaskLimits {
    fn default() -> TaskLimits {
        TaskLimits {
            retention: Duration::from_secs(60 * 60),
            max_tasks: 32,
            max_result_bytes: 1 << 20,
        }
    }
}

/// A JSON-RPC error: its code and message.
pub(super) type RpcError = (i64, String);

/// Where a task stands.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum State {
    /// Its call is under way.
    Working,
    /// Its call ended; the `CallToolResult` (an error result: `failed`).
    Done { result: Value, failed: bool },
    /// Cancelled by `tasks/cancel`; its agents were cancelled.
    Cancelled,
}

/// One task.
struct Task {
    owner: Owner,
    created: SystemTime,
    updated: SystemTime,
    state: State,
    /// The latest progress of its agents (turns, tools, tokens, cost).
    message: Option<String>,
    /// When it ended, for its retention.
    ended: Option<Instant>,
    /// Cancels its call and its agents.
    cancel: CancellationToken,
    /// True once it ended (for `tasks/result`, which waits).
    done: watch::Receiver<bool>,
}

/// The server's tasks, shared by its sessions.
pub(super) struct Tasks {
    host: Host,
    options: SessionOptions,
    limits: TaskLimits,
    table: Arc<Mutex<HashMap<String, Task>>>,
    /// The open MCP sessions' warren sessions, by `Mcp-Session-Id`.
    sessions: Mutex<HashMap<String, Weak<Session>>>,
}

impl Tasks {
    /// The task table, with the ended tasks of earlier servers still within
    /// `limits.retention` (read from the journal).
    pub(super) fn new(host: Host, options: SessionOptions, limits: TaskLimits) -> Tasks {
        let kept = host
            .config()
            .journal_dir
            .as_deref()
            .map(|dir| {
                load(
                    dir,
                    limits.retention,
                    limits.max_result_bytes + saved::TASK_FILE_SLACK_BYTES,
                )
            })
            .unwrap_or_default();
        if !kept.is_empty() {
            tracing::info!(
                tasks = kept.len(),
                "MCP tasks of earlier servers loaded from the journal"
            );
        }
        Tasks {
            host,
            options,
            limits,
            table: Arc::new(Mutex::new(kept)),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The JSON-RPC result for `method` with `params` asked by `owner`, when it is a
    /// task request (`None`: not one; rmcp answers it).
    pub(super) async fn answer(
        &self,
        owner: Owner,
        mcp_session: &str,
        method: &str,
        params: &Value,
    ) -> Option<Result<Value, RpcError>> {
        let id = || params["taskId"].as_str().unwrap_or_default().to_string();
        Some(match method {
            "tools/call" if params.get("task").is_some() => self.create(owner, mcp_session, params),
            "tasks/get" => self.get(owner, &id()),
            "tasks/result" => self.result(owner, &id()).await,
            "tasks/list" => Ok(self.list(owner)),
            "tasks/cancel" => self.cancel(owner, &id()),
            _ => return None,
        })
    }

    /// Records that MCP session `id` is warren session `session` (for its
    /// `await_agents` tasks), forgetting the sessions that ended.
    pub(super) fn opened(&self, id: &str, session: Weak<Session>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, session| session.strong_count() > 0);
        sessions.insert(id.to_string(), session);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Task>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops the finished tasks past their retention.
    fn expire(&self, table: &mut HashMap<String, Task>) {
        let retention = self.limits.retention;
        table.retain(|_, task| task.ended.is_none_or(|ended| ended.elapsed() < retention));
    }

    /// Starts a task for a `tools/call` with a `task` parameter.
    fn create(&self, owner: Owner, mcp_session: &str, params: &Value) -> Result<Value, RpcError> {
        let name = params["name"].as_str().unwrap_or_default().to_string();
        let mut arguments = match &params["arguments"] {
            Value::Object(arguments) => arguments.clone(),
            Value::Null => serde_json::Map::new(),
            _ => return Err((-32602, "`arguments` must be an object".into())),
        };
        if !matches!(name.as_str(), "spawn_agent" | "await_agents") {
            return Err(not_a_task(&name));
        }
        let id = task_id().map_err(|error| (-32603, format!("making a task id: {error}")))?;
        let (done_sender, done) = watch::channel(false);
        let cancel = CancellationToken::new();
        // The limit first: a refused task makes nothing (no session, no journaled run).
        self.register(&id, owner, cancel.clone(), done)?;
        let session = self
            .session_for(&name, mcp_session, &mut arguments)
            .inspect_err(|_| drop(self.lock().remove(&id)))?;
        // Its records (its agents' included) go to its credential's sessions only.
        let span = tracing::info_span!(super::logging::TASK_SPAN, mcp.owner = %hex::encode(owner));
        span.in_scope(|| tracing::info!(task = %id, tool = %name, "MCP task started"));
        let saved_at = self.host.config().journal_dir.as_ref().map(|dir| {
            dir.join(&session.tree().run_id)
                .join(format!("{TASK_FILE_PREFIX}{id}.json"))
        });
        let run = TaskRun {
            table: self.table.clone(),
            max_result_bytes: self.limits.max_result_bytes,
            task: id.clone(),
            own_session: name == "spawn_agent",
            name,
            arguments: Value::Object(arguments).to_string(),
            saved_at,
        };
        tokio::spawn(run.run(session, cancel, done_sender).instrument(span));
        let task = self
            .describe(&id)
            .ok_or((-32603, "the task vanished".into()))?;
        Ok(json!({ "task": task }))
    }

    /// The warren session tool `name` runs in as a task: a new one for
    /// `spawn_agent`, MCP session `mcp_session`'s own for `await_agents`; each
    /// task's defaults go into `arguments`.
    fn session_for(
        &self,
        name: &str,
        mcp_session: &str,
        arguments: &mut serde_json::Map<String, Value>,
    ) -> Result<Arc<Session>, RpcError> {
        match name {
            "spawn_agent" => {
                // The task is the wait: its result is the child's, as a foreground
                // call's; it runs in a session of its own, outliving the caller's.
                arguments.entry("background").or_insert(Value::Bool(false));
                let session = self
                    .host
                    .session(self.options.profile.as_deref())
                    .map_err(|error| (-32603, format!("{error:#}")))?;
                Ok(Arc::new(session))
            }
            "await_agents" => {
                // The caller's agents: the task waits until they end (no await limit),
                // which is when the caller's session ends at the latest.
                arguments
                    .entry("timeout_s")
                    .or_insert(json!(AWAIT_TASK_TIMEOUT.as_secs()));
                self.sessions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(mcp_session)
                    .and_then(Weak::upgrade)
                    .ok_or((-32602, "this MCP session has ended".to_string()))
            }
            _ => Err(not_a_task(name)),
        }
    }

    /// Enters task `id` of `owner` in the table, working; refused when the owner
    /// holds `max_tasks` already.
    fn register(
        &self,
        id: &str,
        owner: Owner,
        cancel: CancellationToken,
        done: watch::Receiver<bool>,
    ) -> Result<(), RpcError> {
        let now = SystemTime::now();
        let mut table = self.lock();
        self.expire(&mut table);
        let held = table.values().filter(|task| task.owner == owner).count();
        if held >= self.limits.max_tasks {
            return Err((
                -32000,
                format!(
                    "this credential holds {held} tasks, the limit (--max-tasks): a finished task is dropped {} s after it ends (--task-retention); cancel one or wait",
                    self.limits.retention.as_secs()
                ),
            ));
        }
        table.insert(
            id.to_string(),
            Task {
                owner,
                created: now,
                updated: now,
                state: State::Working,
                message: None,
                ended: None,
                cancel,
                done,
            },
        );
        Ok(())
    }

    /// The task `id` as the client sees it (`Task` of the spec).
    fn describe(&self, id: &str) -> Option<Value> {
        let table = self.lock();
        let task = table.get(id)?;
        Some(self.view(id, task))
    }

    fn view(&self, id: &str, task: &Task) -> Value {
        let (status, message) = match &task.state {
            State::Working => ("working", task.message.clone()),
            State::Done { failed: false, .. } => ("completed", task.message.clone()),
            State::Done { result, .. } => (
                "failed",
                result["content"][0]["text"]
                    .as_str()
                    .map(|text| crate::events::bounded(text, 500).to_string()),
            ),
            State::Cancelled => (
                "cancelled",
                Some("cancelled by tasks/cancel; its agents were cancelled".into()),
            ),
        };
        let mut view = json!({
            "taskId": id,
            "status": status,
            "createdAt": iso8601(task.created),
            "lastUpdatedAt": iso8601(task.updated),
            "ttl": u64::try_from(self.limits.retention.as_millis()).unwrap_or(u64::MAX),
            "pollInterval": POLL_INTERVAL_MS,
        });
        if let Some(message) = message {
            view["statusMessage"] = message.into();
        }
        view
    }

    /// `owner`'s task `id`, or the error for one that is not (another owner's task is
    /// not found either).
    fn find<'a>(
        &self,
        table: &'a mut HashMap<String, Task>,
        owner: Owner,
        id: &str,
    ) -> Result<&'a mut Task, RpcError> {
        self.expire(table);
        table
            .get_mut(id)
            .filter(|task| task.owner == owner)
            .ok_or_else(|| {
                (
                    -32602,
                    format!(
                        "no task `{}` (it may have expired: a finished task is kept {} s)",
                        crate::events::bounded(id, 100),
                        self.limits.retention.as_secs()
                    ),
                )
            })
    }

    fn get(&self, owner: Owner, id: &str) -> Result<Value, RpcError> {
        let mut table = self.lock();
        let task = self.find(&mut table, owner, id)?;
        let task: &Task = task;
        Ok(self.view(id, task))
    }

    /// The task's `CallToolResult`, once it ended (waits until then).
    async fn result(&self, owner: Owner, id: &str) -> Result<Value, RpcError> {
        let mut done = {
            let mut table = self.lock();
            self.find(&mut table, owner, id)?.done.clone()
        };
        let _ = done.wait_for(|done| *done).await;
        let mut table = self.lock();
        let task = self.find(&mut table, owner, id)?;
        match &task.state {
            State::Done { result, .. } => Ok(result.clone()),
            State::Cancelled => Err((-32000, format!("task `{id}` was cancelled"))),
            State::Working => Err((-32603, format!("task `{id}` has not ended"))),
        }
    }

    fn list(&self, owner: Owner) -> Value {
        let mut table = self.lock();
        self.expire(&mut table);
        let mut tasks: Vec<(&String, &Task)> = table
            .iter()
            .filter(|(_, task)| task.owner == owner)
            .collect();
        tasks.sort_by_key(|(_, task)| task.created);
        let tasks: Vec<Value> = tasks
            .into_iter()
            .map(|(id, task)| self.view(id, task))
            .collect();
        json!({ "tasks": tasks })
    }

    fn cancel(&self, owner: Owner, id: &str) -> Result<Value, RpcError> {
        let mut table = self.lock();
        let task = self.find(&mut table, owner, id)?;
        if !matches!(task.state, State::Working) {
            return Err((-32602, format!("task `{id}` has already ended")));
        }
        task.state = State::Cancelled;
        task.updated = SystemTime::now();
        task.cancel.cancel();
        let task: &Task = task;
        Ok(self.view(id, task))
    }
}

/// The error for a task asked of tool `name`, which does not run as one.
fn not_a_task(name: &str) -> RpcError {
    (
        -32601,
        format!("tool `{name}` does not run as a task: only spawn_agent and await_agents do (their execution.taskSupport is optional; call the others without `task`)"),
    )
}

/// One task's call, run in the background: its progress and its end recorded in
/// the task table.
struct TaskRun {
    /// The server's task table.
    table: Arc<Mutex<HashMap<String, Task>>>,
    /// The largest result kept (`TaskLimits::max_result_bytes`).
    max_result_bytes: usize,
    /// The task's id.
    task: String,
    /// The tool called.
    name: String,
    /// Its arguments, as JSON text.
    arguments: String,
    /// Whether the session is the task's own (a spawn), cancelled with it.
    own_session: bool,
    /// Where the ended task is written, beside its run's journal.
    saved_at: Option<std::path::PathBuf>,
}

impl TaskRun {
    /// Runs the call in `session` until it ends or `cancel` fires, then records how
    /// it ended and tells `done`.
    async fn run(
        self,
        session: Arc<Session>,
        cancel: CancellationToken,
        done: watch::Sender<bool>,
    ) {
        let (sender, mut events) = mpsc::unbounded_channel();
        let call = session.call_watched(&self.name, &self.arguments, Some(sender));
        let report = async {
            let mut progress = CallProgress::default();
            while let Some(event) = events.recv().await {
                if let Some((_, message)) = progress.update(&event) {
                    if let Some(entry) = self.lock().get_mut(&self.task) {
                        entry.message = Some(message);
                        entry.updated = SystemTime::now();
                    }
                }
            }
        };
        let work = async { tokio::join!(call, report).0 };
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            result = work => Some(result),
        };
        let state = match outcome {
            None => {
                // A spawn's tree is the task's own; an await's agents are the
                // caller's, and stay as they are.
                if self.own_session {
                    session.cancel();
                }
                State::Cancelled
            }
            Some(result) => self.done_state(result),
        };
        if let Some(entry) = self.lock().get_mut(&self.task) {
            if !matches!(entry.state, State::Cancelled) {
                entry.state = state;
            }
            entry.updated = SystemTime::now();
            entry.ended = Some(Instant::now());
            if let Some(path) = &self.saved_at {
                save(path, &self.task, entry);
            }
        }
        let _ = done.send(true);
        tracing::info!(task = %self.task, "MCP task ended");
        // The session (its tree and journal) ends here, its agents all done.
        drop(session);
    }

    /// A finished call's state: its tool result, or an error saying it was over
    /// `max_result_bytes`.
    fn done_state(&self, result: Result<Answer, String>) -> State {
        let failed = result.is_err();
        let mut value = serde_json::to_value(tool_result(result)).unwrap_or_default();
        let size = value.to_string().len();
        let max_result_bytes = self.max_result_bytes;
        if size > max_result_bytes {
            value = json!({"content": [{"type": "text", "text": format!(
                "the task's result was {size} bytes, over the {max_result_bytes} bytes a task keeps (--task-result-limit); its agents' journal holds it in full"
            )}], "isError": true});
        }
        State::Done {
            result: value,
            failed,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Task>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An ended task as its file keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    task_id: String,
    /// The owner's digest, hex.
    owner: String,
    /// Milliseconds since the epoch.
    created_ms: u64,
    updated_ms: u64,
    state: State,
    message: Option<String>,
}

/// Writes ended task `id` to `path` (beside its run's journal); a failure is logged,
/// and the task is then kept in memory only.
fn save(path: &std::path::Path, id: &str, task: &Task) {
    let saved = Saved {
        task_id: id.to_string(),
        owner: hex::encode(task.owner),
        created_ms: epoch_ms(task.created),
        updated_ms: epoch_ms(task.updated),
        state: task.state.clone(),
        message: task.message.clone(),
    };
    let written = serde_json::to_vec(&saved)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::journal::file::write_owner_only(path, &bytes));
    if let Err(error) = written {
        tracing::warn!(task = id, path = %path.display(), %error, "could not keep the ended MCP task beside its journal: it will not survive a restart");
    }
}

/// The ended tasks kept in the runs of journal `dir` that ended less than
/// `retention` ago (each file at most `max_bytes`).
fn load(dir: &std::path::Path, retention: Duration, max_bytes: usize) -> HashMap<String, Task> {
    let now = SystemTime::now();
    let mut kept = HashMap::new();
    for text in saved::task_files(dir, max_bytes) {
        let Ok(stored) = serde_json::from_str::<Saved>(&text) else {
            continue;
        };
        let mut owner = [0; 32];
        if hex::decode_to_slice(&stored.owner, &mut owner).is_err() {
            continue;
        }
        let updated = UNIX_EPOCH + Duration::from_millis(stored.updated_ms);
        let age = now.duration_since(updated).unwrap_or_default();
        if age >= retention || matches!(stored.state, State::Working) {
            continue;
        }
        let (_, done) = watch::channel(true);
        kept.insert(
            stored.task_id,
            Task {
                owner,
                created: UNIX_EPOCH + Duration::from_millis(stored.created_ms),
                updated,
                state: stored.state,
                message: stored.message,
                ended: Some(Instant::now().checked_sub(age).unwrap_or_else(Instant::now)),
                cancel: CancellationToken::new(),
                done,
            },
        );
    }
    kept
}
