//! The agent loop: one isolated conversation per agent. Each turn it calls the
//! profile's model with the tools the profile may use, runs the tool calls (several in
//! one turn run concurrently) in the sandbox under the agent's capabilities, and stops
//! with an [`AgentOutcome`] when the model answers, or a limit (turns, time, cost) or
//! a cancellation ends it.
//!
//! Before each model turn, results of background children that finished are pushed
//! into the conversation; an agent that would finish while children still run is told
//! so and given their results, so nothing is abandoned.
//!
//! Layout: [`runtime`] (the shared `Runtime`, an agent's `Role`, the `Agent`),
//! `turns` (the loop), `children` (children's results delivered and awaited), `tool_calls` (one tool call, run or answered from the journal
//! of a resumed run), `replay` (a model turn recorded, a recorded one reused, and a replay's
//! check of each request and tool result against the recording),
//! `spawn_tools` (the four spawn tools and how a child is spawned),
//! `spawn_profiles` (the bounded list of profiles a spawning agent is shown),
//! `turn_limits` (how many tool calls one reply runs and how much of their results
//! is kept), `typed_output` (an answer asked for and checked against an output schema),
//! `line_diff` (the bounded line diffs of replays and `warren diff`).

mod children;
mod line_diff;
mod replay;
mod runtime;
mod spawn_profiles;
mod spawn_tools;
mod tool_calls;
mod turn_limits;
pub(crate) mod turns;
mod typed_output;

pub(crate) use self::line_diff::line_diff;
pub(crate) use self::replay::fork_profile;
pub(crate) use self::runtime::{Agent, Role, Runtime};
pub use self::spawn_profiles::MAX_SPAWN_PROFILES_BYTES;
pub(crate) use self::spawn_tools::{
    definitions as spawn_tool_definitions, spawn_request, Delivery,
};
pub use self::turn_limits::{MAX_TOOL_CALLS_PER_REPLY, MAX_TURN_RESULT_BYTES};
pub use self::turns::SUBAGENT_PROMPT;
