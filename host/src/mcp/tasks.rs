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
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::served::tool_result;
use super::served::SessionOptions;
use crate::host::{Answer, Host, Session};
use crate::jobs::progress::CallProgress;
use crate::listener::auth::Owner;
use saved::{load, save, TASK_FILE_PREFIX};
pub(super) use stamps::iso8601;
use stamps::task_id;
use table::Task;
pub(super) use table::{Snapshot, State};

mod saved;
mod stamps;
mod table;

/// How long an `await_agents` task without `timeout_s` waits at most: its agents'
/// session ends first.
const AWAIT_TASK_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// How often a client is told to poll `tasks/get`, in milliseconds.
pub(super) const POLL_INTERVAL_MS: u64 = 500;

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
        let id = self.start(
            owner,
            &name,
            |arguments| self.session_for(&name, mcp_session, arguments),
            &mut arguments,
        )?;
        let task = self
            .describe(&id)
            .ok_or((-32603, "the task vanished".into()))?;
        Ok(json!({ "task": task }))
    }

    /// Starts `owner`'s task calling `name` with `arguments` in the session `session`
    /// gives (which may add the task's defaults to them); its id.
    pub(super) fn start(
        &self,
        owner: Owner,
        name: &str,
        session: impl FnOnce(&mut serde_json::Map<String, Value>) -> Result<Arc<Session>, RpcError>,
        arguments: &mut serde_json::Map<String, Value>,
    ) -> Result<String, RpcError> {
        let id = task_id().map_err(|error| (-32603, format!("making a task id: {error}")))?;
        let (done_sender, done) = watch::channel(false);
        let cancel = CancellationToken::new();
        // The limit first: a refused task makes nothing (no session, no journaled run).
        self.register(&id, owner, cancel.clone(), done)?;
        let session = session(arguments).inspect_err(|_| drop(self.lock().remove(&id)))?;
        if let Some(task) = self.lock().get_mut(&id) {
            task.tree = Arc::downgrade(&session);
        }
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
            name: name.to_string(),
            arguments: Value::Object(arguments.clone()).to_string(),
            saved_at,
        };
        tokio::spawn(run.run(session, cancel, done_sender).instrument(span));
        Ok(id)
    }

    /// A new session of the server's profile, for a task of its own.
    pub(super) fn own_session(&self) -> Result<Arc<Session>, RpcError> {
        let session = self
            .host
            .session(self.options.profile.as_deref())
            .map_err(|error| (-32603, format!("{error:#}")))?;
        Ok(Arc::new(session))
    }

    /// `owner`'s task `id`, as it stands.
    pub(super) fn snapshot(&self, owner: Owner, id: &str) -> Result<Snapshot, RpcError> {
        let mut table = self.lock();
        let task = self.find(&mut table, owner, id)?;
        Ok(Snapshot {
            created: task.created,
            updated: task.updated,
            state: task.state.clone(),
            message: task.message.clone(),
            tree: task.tree.upgrade(),
        })
    }

    /// How long an ended task is kept.
    pub(super) fn retention(&self) -> Duration {
        self.limits.retention
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
                self.own_session()
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
                tree: Weak::new(),
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
                    .map(|text| crate::term::bounded(text, 500).to_string()),
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
                        crate::term::bounded(id, 100),
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

    /// Cancels `owner`'s task `id` and its agents; the task as it now stands.
    pub(super) fn cancel(&self, owner: Owner, id: &str) -> Result<Value, RpcError> {
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
