//! One MCP session: rmcp's [`ServerHandler`] over a warren [`Session`], with the
//! session's log records and its calls' progress.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, GetTaskParams,
    GetTaskResult, Implementation, ListToolsResult, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, Tool, ToolAnnotations, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tracing::Instrument as _;

use super::logging::LogSink;
use super::served::{tool_result, SessionOptions};
use crate::host::{Host, Session};
use crate::jobs::progress::CallProgress;
use crate::listener::auth::Owner;

/// The longest `traceparent` taken from a client (a W3C one is 55 characters).
const MAX_TRACEPARENT: usize = 55;

/// Numbers sessions, in logs and for routing log records.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// One MCP session: its warren [`Session`] and where its log records go.
pub(super) struct WarrenServer {
    /// Names the session in logs and routes its log records.
    id: u64,
    /// The tree, tools and spawn tools of this client.
    pub(super) session: Arc<Session>,
    /// The client's log level.
    logs: LogSink,
    /// Log records waiting for the client, until the first message that gives a way to
    /// send them (the client's `initialized`, or any request).
    pending_logs: Mutex<Option<mpsc::Receiver<LoggingMessageNotificationParam>>>,
    /// Its place among the HTTP server's sessions (`--max-sessions`), given back when
    /// it ends; `None` over stdio.
    _slot: Option<OwnedSemaphorePermit>,
    /// The credential of its client.
    owner: Owner,
    /// Whether `session` ends with it: not for a 2026-07-28 request over HTTP, served
    /// in its credential's standing tree.
    owns_session: bool,
    /// The server's tasks, for 2026-07-28 clients that take the tasks extension.
    pub(super) tasks: Option<Arc<super::tasks::Tasks>>,
}

impl WarrenServer {
    /// A session for a client holding credential `owner`: its log records include
    /// those of `owner`'s tasks.
    pub(super) fn new(
        host: &Host,
        options: &SessionOptions,
        owner: Owner,
    ) -> anyhow::Result<WarrenServer> {
        let session = host
            .session(options.profile.as_deref())?
            .with_await_limit(options.await_limit);
        let server = WarrenServer::over(Arc::new(session), owner);
        tracing::info!(
            session = server.id,
            profile = server.session.profile(),
            "MCP session opened"
        );
        // To this session's client, as its first log messages.
        let span = tracing::info_span!(super::logging::CALL_SPAN, mcp.session = server.id);
        for (model, variable) in host.missing_keys() {
            span.in_scope(|| {
                tracing::warn!(
                    "model `{model}` has no API key: {variable} is not set in warren's environment, so sub-agents on it cannot be spawned; add {variable} to the `env` of this server in the MCP client's configuration"
                );
            });
        }
        Ok(server)
    }

    /// A 2026-07-28 request's server, over its credential's standing tree (which
    /// outlives it).
    pub(super) fn standing(session: Arc<Session>, owner: Owner) -> WarrenServer {
        let mut server = WarrenServer::over(session, owner);
        server.owns_session = false;
        server
    }

    /// A server over `session`, for a client holding `owner`.
    fn over(session: Arc<Session>, owner: Owner) -> WarrenServer {
        let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        let (logs, receiver) = LogSink::register(id, owner);
        WarrenServer {
            id,
            session,
            logs,
            pending_logs: Mutex::new(Some(receiver)),
            _slot: None,
            owner,
            owns_session: true,
            tasks: None,
        }
    }

    /// The same server, answering 2026-07-28 task requests from `tasks`.
    pub(super) fn with_tasks(mut self, tasks: Arc<super::tasks::Tasks>) -> WarrenServer {
        self.tasks = Some(tasks);
        self
    }

    /// The server's tasks, or the error of a server without them.
    fn served_tasks(&self) -> Result<&super::tasks::Tasks, ErrorData> {
        self.tasks.as_deref().ok_or_else(|| {
            ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "this server keeps no tasks",
                None,
            )
        })
    }

    /// The same session, holding `slot` until it ends.
    pub(super) fn holding(mut self, slot: OwnedSemaphorePermit) -> WarrenServer {
        self._slot = Some(slot);
        self
    }

    /// Starts sending this session's log records to `peer` (once).
    fn forward_logs(&self, peer: &Peer<RoleServer>) {
        let receiver = self
            .pending_logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut receiver) = receiver else { return };
        let peer = peer.clone();
        // Ends when the session does (its sink is dropped). A record that cannot be
        // sent (an HTTP client with no stream open for it) is skipped, not fatal.
        tokio::spawn(async move {
            while let Some(record) = receiver.recv().await {
                let _ = peer.notify_logging_message(record).await;
            }
        });
    }

    /// Runs one tool call, reporting progress when the client asked for it, until it
    /// ends or the client cancels it.
    async fn call(
        &self,
        name: &str,
        arguments: String,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let token = context.meta.get_progress_token();
        let (watch, mut events) = match token {
            Some(_) => {
                let (sender, receiver) = mpsc::unbounded_channel();
                (Some(sender), Some(receiver))
            }
            None => (None, None),
        };
        // A client's W3C trace context (`_meta.traceparent`, SEP-414): the call's
        // spans, its agents' included, join the client's trace (a malformed one
        // starts a trace of its own).
        let remote = context
            .meta
            .get_traceparent()
            .filter(|traceparent| traceparent.len() <= MAX_TRACEPARENT);
        let span = match remote {
            Some(traceparent) => tracing::info_span!(
                parent: None,
                super::logging::CALL_SPAN,
                otel.kind = "server",
                mcp.session = self.id,
                tool = %name,
                warren.traceparent = traceparent
            ),
            None => tracing::info_span!(
                super::logging::CALL_SPAN,
                otel.kind = "server",
                mcp.session = self.id,
                tool = %name
            ),
        };
        let call = self.session.call_watched(name, &arguments, watch);
        let report = async {
            let (Some(token), Some(events)) = (token, events.as_mut()) else {
                return;
            };
            let mut progress = CallProgress::default();
            while let Some(event) = events.recv().await {
                if let Some((value, message)) = progress.update(&event) {
                    let notification =
                        ProgressNotificationParam::new(token.clone(), value).with_message(message);
                    // A client that stopped listening still gets its result.
                    let _ = context.peer.notify_progress(notification).await;
                }
            }
        };
        let work = async {
            let (result, ()) = tokio::join!(call, report);
            result
        }
        .instrument(span);
        let result = tokio::select! {
            biased;
            () = context.ct.cancelled() => {
                tracing::info!(session = self.id, tool = name, "call cancelled by the client");
                Err("cancelled by the client (notifications/cancelled); the agents it started were cancelled".to_string())
            }
            result = work => result,
        };
        tool_result(result)
    }
}

impl Drop for WarrenServer {
    fn drop(&mut self) {
        if self.owns_session {
            tracing::info!(
                session = self.id,
                "MCP session closed; cancelling its agents"
            );
            self.session.cancel();
        }
    }
}

/// What `initialize` tells the client.
fn server_config(profile: &str) -> ServerConfig {
    let capabilities = ServerCapabilities::builder()
        .enable_logging()
        .enable_tools()
        .enable_tasks()
        .build();
    ServerConfig::new(capabilities)
        .with_server_info(
            Implementation::new("warren", env!("CARGO_PKG_VERSION"))
                .with_title("warren: sandboxed tools and sub-agents"),
        )
        .with_instructions(format!(
            "warren runs every tool in a fresh WebAssembly sandbox under profile `{profile}`'s \
             capabilities; a refused access comes back as a tool error saying why. spawn_agent \
             hands a self-contained task to a sub-agent with its own conversation, tools and \
             limits (background by default: you get a job id; background=false waits for the \
             result); await_agents, cancel_agent and list_agents manage them. All agents of \
             this session (for a 2026-07-28 client, of its credential's requests) share one \
             budget and are cancelled when it ends; a 2026-07-28 client that declares the \
             tasks extension gets each background spawn_agent as a task."
        ))
}

impl ServerHandler for WarrenServer {
    fn get_info(&self) -> ServerConfig {
        server_config(self.session.profile())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.forward_logs(&context.peer);
        // A client that takes forms answers its agents' approvals and questions.
        if super::elicit::supported(&context.peer) {
            super::elicit::bridge(self.session.tree().clone(), context.peer.clone());
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.logs.set_level(request.level);
        self.forward_logs(&context.peer);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .session
            .tools()
            .into_iter()
            .map(|tool| {
                let schema = match &*tool.input_schema {
                    serde_json::Value::Object(schema) => schema.clone(),
                    _ => serde_json::Map::new(),
                };
                let hints = self.session.hints(&tool.name).unwrap_or_default();
                let output = matches!(tool.name.as_str(), "spawn_agent" | "await_agents")
                    .then(|| self.session.results_schema())
                    .flatten();
                let mut listed = Tool::new(tool.name, tool.description, Arc::new(schema));
                if let Some(serde_json::Value::Object(output)) = output {
                    listed.output_schema = Some(Arc::new(output));
                }
                listed.annotate(ToolAnnotations::from_raw(
                    hints.title,
                    hints.read_only,
                    hints.destructive,
                    hints.idempotent,
                    hints.open_world,
                ))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.forward_logs(&context.peer);
        let name = request.name.to_string();
        if !self.session.tools().iter().any(|tool| tool.name == name) {
            let available: Vec<String> = self.session.tools().into_iter().map(|t| t.name).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{name}` for profile `{}` (available: {})",
                    self.session.profile(),
                    available.join(", ")
                ),
                None,
            ));
        }
        if let Some(tasks) = self
            .tasks
            .as_ref()
            .filter(|_| super::task_extension::wanted(&request, &context))
        {
            let task = super::task_extension::create(tasks, self.owner, request)?;
            return Ok(CallToolResponse::Task(task));
        }
        let arguments =
            serde_json::Value::Object(request.arguments.unwrap_or_default()).to_string();
        Ok(self.call(&name, arguments, context).await.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        super::task_extension::get(self.served_tasks()?, self.owner, &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let message = context
            .meta
            .get(super::task_extension::MESSAGE_META)
            .cloned();
        super::task_extension::update(self.served_tasks()?, self.owner, request, message).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        super::task_extension::cancel(self.served_tasks()?, self.owner, &request.task_id)
    }
}
