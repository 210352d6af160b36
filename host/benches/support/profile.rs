//! What the call benches share: the profile they run tools under, the plugins they
//! load, and the line saying how the sandbox gets memory for its instances.

use std::path::Path;
use std::sync::Arc;

use warren::{Config, FsGrant, Profile, Sandbox, ToolRegistry};

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

/// A registry of plugin file `file` alone (no built-ins), compiled through the
/// compile cache in `cache_dir`.
#[allow(dead_code)] // not every bench loads plugin files
pub(crate) async fn load_plugin(
    sandbox: Arc<Sandbox>,
    file: &Path,
    cache_dir: &Path,
) -> anyhow::Result<ToolRegistry> {
    let config = Config::builder(std::env::temp_dir())
        .set("plugins.builtins", false)
        .set("plugins.files", vec![file.to_string_lossy().as_ref()])
        .set("plugins.cache_dir", cache_dir.to_string_lossy().as_ref())
        .build()?;
    ToolRegistry::for_config(sandbox, &config).await
}
