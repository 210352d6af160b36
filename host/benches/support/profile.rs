//! The profile the call benches run tools under.

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
        source: ProfileSource::Config,
        notes: Vec::new(),
    }
}
