//! The limits a configuration sets besides capabilities: of one agent (turns, time,
//! cost), of a whole run (concurrency, depth, budget) and of what plugins may offer.

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
            max_turns: 10,
            timeout_s: 60,
            max_cost_usd: None,
        }
    }
}

/// Limits of a whole run: the root agent and every sub-agent below it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunLimits {
    /// Sub-agents running at once; more are queued (default 3).
    pub max_concurrent: usize,
    /// Sub-agents running at once across every run of one host (default 32).
    pub max_concurrent_total: usize,
    /// How deep agents may nest: 1 means the root's children get no spawn tools.
    pub max_depth: u32,
    /// Cost cap of the whole tree, in US dollars.
    pub budget_usd: Option<f64>,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            max_concurrent: 3,
            max_concurrent_total: 32,
            max_depth: 1,
            budget_usd: None,
        }
    }
}

/// Load-time bounds on what plugins may offer (`[plugins]`): a plugin past one is
/// refused at load, naming it, so no model request carries an unbounded tool list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginLimits {
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
            max_tools: 256,
            max_description_bytes: 16 * 1024,
            max_schema_bytes: 64 * 1024,
            max_profile_bytes: 1024 * 1024,
        }
    }
}
