//! A root job to start on this host: a run's root, or a job taken from the queue.

use crate::config::{AgentLimits, Profile};

/// A job from the queue, ready to run as the root of a tree on this host.
pub(crate) struct JobStart {
    /// The worker's profile, capabilities and tools already narrowed by the job.
    pub(crate) profile: Profile,
    /// The first message (task, context, constraints).
    pub(crate) task: String,
    /// Added to the profile's system prompt.
    pub(crate) extra_prompt: Option<String>,
    /// The agent's limits.
    pub(crate) limits: AgentLimits,
    /// How deep the agent is in the whole tree.
    pub(crate) depth: u32,
    /// What is left of the parent run's budget.
    pub(crate) budget_usd: Option<f64>,
    /// The parent's trace context.
    pub(crate) traceparent: Option<String>,
    /// The queue job it runs for (on a worker).
    pub(crate) queue_job: Option<String>,
    /// The run's id, when the caller chose it (random otherwise).
    pub(crate) run_id: Option<String>,
    /// Who answers its requests for a person when nobody is asked (`None`: as the
    /// configuration's run limits say).
    pub(crate) answers: Option<crate::config::AnswerPolicy>,
    /// A follow-up's job: the history the agent opens with and the letters it reads
    /// first.
    pub(crate) carried: Option<(crate::jobs::History, Vec<crate::jobs::mailbox::Letter>)>,
    /// Whether the agent's history is kept when it finishes ok (for a follow-up).
    pub(crate) keep_history: bool,
}

impl JobStart {
    /// A run's root job on this host: `task` under `profile`, at depth 0, with its
    /// profile's limits and the whole run's budget, as `run_id` when given.
    pub(super) fn root(
        profile: Profile,
        task: String,
        budget_usd: Option<f64>,
        run_id: Option<String>,
    ) -> Self {
        JobStart {
            limits: profile.limits,
            profile,
            task,
            extra_prompt: None,
            depth: 0,
            budget_usd,
            traceparent: None,
            queue_job: None,
            run_id,
            answers: None,
            carried: None,
            keep_history: false,
        }
    }
}
