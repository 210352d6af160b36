//! What the call benches share: the profile they run tools under, and the line
//! saying how the sandbox resets its memory slots.

use warren::config::{Profile, ProfileSource, ToolSelection};
use warren::CapabilitySet;

/// A profile named `bench` that may call every tool, with `capabilities`.
pub(crate) fn bench_profile(capabilities: CapabilitySet) -> Profile {
    Profile {
        name: "bench".into(),
        description: None,
        tools: ToolSelection::all(),
        capabilities,
        system_prompt: String::new(),
        model: None,
        limits: Default::default(),
        max_turns_ceiling: 10,
        inherit_model: false,
        output_schema: None,
        source: ProfileSource::Config,
        notes: Vec::new(),
    }
}

/// How the sandbox resets its pooled slots, for the bench's header.
pub(crate) fn bench_reset(sandbox: &warren::Sandbox) -> &'static str {
    if sandbox.resets_in_place() {
        "memory slots: reset in place (no swap)"
    } else {
        "memory slots: pages given back to the kernel after each call (swap active, or no pooling)"
    }
}
