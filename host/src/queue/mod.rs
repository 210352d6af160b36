//! Sub-agent jobs through Redis, in the BullMQ data layout, so `warren worker`
//! processes on any number of machines run them and Node BullMQ producers and
//! consumers interoperate.
//!
//! Layout: [`client`] (the parent's side: enqueue a child, mirror its events into the
//! run, wait for its result, cancel it; [`RemoteQueue`](client::RemoteQueue) is the
//! [`Backend`](crate::jobs::Backend) that runs children on workers). The worker's side
//! (`warren worker`: take jobs and run each as the root of a local agent tree) is
//! [`crate::worker`], above the host it drives. The queue itself is the official Rust
//! port of BullMQ (`bullmq-official`): the same Lua scripts and keys as Node BullMQ,
//! with locks, stalled-job recovery, retries and retention.
//!
//! What warren adds on top, all under the queue's own key prefix:
//! - **job data** ([`JobData`]): task, profile, context, constraints, limits, the
//!   parent's capability ceiling and (for `model: inherit`) model, parent id, depth
//!   and a W3C `traceparent`;
//! - **return value** ([`JobOutcome`]): state, text, error, turns, usage, cost,
//!   duration and the worker that ran it;
//! - **events**: a worker batches its agents' events into job progress updates
//!   (`{"warren_events": [...]}`), which BullMQ publishes on the queue's event stream;
//! - **cancel**: a key `bull:NAME:warren:cancel:ID` that the worker running the job
//!   polls (BullMQ has no cross-process cancel of an active job); a job still waiting
//!   is removed at once.

pub mod client;

pub use crate::config::QueueConfig;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jobs::ChildSpec;
use crate::llm::Usage;
use crate::outcome::{AgentOutcome, AgentState};
use crate::policy::Ceiling;

/// This process's name in the queue (`HOST-PID`): a worker's default name, and the
/// start of a parent's heartbeat key.
pub fn process_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    format!("{host}-{}", std::process::id())
}

/// The BullMQ job name warren's jobs carry (Node producers may use any name).
pub const JOB_NAME: &str = "agent";

fn keep_for(seconds: u64) -> Option<bullmq::types::RemoveOnFinish> {
    Some(bullmq::types::RemoveOnFinish::Options(
        bullmq::types::KeepJobs {
            age: Some(seconds),
            count: None,
            limit: None,
        },
    ))
}

impl QueueConfig {
    /// The BullMQ connection options.
    pub(crate) fn connection(&self) -> bullmq::options::RedisConnectionOptions {
        bullmq::options::RedisConnectionOptions {
            url: self.redis.clone().unwrap_or_default(),
            ..Default::default()
        }
    }

    /// BullMQ's retention policy for finished jobs: older than `keep_results_s`, they
    /// are dropped (lazily, when a later job finishes). Producers set it on each job;
    /// workers set it too, for jobs from producers that did not.
    pub(crate) fn retention(&self) -> Option<bullmq::types::RemoveOnFinish> {
        keep_for(self.keep_results_s)
    }

    /// How long failed jobs stay (`None`: BullMQ keeps them).
    pub(crate) fn failed_retention(&self) -> Option<bullmq::types::RemoveOnFinish> {
        self.keep_failed_s.and_then(keep_for)
    }

    /// The set of the sub-agent jobs that job `id`'s agents enqueued.
    pub(crate) fn children_key(&self, id: &str) -> String {
        format!("bull:{}:warren:children:{id}", self.name)
    }

    /// The heartbeat key of parent process `id`.
    pub(crate) fn alive_key(&self, id: &str) -> String {
        format!("bull:{}:warren:alive:{id}", self.name)
    }

    /// How long warren's own keys for a job (cancel flag, sub-agent set) live: as long
    /// as its result, and at least an hour.
    pub(crate) fn marker_ttl_s(&self) -> u64 {
        self.keep_results_s.max(3600)
    }

    /// The key a parent sets to cancel job `id`.
    pub(crate) fn cancel_key(&self, id: &str) -> String {
        format!("bull:{}:warren:cancel:{id}", self.name)
    }
}

/// What a sub-agent job carries (the BullMQ job's `data`). Only `task` and `profile`
/// are required, so a Node producer can send `{task, profile}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobData {
    /// What to do.
    pub task: String,
    /// The profile, by name; the worker uses its own profile of that name. Empty (a
    /// producer that sends none): the worker's `[queue] default_profile`.
    #[serde(default)]
    pub profile: String,
    /// Only what the sub-agent needs (string or object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Rules the sub-agent must follow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    /// Added to the profile's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// A subset of the profile's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The parent's model (a `[models]` name), sent when the child's profile says
    /// `model: inherit`: the worker runs the child on its model of that name, as a
    /// child in the parent's process would (ignored when the worker's profile names
    /// its own model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Limits; each only tightens the worker's profile.
    #[serde(default)]
    pub limits: JobLimits,
    /// What the parent's tools may touch: the child gets at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<Ceiling>,
    /// The spawning agent's job id (for the record and the worker's logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// How deep the agent is (0: a root, as for a job from a Node producer).
    #[serde(default)]
    pub depth: u32,
    /// W3C trace context of the parent's `execute_tool spawn_agent` span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The parent process's heartbeat (the `ID` of `bull:NAME:warren:alive:ID`):
    /// while it runs it keeps that key alive; once the key expires, the worker
    /// cancels the job, as nobody is left to read its result. Absent (a Node
    /// producer): no such check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<String>,
    /// Fields warren does not know (other producers add their own): ignored, and
    /// logged once per field name by the worker.
    #[serde(flatten, skip_serializing)]
    pub unknown: std::collections::BTreeMap<String, Value>,
}

/// A job's limits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobLimits {
    /// Model turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Wall time of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// Cost cap of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// What is left of the parent run's budget, for the job's whole subtree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

/// A finished job's return value: the sub-agent's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobOutcome {
    /// `ok`, `error`, `cancelled`, `timed_out`, `max_turns` or `budget_exceeded`.
    pub state: String,
    /// The final answer (or the last text).
    pub text: String,
    /// Why it did not end well.
    #[serde(default)]
    pub error: Option<String>,
    /// Model turns.
    pub turns: u32,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Of those, cached.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Dollars spent by the agent and its descendants.
    pub cost_usd: f64,
    /// Wall time on the worker.
    pub duration_ms: u64,
    /// The worker that ran it.
    #[serde(default)]
    pub worker: String,
}

impl JobOutcome {
    /// The return value for `outcome`; `cost_usd` is the whole subtree's.
    pub fn new(outcome: &AgentOutcome, cost_usd: f64, worker: &str) -> JobOutcome {
        JobOutcome {
            state: outcome.state.as_str().into(),
            text: outcome.text.clone(),
            error: outcome.error.clone(),
            turns: outcome.turns,
            input_tokens: outcome.usage.input_tokens,
            cached_input_tokens: outcome.usage.cached_input_tokens,
            output_tokens: outcome.usage.output_tokens,
            cost_usd,
            duration_ms: outcome.duration.as_millis() as u64,
            worker: worker.into(),
        }
    }

    /// Back to an agent outcome.
    pub fn into_outcome(self) -> AgentOutcome {
        let state = AgentState::from_name(&self.state).unwrap_or(AgentState::Error);
        AgentOutcome {
            state,
            text: self.text,
            error: self.error,
            turns: self.turns,
            usage: Usage {
                input_tokens: self.input_tokens,
                cached_input_tokens: self.cached_input_tokens,
                output_tokens: self.output_tokens,
            },
            cost_usd: self.cost_usd,
            duration: Duration::from_millis(self.duration_ms),
        }
    }
}

impl JobData {
    /// The job that runs `spec` on a worker.
    pub fn from_spec(spec: ChildSpec) -> JobData {
        JobData {
            task: spec.task,
            profile: spec.profile,
            context: spec.context,
            constraints: spec.constraints,
            system_prompt: spec.system_prompt,
            tools: spec.tools,
            model: spec.model,
            limits: JobLimits {
                max_turns: Some(spec.limits.max_turns),
                timeout_s: Some(spec.limits.timeout_s),
                max_cost_usd: spec.limits.max_cost_usd,
                budget_usd: spec.budget_usd,
            },
            ceiling: Some(Ceiling::of(&spec.ceiling)),
            parent: Some(spec.parent.0),
            depth: spec.depth,
            traceparent: spec.traceparent,
            heartbeat: None,
            unknown: Default::default(),
        }
    }
}
