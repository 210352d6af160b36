//! What the call benches share: the profile they run tools under, and the line
//! saying how the sandbox resets its memory slots.

use warren::{Config, FsGrant, Profile};

/// A profile named `bench` that may call `tools` (`["*"]`: every tool), granted the
/// directories `fs`, from a configuration made in code (no built-in plugins).
pub(crate) fn bench_profile(tools: &[&str], fs: Vec<FsGrant>) -> anyhow::Result<Profile> {
    let config = Config::builder(std::env::temp_dir())
        .set("plugins.builtins", false)
        .profile("bench", "", tools)
        .set("profiles.bench.capabilities.fs", fs)
        .build()?;
    Ok(config.profile("bench")?)
}

/// How the sandbox resets its pooled slots, for the bench's header.
pub(crate) fn bench_reset(sandbox: &warren::Sandbox) -> &'static str {
    if sandbox.resets_in_place() {
        "memory slots: reset in place (no swap)"
    } else {
        "memory slots: pages given back to the kernel after each call (swap active, or no pooling)"
    }
}
