//! A2A 1.0's JSON-RPC binding: `SendMessage`, `SendStreamingMessage` (Server-Sent
//! Events), `GetTask`, `ListTasks`, `CancelTask` and `SubscribeToTask`, with A2A's
//! error codes.
//! A request names its protocol version in the `A2A-Version` header (missing: 1.0,
//! as warren speaks no other).

use serde_json::{json, Value};

use super::respond::json as json_response;
use super::task::{State, Task, Tasks};
use crate::host::Host;
use crate::listener::auth::Owner;
use crate::listener::BoxBody;

/// The longest `traceparent` header taken (a W3C one is 55 characters).
pub(super) const MAX_TRACEPARENT: usize = 55;

/// How long `CancelTask` waits for the tree to stop before it answers.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A JSON-RPC error: A2A's code and a message saying what to do.
struct RpcError(i64, String);

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
const TASK_NOT_FOUND: i64 = -32001;
const TASK_NOT_CANCELABLE: i64 = -32002;
const PUSH_NOT_SUPPORTED: i64 = -32003;
const UNSUPPORTED_OPERATION: i64 = -32004;
const VERSION_NOT_SUPPORTED: i64 = -32009;

/// One JSON-RPC request to an agent.
pub(super) struct Call<'a> {
    pub(super) host: &'a Host,
    pub(super) tasks: &'a Tasks,
    /// The profile the agent runs.
    pub(super) profile: &'a str,
    /// The credential that sent it.
    pub(super) owner: Owner,
    /// The client's W3C trace context, for the runs it starts.
    pub(super) traceparent: Option<String>,
}

/// A subscription to a task's changes.
type Updates = tokio::sync::broadcast::Receiver<Value>;

/// What a method answers: one result, or a stream of them.
enum Answer {
    Result(Value),
    /// The task, its changes, and for a new task its opening (the task as it was
    /// when its changes began to be sent: they all follow it).
    Stream(
        std::sync::Arc<Task>,
        tokio::sync::broadcast::Receiver<Value>,
        Option<Value>,
    ),
}

impl Call<'_> {
    /// Answers the request `body`, sent with `A2A-Version: version`.
    pub(super) async fn answer(
        &self,
        version: Option<&str>,
        body: &[u8],
    ) -> hyper::Response<BoxBody> {
        let request: Value = match serde_json::from_slice(body) {
            Ok(request) => request,
            Err(error) => {
                return failure(
                    &Value::Null,
                    RpcError(PARSE_ERROR, format!("the body is not JSON: {error}")),
                )
            }
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        if let Some(version) = version.filter(|v| !matches!(*v, "1.0" | "1")) {
            return failure(
                &id,
                RpcError(
                    VERSION_NOT_SUPPORTED,
                    format!(
                        "A2A-Version `{}` is not supported: warren a2a speaks A2A 1.0",
                        crate::term::bounded(version, 40)
                    ),
                ),
            );
        }
        let (Some(method), true) = (
            request.get("method").and_then(Value::as_str),
            request.get("jsonrpc") == Some(&json!("2.0")),
        ) else {
            return failure(
                &id,
                RpcError(INVALID_REQUEST, "a JSON-RPC 2.0 request object (`jsonrpc`, `method`, `id`, `params`) is expected; batches are not served".into()),
            );
        };
        let params = request.get("params").cloned().unwrap_or(json!({}));
        let answer = match method {
            "SendMessage" => self.send(&params, false).await,
            "SendStreamingMessage" => self.send(&params, true).await,
            "GetTask" => self.get(&params).await,
            "CancelTask" => self.cancel(&params).await,
            "SubscribeToTask" => self.subscribe(&params).await,
            "ListTasks" => super::listing::list(self.tasks, &self.owner, &params)
                .await
                .map(Answer::Result)
                .map_err(|why| invalid(&why)),
            "GetExtendedAgentCard" => Err(RpcError(
                UNSUPPORTED_OPERATION,
                "`GetExtendedAgentCard` is not served by warren a2a: its public card is the whole card".into(),
            )),
            method if method.contains("PushNotificationConfig") => Err(RpcError(
                PUSH_NOT_SUPPORTED,
                "warren a2a sends no push notifications: stream the task (SendStreamingMessage, SubscribeToTask) or poll it (GetTask)".into(),
            )),
            "message/send" | "message/stream" | "tasks/get" | "tasks/cancel" | "tasks/resubscribe" => Err(RpcError(
                METHOD_NOT_FOUND,
                format!("`{method}` is A2A 0.3's name: warren a2a speaks A2A 1.0 (SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask)"),
            )),
            other => Err(RpcError(
                METHOD_NOT_FOUND,
                format!("no method `{}`: warren a2a serves SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask and SubscribeToTask", crate::term::bounded(other, 80)),
            )),
        };
        match answer {
            Ok(Answer::Result(result)) => json_response(
                hyper::StatusCode::OK,
                &json!({"jsonrpc": "2.0", "id": id, "result": result}),
            ),
            Ok(Answer::Stream(task, updates, opening)) => stream(id, task, updates, opening),
            Err(error) => failure(&id, error),
        }
    }

    /// `SendMessage` / `SendStreamingMessage`: a new task, or a message to one.
    async fn send(&self, params: &Value, streaming: bool) -> Result<Answer, RpcError> {
        let message = params
            .get("message")
            .and_then(Value::as_object)
            .ok_or_else(|| invalid("`params.message` (a Message object) is missing"))?;
        if let Some(role) = message.get("role").and_then(Value::as_str) {
            if role != "ROLE_USER" {
                return Err(invalid(&format!(
                    "`params.message.role` must be ROLE_USER, not {}",
                    crate::term::bounded(role, 40)
                )));
            }
        }
        let parts = message
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("`params.message.parts` (an array of parts) is missing"))?;
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|part| part.get("text")?.as_str())
            .collect();
        let data: Vec<&Value> = parts.iter().filter_map(|part| part.get("data")).collect();
        let mut text = texts.join("\n");
        if text.trim().is_empty() && data.is_empty() {
            return Err(invalid("the message has no text and no data part: warren's agents take text (a data part is given to them as JSON)"));
        }
        let configuration = params.get("configuration");
        let immediately = configuration
            .and_then(|c| c.get("returnImmediately"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let history_length = history_length(configuration)?;
        let (task, updates, opening) = match message
            .get("taskId")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
        {
            Some(id) => {
                let (task, updates) = self.to_task(id, &text, data.first().copied()).await?;
                (task, updates, None)
            }
            None => {
                for data in &data {
                    text.push_str(&format!("\n{data}"));
                }
                let (task, updates) = self.new_task(message, &text)?;
                let opening = task.opening();
                (task, updates, Some(opening))
            }
        };
        if streaming {
            return Ok(Answer::Stream(task, updates, opening));
        }
        if !immediately {
            task.settled().await;
        }
        Ok(Answer::Result(
            json!({"task": task.wire(history_length).await}),
        ))
    }

    /// A message to task `id` that has not ended, delivered.
    async fn to_task(
        &self,
        id: &str,
        text: &str,
        data: Option<&Value>,
    ) -> Result<(std::sync::Arc<Task>, Updates), RpcError> {
        let task = self
            .live(id, UNSUPPORTED_OPERATION, "takes no more messages")
            .await?;
        let state = task.state();
        if state.terminal() {
            return Err(RpcError(
                UNSUPPORTED_OPERATION,
                format!("task {id} has ended ({}) and takes no more messages: send one without `taskId` (with `contextId` {}) to start another", state.wire(), task.context_id),
            ));
        }
        let updates = task.subscribe();
        task.deliver(self.host, text, data)
            .await
            .map_err(|why| invalid(&why))?;
        Ok((task, updates))
    }

    /// A new task on `text`, its first message `message`.
    fn new_task(
        &self,
        message: &serde_json::Map<String, Value>,
        text: &str,
    ) -> Result<(std::sync::Arc<Task>, Updates), RpcError> {
        self.tasks
            .admit(&self.owner)
            .map_err(|why| RpcError(INTERNAL_ERROR, why))?;
        let run = self
            .host
            .start_served(self.profile, text, self.traceparent.clone())
            .map_err(|error| RpcError(INTERNAL_ERROR, format!("the task cannot start: {error}")))?;
        let context_id = message
            .get("contextId")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty() && id.len() <= 128)
            .map_or_else(crate::jobs::random_id, str::to_string);
        let stored = self.stored(message, run.id(), &context_id);
        tracing::info!(
            task = run.id(),
            profile = self.profile,
            "A2A: a task started"
        );
        Ok(self
            .tasks
            .start(run, self.profile, self.owner, context_id, stored))
    }

    /// The client's message as a task's history keeps it.
    fn stored(&self, message: &serde_json::Map<String, Value>, task: &str, context: &str) -> Value {
        let mut stored = Value::Object(message.clone());
        stored["role"] = json!("ROLE_USER");
        stored["taskId"] = json!(task);
        stored["contextId"] = json!(context);
        if stored.get("messageId").and_then(Value::as_str).is_none() {
            stored["messageId"] = json!(crate::jobs::random_id());
        }
        stored
    }

    /// `GetTask`: a task this server holds, else as its run's journal keeps it.
    async fn get(&self, params: &Value) -> Result<Answer, RpcError> {
        let id = task_id(params)?;
        let history_length = history_length(Some(params))?;
        if let Some(task) = self.tasks.get(&self.owner, id) {
            return Ok(Answer::Result(task.wire(history_length).await));
        }
        match self.tasks.stored(&self.owner, id, history_length).await {
            Some(Ok(task)) => Ok(Answer::Result(task)),
            Some(Err(why)) => Err(RpcError(INTERNAL_ERROR, why)),
            None => Err(not_found(id)),
        }
    }

    /// `CancelTask`: cancels the tree, and answers once it stopped (or after
    /// [`CANCEL_WAIT`]).
    async fn cancel(&self, params: &Value) -> Result<Answer, RpcError> {
        let refusals = ("has nothing to cancel", "there is nothing to cancel");
        let task = self.running(params, TASK_NOT_CANCELABLE, refusals).await?;
        tracing::info!(task = %task.id, "A2A: a client cancels a task");
        task.cancel();
        let _ = tokio::time::timeout(CANCEL_WAIT, async {
            while !task.state().terminal() {
                task.settled().await;
                if !task.state().terminal() {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        })
        .await;
        Ok(Answer::Result(task.wire(None).await))
    }

    /// `SubscribeToTask`: the task's changes from now on, as a stream.
    async fn subscribe(&self, params: &Value) -> Result<Answer, RpcError> {
        let refusals = (
            "sends no more changes: read it with GetTask",
            "read it with GetTask",
        );
        let task = self
            .running(params, UNSUPPORTED_OPERATION, refusals)
            .await?;
        let updates = task.subscribe();
        Ok(Answer::Stream(task, updates, None))
    }

    /// Task `params.id`, held by this server and not ended; refused with `code`
    /// otherwise, saying what a task only its journal keeps cannot do
    /// (`refusals.0`) or what an ended one cannot (`refusals.1`).
    async fn running(
        &self,
        params: &Value,
        code: i64,
        refusals: (&str, &str),
    ) -> Result<std::sync::Arc<Task>, RpcError> {
        let task = self.live(task_id(params)?, code, refusals.0).await?;
        let state = task.state();
        if state.terminal() {
            let (id, state) = (&task.id, state.wire());
            return Err(RpcError(
                code,
                format!("task {id} has ended ({state}): {}", refusals.1),
            ));
        }
        Ok(task)
    }

    /// Task `id`, held by this server; a task only its journal keeps is refused
    /// with `code` (it `refusal`).
    async fn live(
        &self,
        id: &str,
        code: i64,
        refusal: &str,
    ) -> Result<std::sync::Arc<Task>, RpcError> {
        if let Some(task) = self.tasks.get(&self.owner, id) {
            return Ok(task);
        }
        match self.tasks.stored(&self.owner, id, Some(0)).await {
            Some(Ok(task)) => Err(RpcError(
                code,
                format!(
                    "task {id} is no longer run by this server ({}) and {refusal}",
                    task.pointer("/status/state")
                        .and_then(Value::as_str)
                        .unwrap_or("ended")
                ),
            )),
            Some(Err(why)) => Err(RpcError(INTERNAL_ERROR, why)),
            None => Err(not_found(id)),
        }
    }
}

/// The task id `params.id` names.
fn task_id(params: &Value) -> Result<&str, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("`params.id` (the task's id) is missing"))
}

/// `historyLength` of `holder`, if given.
fn history_length(holder: Option<&Value>) -> Result<Option<usize>, RpcError> {
    match holder.and_then(|h| h.get("historyLength")) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| invalid("`historyLength` must be a whole number")),
    }
}

fn invalid(why: &str) -> RpcError {
    RpcError(INVALID_PARAMS, why.to_string())
}

fn not_found(id: &str) -> RpcError {
    RpcError(
        TASK_NOT_FOUND,
        format!("no task `{}` of this credential (a task's run stays in `warren runs`; with journaling off, an ended task is forgotten after --task-retention seconds)", crate::term::bounded(id, 80)),
    )
}

fn failure(id: &Value, RpcError(code, message): RpcError) -> hyper::Response<BoxBody> {
    json_response(
        hyper::StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

/// A stream of `task`'s changes as Server-Sent Events, each a JSON-RPC response to
/// request `id`: the task first, then each change, until it ends or waits for the
/// client.
fn stream(
    id: Value,
    task: std::sync::Arc<Task>,
    mut updates: tokio::sync::broadcast::Receiver<Value>,
    opening: Option<Value>,
) -> hyper::Response<BoxBody> {
    let (sender, receiver) = tokio::sync::mpsc::channel::<bytes::Bytes>(16);
    let frame = move |result: &Value| {
        let response = json!({"jsonrpc": "2.0", "id": id, "result": result});
        bytes::Bytes::from(format!("data: {response}\n\n"))
    };
    tokio::spawn(async move {
        // A new task opens as it was when its changes began to be sent (every one
        // follows, so the stream never repeats what the opening holds); a task
        // subscribed to later opens as it is now.
        let (first, ended) = match opening {
            Some(opening) => (opening, false),
            None => {
                let ended = task.state().terminal();
                (task.wire(None).await, ended)
            }
        };
        if sender.send(frame(&json!({"task": first}))).await.is_err() || ended {
            return;
        }
        loop {
            let update = match updates.recv().await {
                Ok(update) => update,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => task.status_event(),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            let settled = update
                .pointer("/statusUpdate/status/state")
                .and_then(Value::as_str)
                .is_some_and(|state| {
                    [
                        State::Completed,
                        State::Failed,
                        State::Canceled,
                        State::InputRequired,
                    ]
                    .iter()
                    .any(|s| s.wire() == state)
                });
            if sender.send(frame(&update)).await.is_err() || settled {
                return;
            }
        }
    });
    let body = http_body_util::BodyExt::boxed(Frames(receiver));
    let mut response = hyper::Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// A body of the frames a task sends, as they come.
struct Frames(tokio::sync::mpsc::Receiver<bytes::Bytes>);

impl hyper::body::Body for Frames {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        self.0
            .poll_recv(context)
            .map(|frame| frame.map(|bytes| Ok(hyper::body::Frame::data(bytes))))
    }
}
