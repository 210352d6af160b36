//! A [`Session`]: an outside caller (an MCP client) standing as the root of a job tree.
//! It calls the profile's plugin tools and the spawn tools directly, the way a root
//! agent's model would, with no model of its own: one tree, one budget and one
//! concurrency limit per session, every agent of it cancelled when the session ends.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::agent::{Agent, Runtime};
use crate::events::{summarize, Event, EventStream};
use crate::jobs::spawn_request::SpawnRequest;
use crate::jobs::{JobId, Phase, Tree};
use crate::llm::{ToolCall, ToolDefinition};
use crate::plugin::ToolAccess;

/// What a session's root job says its task is (there is no task: the caller drives).
const SESSION_TASK: &str = "(session: tools called by an outside client)";
/// What the spawn tools promise an agent about background children, and what a
/// session's caller gets instead: it has no model turns to push results into.
const PUSHED: [(&str, &str); 2] = [
    (
        "and you are notified when it finishes",
        "and you get its result with await_agents",
    ),
    (
        "you will be notified when it finishes.",
        "get its result with await_agents (list_agents shows where it is).",
    ),
];

/// `text` with the promise of pushed results replaced by what a caller must do.
fn without_push(text: String) -> String {
    PUSHED
        .iter()
        .fold(text, |text, (agent, caller)| text.replace(agent, caller))
}

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
    /// Held while a `spawn_agent` call registers its child, so the one child that
    /// appears under the root meanwhile is known to be this call's (to follow and
    /// cancel it).
    spawning: tokio::sync::Mutex<()>,
    /// Numbers the session's tool calls in events.
    calls: AtomicU64,
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
        let tree = Tree::new(runtime.config.run_limits);
        let cancel = tree.cancel.clone();
        let (id, _done) = tree.add(None, &profile.name, SESSION_TASK, cancel.clone());
        tree.set_phase(&id, Phase::Running(Instant::now()));
        let root = Agent {
            runtime,
            tree: tree.clone(),
            id,
            limits: profile.limits,
            access: ToolAccess::new(profile.clone())?,
            profile,
            extra_prompt: None,
            parent_span: None,
            traceparent: None,
            depth: 0,
            children_cancel: cancel.child_token(),
            cancel,
        };
        Ok(Session {
            tree,
            root,
            spawning: tokio::sync::Mutex::new(()),
            calls: AtomicU64::new(0),
        })
    }

    /// The profile the session runs under.
    pub fn profile(&self) -> &str {
        &self.root.profile.name
    }

    /// The job tree (the root job is the session itself).
    pub fn tree(&self) -> &Arc<Tree> {
        &self.tree
    }

    /// The root job's id: the parent of every agent the session spawns.
    pub fn root(&self) -> &JobId {
        &self.root.id
    }

    /// The tools the session may call: the profile's plugin tools, then the spawn tools
    /// when the profile may spawn (`spawn` in its tools, `max_depth` above 0).
    pub fn tools(&self) -> Vec<ToolDefinition> {
        self.root
            .tool_definitions()
            .into_iter()
            .map(|tool| ToolDefinition {
                description: without_push(tool.description),
                ..tool
            })
            .collect()
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

    /// As [`Session::call`], sending to `watch` every event of the agents the call
    /// waits for (a foreground `spawn_agent`'s child, the jobs `await_agents` names)
    /// and of their descendants, while it waits.
    pub async fn call_watched(
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
            .traced_call(&call, self.spawn_tool(name, arguments, watch))
            .await
    }

    async fn spawn_tool(
        &self,
        name: &str,
        arguments: &str,
        watch: Option<UnboundedSender<Event>>,
    ) -> Result<String, String> {
        let args: Option<Value> = serde_json::from_str(arguments).ok();
        match name {
            "spawn_agent" => {
                // A foreground spawn is a background spawn and an await of its child,
                // as inside warren; split here so the child is known (to follow its
                // events, and to cancel it should the caller give up).
                let foreground = args
                    .as_ref()
                    .and_then(|args| SpawnRequest::parse(args).ok())
                    .is_some_and(|request| !request.background);
                // Every spawn registers under the lock, so the one new child is this
                // call's.
                let registering = self.spawning.lock().await;
                let Some(mut args) = args.filter(|_| foreground) else {
                    return self
                        .root
                        .spawn_tool(name, arguments)
                        .await
                        .map(without_push);
                };
                args["background"] = Value::Bool(true);
                let events = watch.as_ref().map(|_| self.events());
                let child = {
                    let _registering = registering;
                    let before = self.child_ids();
                    self.root.spawn_tool(name, &args.to_string()).await?;
                    self.child_ids().difference(&before).next().cloned()
                };
                let Some(child) = child else {
                    return Err("the sub-agent was not registered (a bug in warren)".into());
                };
                let mut started = StartedAgents {
                    tree: self.tree.clone(),
                    ids: vec![child.clone()],
                };
                let wait = self
                    .root
                    .await_jobs(std::slice::from_ref(&child), None, false);
                let result = follow(wait, events.zip(watch), vec![child.clone()]).await;
                started.ids.clear();
                Ok(result)
            }
            "await_agents" => {
                let ids = args.as_ref().map_or_else(Vec::new, |a| self.named_jobs(a));
                let events = watch.as_ref().map(|_| self.events());
                if let Some(sink) = &watch {
                    self.announce(&ids, sink);
                }
                let wait = self.root.spawn_tool(name, arguments);
                follow(wait, events.zip(watch), ids).await
            }
            _ => self.root.spawn_tool(name, arguments).await,
        }
    }

    /// Sends, for each of `ids` under way, the event that introduced it (its
    /// `AgentQueued`, or `AgentStarted` once it runs), so a watcher that joins late
    /// knows what each agent is.
    fn announce(&self, ids: &[JobId], sink: &UnboundedSender<Event>) {
        for job in ids.iter().filter_map(|id| self.tree.job(id)) {
            if matches!(job.phase, Phase::Done(_)) {
                continue;
            }
            let (agent, parent) = (job.id.0, job.parent.map(|p| p.0));
            let (profile, task) = (job.profile, summarize(&job.task));
            let _ = sink.send(match job.phase {
                Phase::Queued => Event::AgentQueued {
                    agent,
                    parent,
                    profile,
                    task,
                    label: job.label,
                },
                Phase::Running(_) | Phase::Done(_) => Event::AgentStarted {
                    agent,
                    parent,
                    profile,
                    task,
                    label: job.label,
                },
            });
        }
    }

    /// The ids of the root's children.
    fn child_ids(&self) -> BTreeSet<JobId> {
        self.tree
            .children(&self.root.id)
            .into_iter()
            .map(|job| job.id)
            .collect()
    }

    /// The jobs an `await_agents` call names (`"*"`: every child of the root).
    fn named_jobs(&self, args: &Value) -> Vec<JobId> {
        match &args["job_ids"] {
            Value::String(all) if all.trim() == "*" => self.child_ids().into_iter().collect(),
            Value::String(list) => list
                .split(',')
                .map(|id| JobId(id.trim().to_string()))
                .collect(),
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .map(|id| JobId(id.trim().to_string()))
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.cancel();
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
                if let Event::AgentQueued { agent, parent: Some(parent), .. } = &record.event {
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
