//! A2A tasks: each one a run of the host, followed from its events. A task's status
//! is the latest progress line of any agent of its tree, `INPUT_REQUIRED` while an
//! agent waits for an approval or an answer, and its end the root's; its artifact is
//! the root's answer; its history is the run's transcript (`super::history`).
//! Streams get each change as it happens. A task this server no longer holds is
//! read from its run's journal (`super::stored`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};

use super::history::Of;
use super::options::A2aLimits;
use super::person::{agent_message, reply, request_message, verdict_text};
use crate::events::{Event, PersonRequest};
use crate::host::run::Canceller;
use crate::host::{Run, RunReport};
use crate::jobs::progress::CallProgress;
use crate::jobs::{JobId, Tree};
use crate::listener::auth::Owner;
use crate::outcome::AgentState;

/// The longest text of one progress message, in characters.
const MAX_LINE: usize = 2000;
/// The longest answer kept as the task's artifact, in characters.
const MAX_ANSWER: usize = 1 << 20;
/// Stream events a slow reader may fall behind by before it is sent the status anew.
const STREAM_BACKLOG: usize = 256;

/// A task's state, as A2A 1.0 names it on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
}

impl State {
    pub(super) fn wire(self) -> &'static str {
        match self {
            State::Submitted => "TASK_STATE_SUBMITTED",
            State::Working => "TASK_STATE_WORKING",
            State::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            State::Completed => "TASK_STATE_COMPLETED",
            State::Failed => "TASK_STATE_FAILED",
            State::Canceled => "TASK_STATE_CANCELED",
        }
    }

    /// Whether the task has ended.
    pub(super) fn terminal(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Canceled)
    }

    /// Whether a stream ends here: the task ended, or waits for the client.
    pub(super) fn settled(self) -> bool {
        self.terminal() || self == State::InputRequired
    }
}

/// The tasks of every credential.
pub(super) struct Tasks {
    limits: A2aLimits,
    table: Mutex<BTreeMap<String, Arc<Task>>>,
    /// Where runs are journaled (tasks not held are read from there), when they are.
    journal_dir: Option<PathBuf>,
}

/// One task.
pub(super) struct Task {
    pub(super) id: String,
    pub(super) context_id: String,
    owner: Owner,
    pub(super) tree: Arc<Tree>,
    pub(super) root: JobId,
    /// The client's first message.
    first: Value,
    started: SystemTime,
    /// Its history as last read, and the journal's length then.
    history: Mutex<Option<(u64, Vec<Value>)>>,
    canceller: Canceller,
    view: Mutex<View>,
    /// Bumped on every change: what blocking calls wait on.
    changed: watch::Sender<u64>,
    /// Each change as a stream event's result (`{"statusUpdate": …}`, …).
    updates: broadcast::Sender<Value>,
}

/// What a client sees of a task.
struct View {
    state: State,
    /// The status's message: the latest progress line, the request waited on, or
    /// the end.
    message: Option<Value>,
    timestamp: SystemTime,
    artifacts: Vec<Value>,
    /// When it ended.
    ended: Option<Instant>,
}

impl Tasks {
    pub(super) fn new(limits: A2aLimits, journal_dir: Option<PathBuf>) -> Tasks {
        Tasks {
            limits,
            table: Mutex::default(),
            journal_dir,
        }
    }

    /// Task `id` of `owner` as its run's journal keeps it (one this server does not
    /// hold): `None` when there is none.
    pub(super) async fn stored(
        &self,
        owner: &Owner,
        id: &str,
        history_length: Option<usize>,
    ) -> Option<Result<Value, String>> {
        let dir = self.journal_dir.clone()?;
        let (owner, id) = (*owner, id.to_string());
        tokio::task::spawn_blocking(move || super::stored::load(&dir, &owner, &id, history_length))
            .await
            .unwrap_or_else(|e| Some(Err(format!("reading the task failed: {e}"))))
    }

    /// Task `id` of `owner`.
    pub(super) fn get(&self, owner: &Owner, id: &str) -> Option<Arc<Task>> {
        let table = self.table.lock().expect("tasks poisoned");
        table.get(id).filter(|task| &task.owner == owner).cloned()
    }

    /// Makes `run` of `profile` a task of `owner` in `context_id`, its first
    /// message `message` (the caller asked [`Tasks::admit`] first), recorded beside
    /// its journal. Returns the task and a subscription to its changes made before
    /// any.
    pub(super) fn start(
        &self,
        run: Run,
        profile: &str,
        owner: Owner,
        context_id: String,
        message: Value,
    ) -> (Arc<Task>, broadcast::Receiver<Value>) {
        let (updates, receiver) = broadcast::channel(STREAM_BACKLOG);
        let id = run.id().to_string();
        if let Some(journal) = &run.tree.journal {
            if let Err(error) =
                super::stored::save(journal.path(), &owner, &context_id, profile, &message)
            {
                tracing::warn!(task = %id, %error, "A2A: the task's record beside its journal could not be written; once this server forgets the task, GetTask will not find it");
            }
        }
        let task = Arc::new(Task {
            id: id.clone(),
            context_id,
            owner,
            tree: run.tree.clone(),
            root: run.root.clone(),
            first: message,
            started: SystemTime::now(),
            history: Mutex::default(),
            canceller: run.canceller(),
            view: Mutex::new(View {
                state: State::Submitted,
                message: None,
                timestamp: SystemTime::now(),
                artifacts: Vec::new(),
                ended: None,
            }),
            changed: watch::channel(0).0,
            updates,
        });
        self.table
            .lock()
            .expect("tasks poisoned")
            .insert(id, task.clone());
        drive(task.clone(), run);
        (task, receiver)
    }

    /// The tasks of `owner` this server holds.
    pub(super) fn held(&self, owner: &Owner) -> Vec<Arc<Task>> {
        let table = self.table.lock().expect("tasks poisoned");
        table
            .values()
            .filter(|task| &task.owner == owner)
            .cloned()
            .collect()
    }

    /// The tasks of `owner` journaled (held or not), at most `max`, newest first:
    /// when each started, its id and its context.
    pub(super) async fn journaled(
        &self,
        owner: &Owner,
        max: usize,
    ) -> Vec<(SystemTime, String, String)> {
        let Some(dir) = self.journal_dir.clone() else {
            return Vec::new();
        };
        let owner = *owner;
        tokio::task::spawn_blocking(move || super::stored::owned(&dir, &owner, max))
            .await
            .unwrap_or_default()
    }

    /// Whether `owner` may start another task, after forgetting ended tasks past
    /// their retention; `Err` says why not.
    pub(super) fn admit(&self, owner: &Owner) -> Result<(), String> {
        let mut table = self.table.lock().expect("tasks poisoned");
        let retention = self.limits.retention;
        table.retain(|_, task| !task.expired(retention));
        let held = table.values().filter(|task| &task.owner == owner).count();
        if held >= self.limits.max_tasks {
            return Err(format!(
                "this credential holds {held} A2A tasks, the most it may (--max-tasks {}); an ended task is forgotten {} s after it ends",
                self.limits.max_tasks,
                retention.as_secs()
            ));
        }
        Ok(())
    }

    /// Cancels every task still running (the server stops).
    pub(super) fn cancel_all(&self) {
        for task in self.table.lock().expect("tasks poisoned").values() {
            task.canceller.cancel();
        }
    }
}

impl Task {
    /// The task as A2A writes it, with the last `history_length` messages of its
    /// history (all when `None`).
    /// The task as it began: submitted, no artifacts, the client's message its
    /// history (a new task's stream opens with it, then sends every change).
    pub(super) fn opening(&self) -> Value {
        json!({
            "id": self.id,
            "contextId": self.context_id,
            "status": {
                "state": State::Submitted.wire(),
                "timestamp": crate::journal::iso8601(self.started),
            },
            "artifacts": [],
            "history": [self.first],
        })
    }

    pub(super) async fn wire(&self, history_length: Option<usize>) -> Value {
        let history = self.history(history_length).await;
        let view = self.view.lock().expect("task poisoned");
        json!({
            "id": self.id,
            "contextId": self.context_id,
            "status": self.status(&view),
            "artifacts": view.artifacts,
            "history": history,
        })
    }

    /// The last `history_length` messages of its history (all when `None`): the
    /// run's transcript as journaled so far, or only the client's first message
    /// when the run is not journaled.
    async fn history(&self, history_length: Option<usize>) -> Vec<Value> {
        if history_length == Some(0) {
            return Vec::new();
        }
        let Some(journal) = self.tree.journal.clone() else {
            return vec![self.first.clone()];
        };
        journal.written().await;
        let (path, first) = (journal.path().to_path_buf(), self.first.clone());
        // The journal only grows: read again only when it did (a client polling an
        // ended task reads it once).
        let length = std::fs::metadata(&path).map_or(0, |m| m.len());
        let cached = lock_history(&self.history).clone();
        if let Some((_, history)) = cached.filter(|(at, _)| *at == length) {
            return last(history, history_length);
        }
        let (task, context, root) = (
            self.id.clone(),
            self.context_id.clone(),
            self.root.0.clone(),
        );
        let read = tokio::task::spawn_blocking(move || {
            let of = Of {
                task: &task,
                context: &context,
                root: &root,
            };
            super::history::read(&path, &of, Some(&first))
        })
        .await;
        let history = match read {
            Ok(Ok(history)) => {
                *lock_history(&self.history) = Some((length, history.clone()));
                history
            }
            Ok(Err(error)) => {
                tracing::warn!(task = %self.id, %error, "A2A: the task's history could not be read from its journal");
                vec![self.first.clone()]
            }
            Err(error) => {
                tracing::warn!(task = %self.id, %error, "A2A: reading the task's history failed");
                vec![self.first.clone()]
            }
        };
        last(history, history_length)
    }

    /// When it started.
    pub(super) fn started(&self) -> SystemTime {
        self.started
    }

    /// Its state now.
    pub(super) fn state(&self) -> State {
        self.view.lock().expect("task poisoned").state
    }

    /// Subscribes to its changes.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Value> {
        self.updates.subscribe()
    }

    /// The status event of its state now (sent to a stream that fell behind).
    pub(super) fn status_event(&self) -> Value {
        let view = self.view.lock().expect("task poisoned");
        self.status_update(&view)
    }

    /// Waits until it ends or waits for the client.
    pub(super) async fn settled(&self) {
        let mut changed = self.changed.subscribe();
        while !self.state().settled() {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Cancels its tree.
    pub(super) fn cancel(&self) {
        self.canceller.cancel();
    }

    /// Takes in the client's message (its text `text`, its data parts `data`) for
    /// a task that has not ended: the answer to the request it waits on, else a
    /// message left for the root agent. `Err` says why it was refused.
    pub(super) async fn deliver(
        &self,
        host: &crate::host::Host,
        text: &str,
        data: Option<&Value>,
    ) -> Result<String, String> {
        let waiting = self.oldest_request();
        let said = match waiting {
            Some(request) => {
                let answer = reply(&request, text, data)?;
                let verdict = answer.verdict;
                self.tree.requests.answer(&request.id, answer)?;
                format!(
                    "{} `{}` of agent {}",
                    verdict_text(verdict),
                    request.tool,
                    request.path
                )
            }
            None => {
                let receipt = host
                    .message(
                        &self.tree,
                        "a2a client",
                        &self.root,
                        text.to_string(),
                        crate::events::MessageMode::Queue,
                    )
                    .await;
                if let crate::scheduler::Receipt::Rejected(why) = &receipt {
                    return Err(why.clone());
                }
                receipt.sentence(&self.root)
            }
        };
        let mut view = self.view.lock().expect("task poisoned");
        if view.state == State::InputRequired {
            match self.oldest_request() {
                Some(next) => {
                    self.set_status(&mut view, State::InputRequired, request_message(&next))
                }
                None => self.set_status(&mut view, State::Working, agent_message(&said, None)),
            }
        }
        Ok(said)
    }

    /// Whether request `id` of its tree still waits for an answer.
    fn waits(&self, id: &str) -> bool {
        self.tree.requests.pending().iter().any(|r| r.id == id)
    }

    /// The request of its tree that has waited longest, if any.
    fn oldest_request(&self) -> Option<PersonRequest> {
        let mut pending = self.tree.requests.pending();
        pending.sort_by_key(|request| request.deadline_ms);
        pending.into_iter().next()
    }

    /// Whether it ended longer than `retention` ago.
    fn expired(&self, retention: std::time::Duration) -> bool {
        let view = self.view.lock().expect("task poisoned");
        view.ended.is_some_and(|ended| ended.elapsed() > retention)
    }

    fn status(&self, view: &View) -> Value {
        let mut status = json!({
            "state": view.state.wire(),
            "timestamp": crate::journal::iso8601(view.timestamp),
        });
        if let Some(message) = &view.message {
            status["message"] = message.clone();
        }
        status
    }

    fn status_update(&self, view: &View) -> Value {
        json!({"statusUpdate": {
            "taskId": self.id,
            "contextId": self.context_id,
            "status": self.status(view),
        }})
    }

    /// Moves to `state` with `message`, and tells streams.
    fn set_status(&self, view: &mut View, state: State, message: Value) {
        view.message = Some(self.stamped(message));
        view.state = state;
        view.timestamp = SystemTime::now();
        let _ = self.updates.send(self.status_update(view));
        self.changed.send_modify(|n| *n += 1);
    }

    /// `message` with this task's ids.
    fn stamped(&self, mut message: Value) -> Value {
        message["taskId"] = json!(self.id);
        message["contextId"] = json!(self.context_id);
        message
    }

    /// Takes in one event of the run.
    fn on_event(&self, progress: &mut CallProgress, event: &Event) {
        let mut view = self.view.lock().expect("task poisoned");
        if view.state.terminal() {
            return;
        }
        match event {
            // Still waiting (one answered already, by `warren approve` or this task's
            // client, is only a progress line).
            Event::InputRequested(request) if self.waits(&request.id) => {
                if view.state != State::InputRequired {
                    let waiting = self.oldest_request().unwrap_or_else(|| request.clone());
                    self.set_status(&mut view, State::InputRequired, request_message(&waiting));
                }
                return;
            }
            Event::InputAnswered(_) if view.state == State::InputRequired => {
                match self.oldest_request() {
                    Some(next) => {
                        self.set_status(&mut view, State::InputRequired, request_message(&next))
                    }
                    None => {
                        let line = progress
                            .update(event)
                            .map(|(_, line)| line)
                            .unwrap_or_default();
                        self.set_status(&mut view, State::Working, agent_message(&line, None));
                    }
                }
                return;
            }
            _ => {}
        }
        let Some((_, line)) = progress.update(event) else {
            return;
        };
        let message = agent_message(&crate::term::bounded(&line, MAX_LINE), None);
        // While a request waits, the status stays the request.
        if view.state != State::InputRequired {
            self.set_status(&mut view, State::Working, message);
        }
    }

    /// The run ended as `report` says (`None`: its task panicked).
    fn finish(&self, report: Option<RunReport>) {
        let mut view = self.view.lock().expect("task poisoned");
        let Some(report) = report else {
            let message = agent_message(
                "the run's task ended without a report (a bug in warren)",
                None,
            );
            self.set_status(&mut view, State::Failed, message);
            view.ended = Some(Instant::now());
            return;
        };
        let root = &report.root;
        let state = match root.state {
            AgentState::Ok => State::Completed,
            AgentState::Cancelled => State::Canceled,
            _ => State::Failed,
        };
        let answer = crate::term::bounded(&root.text, MAX_ANSWER);
        if state == State::Completed {
            let mut parts = vec![json!({"text": answer})];
            if let Some(output) = &root.output {
                parts.push(json!({"data": output}));
            }
            let artifact = json!({"artifactId": "answer", "name": "answer", "parts": parts});
            view.artifacts = vec![artifact.clone()];
            let _ = self.updates.send(json!({"artifactUpdate": {
                "taskId": self.id,
                "contextId": self.context_id,
                "artifact": artifact,
                "lastChunk": true,
            }}));
        }
        let text = match (&root.error, state) {
            (_, State::Completed) => answer,
            (Some(error), _) => format!("{}: {error}", root.state.as_str()),
            (None, _) => root.state.as_str().to_string(),
        };
        let message = agent_message(
            &text,
            root.output.as_ref().filter(|_| state == State::Completed),
        );
        self.set_status(&mut view, state, message);
        view.ended = Some(Instant::now());
    }
}

/// Follows `run` into `task` until it ends.
fn drive(task: Arc<Task>, run: Run) {
    let mut events = run.events();
    let waiting = tokio::spawn(run.wait());
    tokio::spawn(async move {
        let mut progress = CallProgress::default();
        tokio::pin!(waiting);
        let report = loop {
            tokio::select! {
                biased;
                event = events.next() => match event {
                    Some(record) => task.on_event(&mut progress, &record.event),
                    None => break (&mut waiting).await.ok(),
                },
                report = &mut waiting => break report.ok(),
            }
        };
        while let Some(record) = events.try_next() {
            task.on_event(&mut progress, &record.event);
        }
        task.finish(report);
    });
}

/// The last `n` messages of `history` (all when `None`).
fn last(mut history: Vec<Value>, n: Option<usize>) -> Vec<Value> {
    let skip = n.map_or(0, |n| history.len().saturating_sub(n));
    history.drain(..skip);
    history
}

fn lock_history(
    history: &Mutex<Option<(u64, Vec<Value>)>>,
) -> std::sync::MutexGuard<'_, Option<(u64, Vec<Value>)>> {
    history
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
