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
//! Layout: [`runtime`] (the shared `Runtime`, which runs agents for the scheduler, and the `Agent`),
//! `turns` (the loop), `conversation` (what the loop keeps across a follow-up, and a run as the scheduler's), `children` (children's results delivered and awaited), `inbox` (what reaches an agent between turns: results, receipts, messages; and the interrupts that cut a turn), `tool_calls` (one tool call, run or answered from the journal
//! of a resumed run), `replay` (a model turn recorded, a recorded one reused, and a replay's
//! check of each request and tool result against the recording),
//! `spawn_tools` (the spawn tools: the model's calls to the scheduler and its answers in words),
//! `spans` (what an agent's span records of its work), `spawn_profiles` (the bounded list of profiles a spawning agent is shown),
//! `turn_limits` (how many tool calls one reply runs and how much of their results
//! is kept), `typed_output` (an answer asked for and checked against an output schema),
//! `line_diff` (the bounded line diffs of replays and `warren diff`).

mod a2a_child;
mod a2a_talk;
mod a2a_wire;
mod approval;
mod children;
mod conversation;
mod inbox;
mod line_diff;
mod person_wait;
mod replay;
mod runtime;
mod spans;
mod spawn_profiles;
mod spawn_tools;
mod tool_calls;
mod turn_limits;
pub(crate) mod turns;
mod typed_output;

pub(crate) use self::children::report_blocks;
pub(crate) use self::line_diff::line_diff;
pub(crate) use self::runtime::{Agent, Runtime};
pub(crate) use self::spawn_tools::{
    background_answer, definitions as spawn_tool_definitions, foreground_answer, spawn_request,
    AwaitAsk, Delivery, NO_JOBS,
};
