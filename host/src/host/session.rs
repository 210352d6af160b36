//! A [`Session`]: an outside caller (an MCP client) standing as the root of a job tree.
//! It calls the profile's plugin tools and the spawn tools directly, the way a root
//! agent's model would, with no model of its own: one tree, one budget and one
//! concurrency limit per session, every agent of it cancelled when the session ends.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::agent::{spawn_request, spawn_tool_definitions, Agent, Delivery, Role, Runtime};
use crate::events::{AgentIntro, Event, EventStream};
use crate::jobs::{JobHandle, JobId, JobSelection, Phase, Tree};
use crate::journal::Record;
use crate::llm::{ToolCall, ToolDefinition};
use crate::outcome::AgentOutcome;
use crate::plugin::ToolAccess;

/// What a session's root job says its task is (there is no task: the caller drives).
pub(super) const SESSION_TASK: &str = "(session: tools called by an outside client)";

/// An outside caller's connection: a job tree whose root is the caller.
///
/// Dropping a session cancels every agent it started, as [`Session::cancel`] does.
pub struct Session {
    /// The tree of this session's agents.
    tree: Arc<Tree>,
    /// The root job, standing for the caller: its spawn tools run as this agent's, and
    /// its plugin tools under this agent's profile and scratch directory. Its loop
    /// never runs, so no model is ever called for it.
    root: Agent,
    /// The root job's life: running while the session is open, finished (cancelled)
    /// when it closes. `None` only while being dropped.
    job: Option<JobHandle>,
    /// The spawn tools as a caller sees them: results are awaited, not pushed.
    spawn_tools: Vec<ToolDefinition>,
    /// Numbers the session's tool calls in events.
    calls: AtomicU64,
    /// How long `await_agents` without `timeout_s` waits at most (`None`: until the
    /// jobs end, as inside a run). A client has its own tool timeout and learns
    /// nothing if it passes first.
    await_limit: Option<Duration>,
}

/// Cancels the agents a call started if the call is dropped before it finishes
/// (its caller gave up on it).
struct StartedAgents {
    /// Where the agents live.
    tree: Arc<Tree>,
    /// The agents to cancel; emptied when the call finishes.
    ids: Vec<JobId>,
}

impl Drop for StartedAgents {
    fn drop(&mut self) {
        for id in &self.ids {
            if let Some(job) = self.tree.job(id) {
                job.cancel.cancel();
            }
        }
    }
}

impl Session {
    /// A session under `profile`: a fresh tree with the configured run limits, its
    /// root running from now on.
    pub(super) fn new(runtime: Arc<Runtime>, profile: &str) -> anyhow::Result<Session> {
        let profile = runtime.config.profile(profile)?;
        let run_id = crate::jobs::random_id();
        let journal = crate::journal::open(
            &runtime.config,
            runtime.registry.digests(),
            &runtime.config.run_limits,
            &run_id,
            &profile.name,
            SESSION_TASK,
            None,
        )?;
        let tree = Tree::for_session(runtime.config.run_limits, run_id, journal);
        let access = ToolAccess::new(profile.clone())?;
        let job = JobHandle::root(&tree, &profile.name, SESSION_TASK);
        let spawn_tools = spawn_tool_definitions(&runtime.config, Delivery::Awaited);
        let root = Agent::new(runtime, job.place(), Role::root(profile), access, None);
        job.start();
        Ok(Session {
            tree,
            root,
            job: Some(job),
            spawn_tools,
            calls: AtomicU64::new(0),
            await_limit: None,
        })
    }

    /// The same session, where `await_agents` without `timeout_s` returns after `limit`
    /// at most, with a block per job still running and the advice to call it again
    /// (its description says so).
    pub(crate) fn with_await_limit(mut self, limit: Duration) -> Session {
        self.await_limit = Some(limit);
        if let Some(tool) = self
            .spawn_tools
            .iter_mut()
            .find(|tool| tool.name == "await_agents")
        {
            tool.description = format!(
                "{} Without timeout_s it waits {} s at most: jobs still under way come back as RUNNING (or QUEUED) blocks; call await_agents again to keep waiting.",
                tool.description,
                limit.as_secs_f64()
            );
        }
        self
    }

    /// The profile the session runs under.
    pub fn profile(&self) -> &str {
        &self.root.profile.name
    }

    /// The job tree (the root job is the session itself).
    pub(crate) fn tree(&self) -> &Arc<Tree> {
        &self.tree
    }

    /// The root job's id: the parent of every agent the session spawns.
    pub(crate) fn root(&self) -> &JobId {
        &self.root.id
    }

    /// The tools the session may call: the profile's plugin tools, then the spawn tools
    /// when the profile may spawn (`max_depth` above 0, the spawn tools not in its
    /// `disallowed_tools`).
    pub fn tools(&self) -> Vec<ToolDefinition> {
        self.root.tool_definitions_with(&self.spawn_tools)
    }

    /// What tool `name` does in effect under the session's profile, for MCP
    /// clients' tool annotations (`None`: the session has no such tool).
    pub(crate) fn hints(&self, name: &str) -> Option<crate::config::ToolHints> {
        let capabilities = &self.root.profile.capabilities;
        crate::plugin::hints::spawn_tool(name, capabilities).or_else(|| {
            self.root
                .runtime
                .registry
                .hints_for(name, &self.root.profile)
        })
    }

    /// Every event of the session's agents published from now on.
    pub fn events(&self) -> EventStream {
        self.tree.events.subscribe()
    }

    /// Cancels every agent of the session (and their in-flight model and tool calls).
    pub fn cancel(&self) {
        self.tree.cancel.cancel();
    }

    /// Calls tool `name` with JSON `arguments`: a plugin tool in a fresh sandbox under
    /// the profile's capabilities, or a spawn tool as the root agent. An `Err` is a
    /// tool error (a denial, a timeout, bad arguments) with its reason.
    ///
    /// Dropping the future before it finishes cancels the agents the call started.
    pub async fn call(&self, name: &str, arguments: &str) -> Result<String, String> {
        self.call_watched(name, arguments, None).await
    }

    /// The typed answers (output schemas) of this session's jobs whose result blocks
    /// `text` holds, as `{"results": [{"id", "state", "output"}]}`; `None` when it
    /// holds none (a client reads the values rather than the blocks). When the
    /// session's profile fixes a schema (so the spawn tools declare
    /// [`Session::results_schema`]), every job `text` names is listed, with its state
    /// as it stands and `output` null until it ends with a typed answer.
    pub(crate) fn typed_results(&self, text: &str) -> Option<Value> {
        let declared = self.root.profile.output_schema.is_some();
        let results: Vec<Value> = self
            .tree
            .children(&self.root.id)
            .into_iter()
            .filter_map(|job| match &job.phase {
                Phase::Done(outcome) if text.contains(&format!("[{}: ", job.id)) => {
                    match (&outcome.output, declared) {
                        (Some(output), _) => Some(serde_json::json!({"id": job.id.0, "state": outcome.state, "output": output})),
                        (None, true) => Some(serde_json::json!({"id": job.id.0, "state": outcome.state, "output": null})),
                        (None, false) => None,
                    }
                }
                phase if declared && text.contains(&job.id.0) => Some(
                    serde_json::json!({"id": job.id.0, "state": phase.name(), "output": null}),
                ),
                _ => None,
            })
            .collect();
        (declared || !results.is_empty()).then(|| serde_json::json!({ "results": results }))
    }

    /// The `outputSchema` the spawn tools declare when the session's profile fixes an
    /// output schema: every result of theirs then carries `{"results": [...]}`, one
    /// entry per job it names (`output` holds the typed answer, null until there is
    /// one). `None` when the profile fixes none.
    pub(crate) fn results_schema(&self) -> Option<Value> {
        let schema = self.root.profile.output_schema.as_ref()?;
        Some(serde_json::json!({
            "type": "object",
            "properties": {"results": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "the job id"},
                    "state": {"type": "string", "description": "queued, running, or how it ended"},
                    "output": {"description": format!(
                        "its typed answer once it ended ok, else null; under profile `{}` it matches: {}",
                        self.root.profile.name,
                        schema.compact()
                    )}
                },
                "required": ["id", "state", "output"]
            }}},
            "required": ["results"]
        }))
    }

    /// As [`Session::call`], sending to `watch` every event of the agents the call
    /// waits for (a foreground `spawn_agent`'s child, the jobs `await_agents` names)
    /// and of their descendants, while it waits.
    pub(crate) async fn call_watched(
        &self,
        name: &str,
        arguments: &str,
        watch: Option<UnboundedSender<Event>>,
    ) -> Result<String, String> {
        let call = ToolCall {
            id: format!("session-{}", self.calls.fetch_add(1, Ordering::Relaxed)),
            name: name.to_string(),
            arguments: arguments.to_string(),
        };
        self.root
            .traced_call(&call, self.spawn_tool(name, arguments, watch), None)
            .await
    }

    async fn spawn_tool(
        &self,
        name: &str,
        arguments: &str,
        watch: Option<UnboundedSender<Event>>,
    ) -> Result<String, String> {
        match name {
            "spawn_agent" => {
                let request = spawn_request(arguments)?;
                let foreground = !request.background;
                // Subscribed before the spawn: the child's first events are followed.
                let events = watch.as_ref().filter(|_| foreground).map(|_| self.events());
                let spawned = self.root.spawn(request)?;
                if !foreground {
                    return Ok(spawned.background_answer(Delivery::Awaited, &self.tree.limits));
                }
                // A foreground spawn is a background spawn and an await of its child,
                // as inside warren; split here so the child's events are followed, and
                // so it is cancelled should the caller give up.
                let mut started = StartedAgents {
                    tree: self.tree.clone(),
                    ids: vec![spawned.id.clone()],
                };
                let wait = self
                    .root
                    .await_jobs(std::slice::from_ref(&spawned.id), None, false);
                let block = follow(wait, events.zip(watch), vec![spawned.id.clone()]).await;
                started.ids.clear();
                Ok(spawned.foreground_answer(block))
            }
            "await_agents" => {
                let mut args = serde_json::from_str::<Value>(arguments).unwrap_or_default();
                let ids = self
                    .tree
                    .select(&self.root.id, &JobSelection::parse(&args["job_ids"]));
                let bounded = match (self.await_limit, args.as_object_mut()) {
                    (Some(limit), Some(object)) if !object.contains_key("timeout_s") => {
                        object.insert("timeout_s".into(), limit.as_secs_f64().into());
                        true
                    }
                    _ => false,
                };
                let events = watch.as_ref().map(|_| self.events());
                if let Some(sink) = &watch {
                    self.announce(&ids, sink);
                }
                let arguments = match bounded {
                    true => args.to_string(),
                    false => arguments.to_string(),
                };
                let wait = self.root.spawn_tool(name, &arguments);
                let mut answer = follow(wait, events.zip(watch), ids.clone()).await?;
                let running: Vec<&str> = ids
                    .iter()
                    .filter(|id| {
                        self.tree
                            .job(id)
                            .is_some_and(|job| !matches!(job.phase, Phase::Done(_)))
                    })
                    .map(|id| id.0.as_str())
                    .collect();
                if bounded && !running.is_empty() {
                    answer.push_str(&format!(
                        "\n\nStill running: {}. Call await_agents again to keep waiting.",
                        running.join(", ")
                    ));
                }
                Ok(answer)
            }
            _ => self.root.spawn_tool(name, arguments).await,
        }
    }

    /// Sends, for each of `ids` under way, the event that introduced it (its
    /// `agent_queued`, or `agent_started` once it runs), so a watcher that joins late
    /// knows what each agent is.
    fn announce(&self, ids: &[JobId], sink: &UnboundedSender<Event>) {
        for job in ids.iter().filter_map(|id| self.tree.job(id)) {
            if !matches!(job.phase, Phase::Done(_)) {
                let _ = sink.send(job.introduction());
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.cancel();
        if let Some(job) = self.job.take() {
            let outcome = job.finish(AgentOutcome {
                error: Some("the session ended".into()),
                ..AgentOutcome::cancelled_before_start()
            });
            self.tree.record(|| Record::RunFinished {
                state: outcome.state,
                cost_usd: self.tree.spent(),
            });
        }
    }
}

/// Runs `wait` to its end while sending every event of `agents` and their descendants
/// to the watcher, when there is one.
async fn follow<T>(
    wait: impl std::future::Future<Output = T>,
    watcher: Option<(EventStream, UnboundedSender<Event>)>,
    agents: Vec<JobId>,
) -> T {
    let Some((mut events, sink)) = watcher else {
        return wait.await;
    };
    let mut followed: BTreeSet<String> = agents.into_iter().map(|id| id.0).collect();
    tokio::pin!(wait);
    loop {
        // Events first: those published before the wait ended still go out before it
        // returns.
        tokio::select! {
            biased;
            Some(record) = events.next() => {
                if let Event::AgentQueued(AgentIntro { agent, parent: Some(parent), .. }) = &record.event {
                    if followed.contains(parent) {
                        followed.insert(agent.clone());
                    }
                }
                if record.event.agent().is_some_and(|agent| followed.contains(agent)) {
                    let _ = sink.send(record.event);
                }
            }
            result = &mut wait => return result,
        }
    }
}
