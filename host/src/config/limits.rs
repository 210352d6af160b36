//! The limits a configuration sets besides capabilities: of one agent (turns, time,
//! cost), of a whole run (concurrency, depth, budget) and of what plugins may offer:
//! each default and each bound written once, here, for the resolver and the key table.

use super::values::Bounded;

/// The most turns one agent may be given (`max_turns`, `max_turns_ceiling`, an
/// agent file's `maxTurns`).
pub(crate) const MAX_TURNS: u64 = 1000;
/// `max_turns` and `max_turns_ceiling` of `[defaults]` and a profile.
pub(super) type Turns = Bounded<1, MAX_TURNS>;
/// `timeout_s` of one agent: up to a day.
pub(super) type AgentSeconds = Bounded<1, 86_400>;
/// `[defaults] max_concurrent`.
pub(super) type RunConcurrency = Bounded<1, 256>;
/// `[defaults] max_concurrent_total`.
pub(super) type HostConcurrency = Bounded<1, 4096>;
/// The most `[defaults] max_depth` may be: no run's tree is deeper.
pub(crate) const MAX_DEPTH: u32 = 16;
/// `[defaults] max_depth`.
pub(super) type Depth = Bounded<0, { MAX_DEPTH as u64 }>;
/// `[defaults] max_message_kb`.
pub(super) type MessageKib = Bounded<1, 1024>;
/// `[defaults] max_queued_messages`.
pub(super) type QueuedMessages = Bounded<1, 1024>;
/// Follow-ups one agent may take after it finished (0: none).
pub(super) type FollowUps = Bounded<0, 1024>;
/// Requests for a person that may wait at once in one run.
pub(super) type PendingRequests = Bounded<1, 1024>;
/// `[defaults] max_agents`.
pub(super) type Agents = Bounded<1, 1_000_000>;
/// `[plugins] max_tools`.
pub(super) type ToolCount = Bounded<1, 100_000>;
/// `[plugins] max_*_kb`.
pub(super) type ToolKib = Bounded<1, 1_048_576>;

/// `[defaults] max_turns`.
pub(crate) const DEFAULT_MAX_TURNS: u32 = 10;
/// `[defaults] timeout_s`.
pub(crate) const DEFAULT_TIMEOUT_S: u64 = 60;
/// `[defaults] max_concurrent`.
pub(crate) const DEFAULT_MAX_CONCURRENT: usize = 3;
/// `[defaults] max_concurrent_total`.
pub(crate) const DEFAULT_MAX_CONCURRENT_TOTAL: usize = 32;
/// `[defaults] max_depth`.
pub(crate) const DEFAULT_MAX_DEPTH: u32 = 1;
/// `[defaults] max_message_kb`.
pub(crate) const DEFAULT_MAX_MESSAGE_KB: usize = 16;
/// `[defaults] max_queued_messages`.
pub(crate) const DEFAULT_MAX_QUEUED_MESSAGES: usize = 32;
/// Follow-ups one agent may take after it finished.
pub(crate) const DEFAULT_MAX_FOLLOW_UPS: usize = 8;
/// Requests for a person that may wait at once in one run.
pub(crate) const DEFAULT_MAX_PENDING_REQUESTS: usize = 16;
/// `[defaults] max_agents`: a tree of 100 children of 100 each fits, in about 80 MiB
/// in one process.
pub(crate) const DEFAULT_MAX_AGENTS: usize = 10_000;
/// `[plugins] max_tools`.
pub(crate) const DEFAULT_MAX_TOOLS: usize = 256;
/// `[plugins] max_description_kb`.
pub(crate) const DEFAULT_MAX_DESCRIPTION_KB: usize = 16;
/// `[plugins] max_schema_kb`.
pub(crate) const DEFAULT_MAX_SCHEMA_KB: usize = 64;
/// `[plugins] max_profile_tools_kb`.
pub(crate) const DEFAULT_MAX_PROFILE_TOOLS_KB: usize = 1024;

/// Limits of one agent; spawn arguments may only tighten them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AgentLimits {
    /// LLM turns before the agent stops with `max_turns` (default 10).
    pub max_turns: u32,
    /// Wall time of the whole agent in seconds (default 60).
    pub timeout_s: u64,
    /// Cost cap of the agent alone, in US dollars.
    pub max_cost_usd: Option<f64>,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_turns: DEFAULT_MAX_TURNS,
            timeout_s: DEFAULT_TIMEOUT_S,
            max_cost_usd: None,
        }
    }
}

/// Limits of a whole run: the root agent and every sub-agent below it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RunLimits {
    /// Sub-agents running at once; more are queued (default 3).
    pub max_concurrent: usize,
    /// Sub-agents running at once across every run of one host (default 32).
    pub max_concurrent_total: usize,
    /// How deep agents may nest: 1 means the root's children get no spawn tools.
    pub max_depth: u32,
    /// Cost cap of the whole tree, in US dollars.
    pub budget_usd: Option<f64>,
    /// Bytes one message to an agent may hold, in KiB (default 16).
    pub max_message_kb: usize,
    /// Messages that may wait unread in one agent's mailbox (default 32).
    pub max_queued_messages: usize,
    /// Follow-ups that may wake one agent after it finished (default 8).
    pub max_follow_ups: usize,
    /// Approvals and questions that may wait for a person at once (default 16).
    pub max_pending_requests: usize,
    /// Agents one run's process may hold, the root included (default 10,000).
    pub max_agents: usize,
    /// Who answers them when no person is asked (`warren run --approve`; default:
    /// deny at once).
    pub(crate) answers: super::approval::AnswerPolicy,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_concurrent_total: DEFAULT_MAX_CONCURRENT_TOTAL,
            max_depth: DEFAULT_MAX_DEPTH,
            budget_usd: None,
            max_message_kb: DEFAULT_MAX_MESSAGE_KB,
            max_queued_messages: DEFAULT_MAX_QUEUED_MESSAGES,
            max_follow_ups: DEFAULT_MAX_FOLLOW_UPS,
            max_pending_requests: DEFAULT_MAX_PENDING_REQUESTS,
            max_agents: DEFAULT_MAX_AGENTS,
            answers: super::approval::AnswerPolicy::Deny,
        }
    }
}

/// Load-time bounds on what plugins may offer (`[plugins]`): a plugin past one is
/// refused at load, naming it, so no model request carries an unbounded tool list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PluginLimits {
    /// Tools one plugin may offer (`max_tools`, default 256).
    pub max_tools: usize,
    /// Bytes of one tool's description (`max_description_kb`, default 16 KiB).
    pub max_description_bytes: usize,
    /// Bytes of one tool's input schema (`max_schema_kb`, default 64 KiB).
    pub max_schema_bytes: usize,
    /// Bytes of all tool definitions one profile sees (`max_profile_tools_kb`,
    /// default 1 MiB): what every model request of its agents carries.
    pub max_profile_bytes: usize,
}

impl Default for PluginLimits {
    fn default() -> Self {
        PluginLimits {
            max_tools: DEFAULT_MAX_TOOLS,
            max_description_bytes: DEFAULT_MAX_DESCRIPTION_KB * 1024,
            max_schema_bytes: DEFAULT_MAX_SCHEMA_KB * 1024,
            max_profile_bytes: DEFAULT_MAX_PROFILE_TOOLS_KB * 1024,
        }
    }
}
