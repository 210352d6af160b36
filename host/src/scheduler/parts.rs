//! The scheduler itself and what its calls take: the [`Launch`] seam through which
//! it runs agents here, an agent's [`Role`] and [`Start`], and the [`Parent`] a call
//! is made for.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use crate::config::{AgentLimits, Config, Profile};
use crate::jobs::slots::SlotQueue;
use crate::jobs::{Backend, Placement};
use crate::outcome::AgentOutcome;
use crate::plugin::{ToolAccess, ToolRegistry};

/// An agent's run, to its end.
pub(crate) type AgentRun = Pin<Box<dyn Future<Output = Ended> + Send>>;

/// Runs a finished agent again, with its history, to read the follow-up that woke it.
pub(crate) type Wake = Box<dyn FnOnce() -> AgentRun + Send>;

/// How an agent's run ended: its outcome and, when a follow-up may resume it, how.
pub(crate) struct Ended {
    /// How it ended.
    pub(crate) outcome: AgentOutcome,
    /// Resumes it (`None`: it ended for good).
    pub(crate) wake: Option<Wake>,
}

impl From<AgentOutcome> for Ended {
    fn from(outcome: AgentOutcome) -> Ended {
        Ended {
            outcome,
            wake: None,
        }
    }
}

/// How the scheduler runs an agent in this process: the agent layer's side of the
/// seam (the scheduler never names the agent loop).
pub(crate) trait Launch: Send + Sync {
    /// The run of the agent `start` describes.
    fn launch(self: Arc<Self>, start: Start) -> AgentRun;
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

/// Everything an agent needs to run as a job: where it sits, who it is, its tools'
/// view of the sandbox, its first message and the span it nests under.
pub(crate) struct Start {
    /// Its job.
    pub(crate) place: Placement,
    /// Its profile and limits.
    pub(crate) role: Role,
    /// Its tools' view of the sandbox (made before its job was registered).
    pub(crate) access: ToolAccess,
    /// Its first message.
    pub(crate) task: String,
    /// The spawning call's span (`None` for a root).
    pub(crate) parent_span: Option<tracing::Span>,
}

/// The agent a scheduler call is made for: its job, profile and depth.
pub(crate) struct Parent<'a> {
    /// Its job.
    pub(crate) place: &'a Placement,
    /// Its effective profile (a child's capabilities stay within it).
    pub(crate) profile: &'a Profile,
    /// 0 for a root.
    pub(crate) depth: u32,
}

/// Spawns, awaits and delivers the sub-agents of every run of one host.
pub(crate) struct Scheduler {
    /// The configuration: the profiles a spawn may name.
    pub(super) config: Arc<Config>,
    /// Every plugin tool: what a profile may call, a child's tool subset checked against.
    pub(super) registry: Arc<ToolRegistry>,
    /// Models left out for want of their API key, with the variable to set.
    pub(super) missing_keys: BTreeMap<String, String>,
    /// Sub-agents running at once across every run (`max_concurrent_total`).
    pub(super) slots: Arc<SlotQueue>,
    /// Where children run when not in this process (`[queue] redis`: on workers).
    pub(super) remote: Option<Arc<dyn Backend>>,
    /// Runs agents in this process.
    launcher: Weak<dyn Launch>,
}

impl Scheduler {
    /// A scheduler over these parts; `launcher` runs agents here (the runtime that
    /// owns the scheduler, hence weak).
    pub(crate) fn new(
        config: Arc<Config>,
        registry: Arc<ToolRegistry>,
        missing_keys: BTreeMap<String, String>,
        slots: Arc<SlotQueue>,
        remote: Option<Arc<dyn Backend>>,
        launcher: Weak<dyn Launch>,
    ) -> Scheduler {
        Scheduler {
            config,
            registry,
            missing_keys,
            slots,
            remote,
            launcher,
        }
    }

    /// Sub-agents running at once across every run of this host, and who waits.
    pub(crate) fn slots(&self) -> &Arc<SlotQueue> {
        &self.slots
    }

    /// The models left out for want of their API key, with the variable to set.
    pub(crate) fn missing_keys(&self) -> &BTreeMap<String, String> {
        &self.missing_keys
    }

    /// A launch of an agent here, to make once it may run.
    pub(super) fn launch_later(&self) -> impl FnOnce(Start) -> AgentRun + Send + 'static {
        let launcher = self.launcher.clone();
        move |start| match launcher.upgrade() {
            Some(launcher) => launcher.launch(start),
            // The host is gone: nothing is left to run it.
            None => Box::pin(async { AgentOutcome::cancelled_before_start().into() }),
        }
    }
}
