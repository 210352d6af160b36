//! Built-in plugins served before their code is compiled. `warren mcp` must answer
//! `initialize` and `tools/list` at once, and compiling the built-ins takes seconds
//! when the compile cache is cold (a first run, a new HOME, a new warren). Their tool
//! lists are recorded in the binary (`builtin_tools.json`, checked against what the
//! plugins list by this file's test), so the registry is complete without their
//! code; the code compiles in the background, and the first call to one of their tools
//! waits for its own plugin only. Once compiled, a plugin's own list is compared with
//! the recorded one: a difference (a stale record, a build bug) fails its calls.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tracing::{error, info};

use super::cache::CompileCache;
use crate::sandbox::{Prepared, Sandbox, ToolSpec};

/// Each built-in's tools as it lists them, by plugin name:
/// `{"files": [{"name", "description", "input_schema"}], ...}`, the schema as the
/// plugin's own JSON text.
const RECORDED: &str = include_str!("builtin_tools.json");

/// The tools built-in `name` lists, as recorded in the binary (`None`: not recorded).
pub(crate) fn recorded_tools(name: &str) -> Option<Vec<ToolSpec>> {
    let recorded: serde_json::Value = serde_json::from_str(RECORDED).ok()?;
    recorded[name]
        .as_array()?
        .iter()
        .map(|tool| {
            Some(ToolSpec {
                name: tool["name"].as_str()?.to_string(),
                description: tool["description"].as_str()?.to_string(),
                input_schema: tool["input_schema"].as_str()?.to_string(),
            })
        })
        .collect()
}

/// A built-in's code, compiled once, by whoever needs it first: the background task
/// started at load, or a call that comes before it is done.
pub(super) struct DeferredCode {
    /// The plugin's name, in logs and errors.
    name: String,
    /// `(built-in)/NAME.wasm`, in errors.
    path: PathBuf,
    /// The component, embedded in the binary.
    bytes: &'static [u8],
    /// Its SHA-256, the compile cache's key.
    sha256: String,
    /// Compiles and links it.
    sandbox: Arc<Sandbox>,
    /// Where its compiled artifact is looked up and stored.
    cache: CompileCache,
    /// The tools served for it meanwhile; it must list exactly these.
    recorded: Vec<ToolSpec>,
    /// The linked code once compiled. A failure is not kept: it may be passing (no
    /// descriptors left), so the next call tries again, and reports it if it fails.
    code: tokio::sync::OnceCell<Prepared>,
}

impl DeferredCode {
    /// Built-in `name`'s code, to be compiled; its tools meanwhile are `recorded`.
    pub(super) fn new(
        name: &str,
        bytes: &'static [u8],
        sha256: String,
        sandbox: Arc<Sandbox>,
        cache: CompileCache,
        recorded: Vec<ToolSpec>,
    ) -> Arc<DeferredCode> {
        Arc::new(DeferredCode {
            name: name.to_string(),
            path: PathBuf::from(format!("(built-in)/{name}.wasm")),
            bytes,
            sha256,
            sandbox,
            cache,
            recorded,
            code: tokio::sync::OnceCell::new(),
        })
    }

    /// Starts compiling in the background.
    pub(super) fn start(self: &Arc<Self>) {
        let code = self.clone();
        tokio::spawn(async move {
            let _ = code.get().await;
        });
    }

    /// The linked code, waiting for it to compile if need be (or compiling it again
    /// when the last attempt failed).
    pub(super) async fn get(&self) -> Result<&Prepared, String> {
        // Boxed: every tool call's future holds this one, and compiling's own futures
        // are deep (past rustc's type-layout depth limit in a release build).
        self.code.get_or_try_init(|| Box::pin(self.compile())).await
    }

    async fn compile(&self) -> Result<Prepared, String> {
        let started = Instant::now();
        let loaded = async {
            let (engine, cache, path, bytes, sha256) = (
                self.sandbox.engine().clone(),
                self.cache.clone(),
                self.path.clone(),
                self.bytes,
                self.sha256.clone(),
            );
            let (component, outcome) = tokio::task::spawn_blocking(move || {
                cache.load_digested(&engine, &path, bytes, &sha256)
            })
            .await??;
            let mut pre = self.sandbox.prepare(&component)?;
            if crate::builtin::ON_FIRST_CALL.contains(&self.name.as_str()) {
                pre = pre.made_ahead();
            }
            let listed = self.sandbox.list_tools(&pre, &self.name).await?;
            let same = |a: &ToolSpec, b: &ToolSpec| {
                (&a.name, &a.description, &a.input_schema)
                    == (&b.name, &b.description, &b.input_schema)
            };
            anyhow::ensure!(
                listed.len() == self.recorded.len()
                    && listed.iter().zip(&self.recorded).all(|(a, b)| same(a, b)),
                "it lists other tools than this binary recorded for it (host/src/plugin/builtin_tools.json is stale: a build bug)"
            );
            anyhow::Ok((pre, outcome))
        }
        .await;
        let elapsed = started.elapsed();
        match loaded {
            Ok((pre, outcome)) => {
                info!(plugin = %self.name, tools = self.recorded.len(), ?outcome, ?elapsed, "plugin loaded");
                Ok(pre)
            }
            Err(error) => {
                error!(plugin = %self.name, ?elapsed, "built-in plugin failed to load: {error:#}");
                Err(format!(
                    "built-in plugin `{}` failed to load: {error:#}",
                    self.name
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::sandbox::ToolSpec;

    /// The record of `plugins` (name and tools), as `builtin_tools.json` holds it.
    fn record<'a>(plugins: impl Iterator<Item = (&'a str, &'a [ToolSpec])>) -> String {
        let record: serde_json::Map<String, serde_json::Value> = plugins
            .map(|(name, tools)| {
                let tools = tools
                    .iter()
                    .map(|tool| {
                        serde_json::json!({
                            "name": tool.name,
                            "description": tool.description,
                            "input_schema": tool.input_schema,
                        })
                    })
                    .collect();
                (name.to_string(), serde_json::Value::Array(tools))
            })
            .collect();
        let mut text = serde_json::to_string_pretty(&record).expect("JSON values serialize");
        text.push('\n');
        text
    }
    /// The built-ins' tool lists recorded in the binary (what `warren mcp` serves
    /// before their code is compiled) are what the compiled plugins list. After a
    /// change to a built-in's tools, `WARREN_BLESS=1 cargo test -p warren --lib
    /// recorded_builtin` rewrites the record.
    #[tokio::test]
    async fn the_recorded_builtin_tool_lists_are_what_the_builtins_list() {
        // Each built-in's own code is asked: a registry would serve the interpreters
        // from the record itself (they compile on their first call). Compiled through
        // the integration tests' shared compile cache.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let sandbox = Sandbox::new().unwrap();
        let cache = CompileCache::new(root.join("target").join("test-compile-cache"));
        let mut own = Vec::new();
        for (name, bytes) in crate::builtin::BUILTINS {
            let path = PathBuf::from(format!("(built-in)/{name}.wasm"));
            let (component, _) = cache.load_bytes(sandbox.engine(), &path, bytes).unwrap();
            let prepared = sandbox.prepare(&component).unwrap();
            own.push((name, sandbox.list_tools(&prepared, name).await.unwrap()));
        }
        let builtins: Vec<&str> = own.iter().map(|(name, _)| *name).collect();
        let listed = record(own.iter().map(|(name, tools)| (*name, tools.as_slice())));
        let file = root.join("host/src/plugin/builtin_tools.json");
        if std::env::var_os("WARREN_BLESS").is_some() {
            std::fs::write(&file, &listed).unwrap();
        }
        let recorded = std::fs::read_to_string(&file).unwrap();
        assert!(
            recorded == listed,
            "{} is stale: run `WARREN_BLESS=1 cargo test -p warren --lib recorded_builtin` to rewrite it, then rebuild",
            file.display()
        );
        for name in &builtins {
            let tools = recorded_tools(name).unwrap();
            assert!(!tools.is_empty(), "{name}");
        }
    }
}
