//! What an agent is made of: the [`Runtime`] every agent shares, the [`Role`] its
//! parent (or the caller) settled, and the [`Agent`] itself, at its place in the tree.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{AgentLimits, Config, Profile};
use crate::jobs::{Backend, JobId, Placement, Tree};
use crate::llm::{Provider, ToolDefinition};
use crate::plugin::{ToolAccess, ToolRegistry};

/// What every agent of every run shares: the configuration, the tools, the models,
/// and where children run. The host builds it; agents only read it.
pub(crate) struct Runtime {
    /// The loaded configuration.
    pub(crate) config: Config,
    /// Every plugin tool.
    pub(crate) registry: Arc<ToolRegistry>,
    /// The spawn tools' definitions (they name the configured profiles), made once.
    pub(crate) spawn_tools: Vec<ToolDefinition>,
    /// Every configured model, by name (but those in `missing_keys`).
    pub(crate) providers: BTreeMap<String, Arc<dyn Provider>>,
    /// Models left out for want of their API key (`warren mcp`, started by a client
    /// that did not pass the variable on), with the variable: a spawn on one is
    /// refused saying what to set.
    pub(crate) missing_keys: BTreeMap<String, String>,
    /// Sub-agents running at once across every run (`max_concurrent_total`), and who
    /// waits for a slot.
    pub(crate) slots: Arc<crate::jobs::slots::SlotQueue>,
    /// Where children run when not in this process (`[queue] redis`: on workers).
    pub(crate) remote: Option<Arc<dyn Backend>>,
}

/// Who an agent is, settled before it runs: by its parent's spawn (narrowed), by the
/// caller for a root, or by a queue job on a worker.
pub(crate) struct Role {
    /// Its profile, with capabilities already intersected with its parent's.
    pub(crate) profile: Profile,
    /// Effective limits.
    pub(crate) limits: AgentLimits,
    /// The `system_prompt` its parent passed at spawn time.
    pub(crate) extra_prompt: Option<String>,
    /// 0 for the root.
    pub(crate) depth: u32,
    /// For the root of a job from the queue: the W3C trace context of the remote
    /// parent's span.
    pub(crate) traceparent: Option<String>,
}

impl Role {
    /// A root agent of `profile`, with the profile's own limits.
    pub(crate) fn root(profile: Profile) -> Role {
        Role {
            limits: profile.limits,
            profile,
            extra_prompt: None,
            depth: 0,
            traceparent: None,
        }
    }
}

/// One agent: its effective profile, place in the tree and limits.
pub(crate) struct Agent {
    /// Config, tools and models.
    pub(crate) runtime: Arc<Runtime>,
    /// The run it belongs to.
    pub(crate) tree: Arc<Tree>,
    /// Its job id.
    pub(crate) id: JobId,
    /// Its profile, with capabilities already intersected with its parent's.
    pub(crate) profile: Profile,
    /// The `system_prompt` its parent passed at spawn time.
    pub(crate) extra_prompt: Option<String>,
    /// 0 for the root.
    pub(crate) depth: u32,
    /// Effective limits.
    pub(crate) limits: AgentLimits,
    /// Cancels this agent (and, through `children_cancel`, its descendants).
    pub(crate) cancel: CancellationToken,
    /// Parent token of every child; cancelled when this agent ends.
    pub(crate) children_cancel: CancellationToken,
    /// The concurrency slots its job works in (lent out while it waits).
    pub(crate) lease: Arc<crate::jobs::slots::Lease>,
    /// Its tools' view of the sandbox (and its scratch directory).
    pub(crate) access: ToolAccess,
    /// The parent's `execute_tool spawn_agent` span, under which this agent's trace
    /// nests (background children included); `None` for the root.
    pub(crate) parent_span: Option<tracing::Span>,
    /// For the root of a job from the queue: the W3C trace context of the remote
    /// parent's span, under which this agent's trace nests.
    pub(crate) traceparent: Option<String>,
}

impl Agent {
    /// The agent working as the job at `place` in `role`; `access` is its tools' view
    /// of the sandbox (made before the job is registered, so a child that cannot be
    /// prepared is never registered); `parent_span` is the spawning call's span.
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        place: &Placement,
        role: Role,
        access: ToolAccess,
        parent_span: Option<tracing::Span>,
    ) -> Agent {
        Agent {
            runtime,
            tree: place.tree.clone(),
            id: place.id.clone(),
            profile: role.profile,
            extra_prompt: role.extra_prompt,
            depth: role.depth,
            limits: role.limits,
            cancel: place.cancel.clone(),
            children_cancel: place.children_cancel.clone(),
            lease: place.lease.clone(),
            access,
            parent_span,
            traceparent: role.traceparent,
        }
    }

    /// Where this agent's job sits.
    pub(crate) fn place(&self) -> Placement {
        Placement {
            tree: self.tree.clone(),
            id: self.id.clone(),
            cancel: self.cancel.clone(),
            children_cancel: self.children_cancel.clone(),
            lease: self.lease.clone(),
        }
    }

    /// Whether this agent gets the spawn tools.
    pub(crate) fn can_spawn(&self) -> bool {
        self.depth < self.tree.limits.max_depth && self.profile.tools.allows_spawn()
    }
}
