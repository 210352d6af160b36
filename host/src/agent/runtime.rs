//! What an agent is made of: the [`Runtime`] every agent shares (which runs agents
//! for the scheduler: [`Launch`]), and the [`Agent`] itself, at its place in the tree.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{AgentLimits, Config, Profile};
use crate::jobs::Placement;
use crate::llm::{Provider, ToolDefinition};
use crate::plugin::{ToolAccess, ToolRegistry};
use crate::scheduler::{AgentRun, Launch, Parent, Scheduler, Start};

/// What every agent of every run shares: the configuration, the tools, the models,
/// and the scheduler its sub-agents go through. The host builds it; agents only read
/// it.
pub(crate) struct Runtime {
    /// The loaded configuration.
    pub(crate) config: Arc<Config>,
    /// Every plugin tool.
    pub(crate) registry: Arc<ToolRegistry>,
    /// The spawn tools' definitions (they name the configured profiles), made once.
    pub(crate) spawn_tools: Vec<ToolDefinition>,
    /// Every configured model, by name (but those left out for want of a key).
    pub(crate) providers: BTreeMap<String, Arc<dyn Provider>>,
    /// Spawns, awaits and delivers sub-agents, here or on workers.
    pub(crate) scheduler: Scheduler,
}

impl AsRef<crate::scheduler::Scheduler> for Runtime {
    fn as_ref(&self) -> &crate::scheduler::Scheduler {
        &self.scheduler
    }
}

impl Launch for Runtime {
    fn launch(self: Arc<Self>, start: Start) -> AgentRun {
        // A remote A2A agent runs there: no model, no sandbox here.
        if let Some(remote) = start.role.profile.remote.clone() {
            return super::a2a_child::run(self, start, remote);
        }
        let task = start.task.clone();
        Agent::new(self, start).start_run(task)
    }
}

/// One agent: its effective profile, place in the tree and limits.
pub(crate) struct Agent {
    /// Config, tools, models and the scheduler.
    pub(crate) runtime: Arc<Runtime>,
    /// Its job: tree, id, cancellation tokens and slots.
    pub(crate) place: Placement,
    /// Its profile, with capabilities already intersected with its parent's.
    pub(crate) profile: Profile,
    /// The `system_prompt` its parent passed at spawn time.
    pub(crate) extra_prompt: Option<String>,
    /// 0 for the root.
    pub(crate) depth: u32,
    /// Effective limits.
    pub(crate) limits: AgentLimits,
    /// Its tools' view of the sandbox (and its scratch directory).
    pub(crate) access: ToolAccess,
    /// The parent's `execute_tool spawn_agent` span, under which this agent's trace
    /// nests (background children included); `None` for the root. Held until the
    /// agent first rests, so it keeps no span open while it waits for a follow-up.
    pub(crate) parent_span: Option<tracing::Span>,
    /// For the root of a job from the queue: the W3C trace context of the remote
    /// parent's span, under which this agent's trace nests.
    pub(crate) traceparent: Option<String>,
}

impl Agent {
    /// The agent `start` describes, working in `runtime`.
    pub(crate) fn new(runtime: Arc<Runtime>, start: Start) -> Agent {
        let Start {
            place,
            role,
            access,
            parent_span,
            ..
        } = start;
        Agent {
            runtime,
            place,
            profile: role.profile,
            extra_prompt: role.extra_prompt,
            depth: role.depth,
            limits: role.limits,
            access,
            parent_span,
            traceparent: role.traceparent,
        }
    }

    /// This agent as the parent of the scheduler's calls.
    pub(crate) fn parent(&self) -> Parent<'_> {
        Parent {
            place: &self.place,
            profile: &self.profile,
            depth: self.depth,
        }
    }

    /// Whether this agent gets the spawn tools.
    pub(crate) fn can_spawn(&self) -> bool {
        self.depth < self.place.tree.limits.max_depth && self.profile.tools.allows_spawn()
    }
}
