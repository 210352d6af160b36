//! The tasks extension of MCP 2026-07-28 (`io.modelcontextprotocol/tasks`, SEP-2663)
//! over the server's task table ([`Tasks`]), for clients whose request declares it:
//! a background `spawn_agent` answers at once with a task (`resultType: "task"`),
//! whose agents run in a journaled run of their own, outliving the request;
//! `tasks/get` shows it working (with its agents' progress), `input_required` while
//! an agent of its tree waits on an approval or a question (each an elicitation
//! form, keyed by the request's id), then `completed` with the call's result inline
//! (a tool error included) or `cancelled`; `tasks/update` answers its input
//! requests; `tasks/cancel` cancels it and its agents. Another credential's task is
//! not found.

use rmcp::model::{
    CallToolRequestParams, CreateTaskResult, DetailedTask, ElicitRequest, ElicitationAction,
    ErrorCode, GetTaskResult, InputRequest, InputRequests, Task, TaskPayload, TaskStatus,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::tasks::{iso8601, RpcError, Snapshot, State, Tasks, POLL_INTERVAL_MS};
use crate::config::AnswerPolicy;
use crate::listener::auth::Owner;

/// Whether `request` in `context` runs as a task: a `spawn_agent` that is not a
/// foreground one, from a 2026-07-28 client that declared the extension.
pub(super) fn wanted(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> bool {
    let modern = context
        .protocol_version()
        .is_some_and(|version| !version.has_initialize());
    let declared = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks());
    let background = request
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get("background"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    modern && declared && request.name == "spawn_agent" && background
}

/// Starts `owner`'s task for `request` (a `spawn_agent`): the task as first seen.
pub(super) fn create(
    tasks: &Tasks,
    owner: Owner,
    request: CallToolRequestParams,
) -> Result<CreateTaskResult, ErrorData> {
    let mut arguments = request.arguments.unwrap_or_default();
    // The task is the wait: its result is the child's, as a foreground call's.
    arguments.insert("background".into(), Value::Bool(false));
    let id = tasks
        .start(
            owner,
            "spawn_agent",
            |_| {
                let session = tasks.own_session()?;
                // Its requests for a person wait for tasks/update (or their deadline).
                session.tree().requests.set_policy(AnswerPolicy::Ask);
                Ok(session)
            },
            &mut arguments,
        )
        .map_err(rpc_error)?;
    let snapshot = tasks.snapshot(owner, &id).map_err(rpc_error)?;
    Ok(CreateTaskResult::new(task(tasks, &id, &snapshot)))
}

/// `tasks/get`: `owner`'s task `id` as it stands.
pub(super) fn get(tasks: &Tasks, owner: Owner, id: &str) -> Result<GetTaskResult, ErrorData> {
    let snapshot = tasks.snapshot(owner, id).map_err(rpc_error)?;
    let waiting = input_requests(&snapshot);
    let payload = match &snapshot.state {
        State::Working if !waiting.is_empty() => TaskPayload::InputRequired {
            input_requests: waiting,
        },
        State::Working => TaskPayload::Working,
        // A tool error is a result too: the call completed.
        State::Done { result, .. } => TaskPayload::Completed {
            result: match result {
                Value::Object(result) => result.clone(),
                _ => serde_json::Map::new(),
            },
        },
        State::Cancelled => TaskPayload::Cancelled,
    };
    Ok(GetTaskResult::new(DetailedTask::new(
        task(tasks, id, &snapshot),
        payload,
    )))
}

/// The `_meta` key of a `tasks/update` that leaves a message for an agent of the
/// task (warren's own: the extension carries none): `{"text", "mode", "agent"}`.
pub(super) const MESSAGE_META: &str = "warren/message";

/// `tasks/update`: answers to the task's input requests, each by the id
/// `tasks/get` gave it, and `message` (its `_meta`'s [`MESSAGE_META`]) for its agent.
pub(super) async fn update(
    tasks: &Tasks,
    owner: Owner,
    update: UpdateTaskParams,
    message: Option<Value>,
) -> Result<(), ErrorData> {
    let snapshot = tasks.snapshot(owner, &update.task_id).map_err(rpc_error)?;
    let Some(session) = &snapshot.tree else {
        return Err(ErrorData::invalid_params(
            format!(
                "task `{}` has ended: it waits for no input and takes no message",
                update.task_id
            ),
            None,
        ));
    };
    let requests = &session.tree().requests;
    let pending = requests.pending();
    for (key, response) in update.input_responses {
        let Some(request) = pending.iter().find(|request| request.id == key) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "task `{}` has no input request `{}` outstanding",
                    update.task_id,
                    crate::term::bounded(&key, 100)
                ),
                None,
            ));
        };
        let action: Option<ElicitationAction> =
            serde_json::from_value(response["action"].clone()).ok();
        let answer = match action {
            Some(ElicitationAction::Accept) => {
                super::elicit::accepted(request, response["content"].clone())
            }
            Some(ElicitationAction::Decline) => {
                super::elicit::refused("the MCP client's user declined")
            }
            _ => super::elicit::refused("the MCP client's user cancelled the request"),
        };
        requests
            .answer(&request.id, answer)
            .map_err(|why| ErrorData::invalid_params(why, None))?;
    }
    if let Some(message) = &message {
        leave_message(session, &update.task_id, message).await?;
    }
    Ok(())
}

/// Leaves `message` (`{"text", "mode", "agent"}`) for an agent of task `id`'s
/// tree (its first agent, unless `agent` names another): an error says why not.
async fn leave_message(
    session: &crate::host::Session,
    id: &str,
    message: &Value,
) -> Result<(), ErrorData> {
    let field = |name: &str| format!("`_meta.\"{MESSAGE_META}\".{name}`");
    let invalid = |why: String| ErrorData::invalid_params(why, None);
    let text = message["text"]
        .as_str()
        .filter(|text| !text.trim().is_empty())
        .ok_or_else(|| {
            invalid(format!(
                "{} (a non-empty string) is required",
                field("text")
            ))
        })?;
    let mode = crate::events::MessageMode::parse(message["mode"].as_str())
        .map_err(|why| invalid(format!("{}: {why}", field("mode"))))?;
    let agent = match message["agent"].as_str() {
        Some(agent) => crate::jobs::JobId(agent.to_string()),
        None => session
            .first_agent()
            .ok_or_else(|| invalid(format!("task `{id}` has no agent yet")))?,
    };
    if session.tree().job(&agent).is_none() {
        return Err(invalid(format!(
            "{}: task `{id}` has no agent `{}`",
            field("agent"),
            crate::term::bounded(&agent.0, 40)
        )));
    }
    let receipt = session
        .message("mcp client", &agent, text.to_string(), mode)
        .await;
    if let crate::scheduler::Receipt::Rejected(why) = &receipt {
        return Err(invalid(format!("the message was rejected: {why}")));
    }
    tracing::info!(task = id, receipt = %receipt.sentence(&agent), "MCP: tasks/update left a message");
    Ok(())
}

/// `tasks/cancel`: cancels `owner`'s task `id` and its agents.
pub(super) fn cancel(tasks: &Tasks, owner: Owner, id: &str) -> Result<(), ErrorData> {
    tasks.cancel(owner, id).map(drop).map_err(rpc_error)
}

/// The task's base fields.
fn task(tasks: &Tasks, id: &str, snapshot: &Snapshot) -> Task {
    let status = match snapshot.state {
        State::Working => TaskStatus::Working,
        State::Done { .. } => TaskStatus::Completed,
        State::Cancelled => TaskStatus::Cancelled,
    };
    let mut task = Task::new(
        id,
        status,
        iso8601(snapshot.created),
        iso8601(snapshot.updated),
    )
    .with_ttl_ms(u64::try_from(tasks.retention().as_millis()).unwrap_or(u64::MAX))
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    let message = match snapshot.state {
        State::Cancelled => Some("cancelled by tasks/cancel; its agents were cancelled"),
        _ => snapshot.message.as_deref(),
    };
    if let Some(message) = message {
        task = task.with_status_message(message);
    }
    task
}

/// The requests of the task's tree waiting for a person, as elicitation forms.
fn input_requests(snapshot: &Snapshot) -> InputRequests {
    let Some(session) = &snapshot.tree else {
        return InputRequests::new();
    };
    session
        .tree()
        .requests
        .pending()
        .iter()
        .filter_map(|request| {
            let form = super::elicit::form(request)?;
            Some((
                request.id.clone(),
                InputRequest::Elicitation(ElicitRequest::new(form)),
            ))
        })
        .collect()
}

/// A task table error as a JSON-RPC error.
fn rpc_error((code, message): RpcError) -> ErrorData {
    ErrorData::new(ErrorCode(code as i32), message, None)
}
