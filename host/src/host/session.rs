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

use crate::agent::{
    background_answer, foreground_answer, report_blocks, spawn_request, spawn_tool_definitions,
    Agent, AwaitAsk, Delivery, Runtime, NO_JOBS,
};
use crate::events::{AgentIntro, Event, EventStream};
use crate::jobs::{Job, JobHandle, JobId, Phase, Tree};
use crate::journal::Record;
use crate::llm::{ToolCall, ToolDefinition};
use crate::outcome::AgentOutcome;
use crate::plugin::ToolAccess;
use crate::scheduler::{Report, Role, Start, Until};

/// What a session's tool call answered.
pub(crate) struct Answer {
    /// The text the caller reads.
    pub(crate) text: String,
    /// For the spawn tools, the typed answers of the jobs the text reports
    /// (`{"results": [...]}`), when there are any or the profile declares them.
    pub(crate) structured: Option<Value>,
}

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
        let start = Start {
            place: job.place().clone(),
            role: Role::root(profile),
            access,
            task: SESSION_TASK.to_string(),
            parent_span: None,
        };
        let root = Agent::new(runtime, start);
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
    pub(crate) fn profile(&self) -> &str {
        &self.root.profile.name
    }

    /// The job tree (the root job is the session itself).
    pub(crate) fn tree(&self) -> &Arc<Tree> {
        &self.tree
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
        self.call_watched(name, arguments, None)
            .await
            .map(|answer| answer.text)
    }

    /// The typed answers (output schemas) of `jobs`, as a spawn tool's answer reported
    /// them, as `{"results": [{"id", "state", "output"}]}`; `None` when none has one
    /// (a client reads the values rather than the blocks). When the session's profile
    /// fixes a schema (so the spawn tools declare [`Session::results_schema`]), every
    /// job is listed, with its state as reported and `output` null until it ends
    /// with a typed answer.
    fn typed_results(&self, jobs: &[Job]) -> Option<Value> {
        let declared = self.root.profile.output_schema.is_some();
        let mut listed = BTreeSet::new();
        let results: Vec<Value> = jobs
            .iter()
            .filter(|job| listed.insert(&job.id))
            .filter_map(|job| match (&job.phase, declared) {
                (Phase::Done(outcome), _) => match (&outcome.output, declared) {
                    (Some(output), _) => Some(serde_json::json!({"id": job.id.0, "state": outcome.state, "output": output})),
                    (None, true) => Some(serde_json::json!({"id": job.id.0, "state": outcome.state, "output": null})),
                    (None, false) => None,
                },
                (phase, true) => Some(
                    serde_json::json!({"id": job.id.0, "state": phase.name(), "output": null}),
                ),
                (_, false) => None,
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
    /// and of their descendants, while it waits; the answer carries the typed results
    /// of the jobs a spawn tool reported.
    pub(crate) async fn call_watched(
        &self,
        name: &str,
        arguments: &str,
        watch: Option<UnboundedSender<Event>>,
    ) -> Result<Answer, String> {
        let call = ToolCall {
            id: format!("session-{}", self.calls.fetch_add(1, Ordering::Relaxed)),
            name: name.to_string(),
            arguments: arguments.to_string(),
        };
        let mut jobs = Vec::new();
        let text = self
            .root
            .traced_call(
                &call,
                self.spawn_tool(name, arguments, watch, &mut jobs),
                None,
                None,
            )
            .await?;
        let structured = matches!(name, "spawn_agent" | "await_agents")
            .then(|| self.typed_results(&jobs))
            .flatten();
        Ok(Answer { text, structured })
    }

    /// Leaves `text` from a person (`from`) for agent `to` of the session's tree,
    /// delivered as `mode` says (`warren send`'s receipt).
    pub(crate) async fn message(
        &self,
        from: &str,
        to: &JobId,
        text: String,
        mode: crate::events::MessageMode,
    ) -> crate::scheduler::Receipt {
        let from = crate::scheduler::Sender::Person(from);
        let scheduler = &self.root.runtime.scheduler;
        scheduler
            .message_from(&self.tree, from, to, text, mode)
            .await
    }

    /// The session's first agent: the one a task's `spawn_agent` started.
    pub(crate) fn first_agent(&self) -> Option<JobId> {
        let root = &self.root.place.id;
        self.tree
            .children(root)
            .into_iter()
            .next()
            .map(|job| job.id)
    }

    /// Spawn tool `name`, done by the scheduler for the session's root; `reported`
    /// gets the jobs its answer reports, as it reports them.
    async fn spawn_tool(
        &self,
        name: &str,
        arguments: &str,
        watch: Option<UnboundedSender<Event>>,
        reported: &mut Vec<Job>,
    ) -> Result<String, String> {
        let scheduler = &self.root.runtime.scheduler;
        let parent = self.root.parent();
        match name {
            "spawn_agent" => {
                let request = spawn_request(arguments)?;
                let foreground = !request.background;
                // Subscribed before the spawn: the child's first events are followed.
                let events = watch.as_ref().filter(|_| foreground).map(|_| self.events());
                let grant = scheduler.spawn(&parent, request)?;
                if !foreground {
                    reported.extend(self.tree.job(&grant.id));
                    let limits = &self.tree.limits;
                    return Ok(background_answer(&grant, Delivery::Awaited, limits));
                }
                // A foreground spawn is a background spawn and a wait for its child,
                // as inside warren; split here so the child's events are followed, and
                // so it is cancelled should the caller give up.
                let mut started = StartedAgents {
                    tree: self.tree.clone(),
                    ids: vec![grant.id.clone()],
                };
                let ids = std::slice::from_ref(&grant.id);
                let wait = scheduler.wait(&parent, ids, Until::All, None);
                let reports = follow(wait, events.zip(watch), ids.to_vec()).await;
                started.ids.clear();
                let block = report_blocks(&reports);
                reported.extend(reports.into_iter().filter_map(Report::into_job));
                Ok(foreground_answer(&grant, block))
            }
            "await_agents" => {
                let args = serde_json::from_str::<Value>(arguments).unwrap_or_default();
                let mut ask = AwaitAsk::parse(&args);
                let ids = scheduler.select(&self.root.place, &ask.jobs);
                if ids.is_empty() {
                    return Ok(NO_JOBS.into());
                }
                let bounded = ask.timeout.is_none() && self.await_limit.is_some();
                ask.timeout = ask.timeout.or(self.await_limit);
                let events = watch.as_ref().map(|_| self.events());
                if let Some(sink) = &watch {
                    self.announce(&ids, sink);
                }
                let wait = scheduler.wait(&parent, &ids, ask.until, ask.timeout);
                let reports = follow(wait, events.zip(watch), ids.clone()).await;
                let mut answer = report_blocks(&reports);
                let running: Vec<&str> = reports
                    .iter()
                    .filter_map(|report| match report {
                        Report::Child(job) if !matches!(job.phase, Phase::Done(_)) => {
                            Some(job.id.0.as_str())
                        }
                        _ => None,
                    })
                    .collect();
                if bounded && !running.is_empty() {
                    answer.push_str(&format!(
                        "\n\nStill running: {}. Call await_agents again to keep waiting.",
                        running.join(", ")
                    ));
                }
                reported.extend(reports.into_iter().filter_map(Report::into_job));
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
                cost_usd: self.tree.budget.spent(),
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
