//! Plugins: loading component files (through the compile cache), asking each for its
//! tools, and routing a tool call to the plugin that offers it.
//!
//! Two kinds of plugin: a component that exports `warren:plugin/tool` lists its own
//! tools; any other component is a [`typed`] component, whose exported functions are
//! the tools. Both run through the same sandbox path.
//!
//! Layout: [`cache`] (compiled artifacts on disk), [`typed`] (typed components),
//! [`overrides`] (`[plugins.NAME]`: rename, describe, hide), `deferred` (built-ins
//! listed from their recorded tools and compiled in the background, for a server that
//! must list its tools at once). The [`ToolRegistry`] owns
//! one `InstancePre` per plugin; every call instantiates it afresh in the sandbox.

mod cache;
pub mod componentize;
mod deferred;
pub mod hints;
pub mod overrides;
pub mod typed;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use tracing::info;

pub use self::cache::{CacheOutcome, CompileCache};
use self::deferred::DeferredCode;
pub use self::deferred::{record, recorded_tools};
use self::typed::{TypedComponent, TypedOptions};
use crate::config::{Config, PluginLimits, PluginTable, Profile};
use crate::llm::ToolDefinition;
use crate::sandbox::{Measured, Prepared, Sandbox, ToolCallError, ToolRequest, ToolSpec};

/// One loaded plugin file.
pub struct Plugin {
    /// The file name without `.wasm`, used in reports.
    pub name: String,
    /// Where it was loaded from (`(built-in)/NAME.wasm` for a built-in).
    pub path: PathBuf,
    /// Whether it is embedded in the binary.
    pub builtin: bool,
    /// The tools it offers, after its `[plugins.NAME]` table.
    pub tools: Vec<ToolSpec>,
    /// For each of `tools`, its input schema, parsed once at load.
    schemas: Vec<Arc<serde_json::Value>>,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    /// For each of `tools`, which of the plugin's own tools it is (an index into the
    /// names it listed, or into its typed functions).
    sources: Vec<usize>,
    /// What the component is, linked; instantiated per call.
    kind: PluginKind,
    /// For each of `tools`, what it does by its nature (MCP tool annotations).
    hints: Vec<crate::config::ToolHints>,
}

/// The two kinds of plugin.
enum PluginKind {
    /// Implements `warren:plugin/tool`.
    Wit {
        /// Imports resolved once (with and without the network).
        pre: WitCode,
        /// The tool names as it listed them (what `call-tool` expects).
        names: Vec<String>,
    },
    /// Any other component: its exported functions are the tools.
    Typed(TypedComponent),
}

/// A `warren:plugin/tool` plugin's linked code.
enum WitCode {
    /// Compiled and linked at load.
    Ready(Prepared),
    /// A built-in served from its recorded tool list, compiled in the background
    /// ([`ToolRegistry::for_serving`]).
    Deferred(Arc<DeferredCode>),
}

impl Plugin {
    /// Whether it is a typed component (its exported functions are its tools) rather
    /// than a `warren:plugin/tool` implementation.
    pub fn is_typed(&self) -> bool {
        matches!(self.kind, PluginKind::Typed(_))
    }
}

/// Every loaded tool, by name, and the sandbox that runs them.
pub struct ToolRegistry {
    /// Runs every call.
    sandbox: Arc<Sandbox>,
    /// Plugins in load order.
    plugins: Vec<Plugin>,
    /// Tool name → (plugin index, tool index).
    index: BTreeMap<String, (usize, usize)>,
}

/// A profile's view of the registry: which tools it sees and what they may touch.
/// Owns the profile's scratch directory, removed when this is dropped.
pub struct ToolAccess {
    /// The profile whose tools and capabilities apply.
    pub profile: Profile,
    /// The private writable directory, when the profile grants `scratch`.
    scratch: Option<tempfile::TempDir>,
}

impl ToolAccess {
    /// Access for `profile`, creating its scratch directory if it has one.
    pub fn new(profile: Profile) -> anyhow::Result<Self> {
        let scratch = if profile.capabilities.scratch {
            Some(
                tempfile::Builder::new()
                    .prefix("warren-scratch-")
                    .tempdir()
                    .context("creating scratch directory")?,
            )
        } else {
            None
        };
        Ok(ToolAccess { profile, scratch })
    }

    /// The scratch directory on the host, if any.
    pub fn scratch_dir(&self) -> Option<&Path> {
        self.scratch.as_ref().map(tempfile::TempDir::path)
    }
}

/// How to take plugin `plugin`'s tool `tool` (as the plugin offers it) out of a clash:
/// its `[plugins.NAME]` table hides it or renames it.
fn clash_remedy(plugin: &str, tool: &str) -> String {
    let key = if crate::config::is_valid_name(plugin) {
        plugin.to_string()
    } else {
        format!("{plugin:?}")
    };
    let renamed = format!("{plugin}_{tool}");
    let renamed = if crate::config::is_valid_name(&renamed) {
        renamed
    } else {
        "new_name".to_string()
    };
    format!(
        "leave it out of {plugin} with `[plugins.{key}] hide = [\"{tool}\"]`, or rename it with `[plugins.{key}] rename = {{ {tool} = \"{renamed}\" }}`"
    )
}

impl ToolRegistry {
    /// Loads `files` in order with the default [`PluginLimits`].
    pub async fn load(
        sandbox: Arc<Sandbox>,
        files: &[PathBuf],
        cache: &CompileCache,
    ) -> anyhow::Result<Self> {
        let limits = PluginLimits::default();
        Self::load_with(sandbox, files, &[], cache, &limits, &BTreeMap::new()).await
    }

    /// Loads what `config` names: its built-ins and plugin files, through its compile
    /// cache, within its plugin limits.
    pub async fn for_config(sandbox: Arc<Sandbox>, config: &Config) -> anyhow::Result<Self> {
        Self::load_config(sandbox, config, false).await
    }

    /// As [`ToolRegistry::for_config`], for a server that must list its tools at once
    /// (`warren mcp`): the built-ins are offered from the tool lists recorded in the
    /// binary and compiled in the background, a call to one of their tools waiting
    /// for its plugin only (a plugin that fails to compile fails the call with the
    /// reason, and logs it; the next call tries again). Plugin files load before it returns, as ever (from the
    /// compile cache, in milliseconds, once compiled).
    pub async fn for_serving(sandbox: Arc<Sandbox>, config: &Config) -> anyhow::Result<Self> {
        Self::load_config(sandbox, config, true).await
    }

    async fn load_config(
        sandbox: Arc<Sandbox>,
        config: &Config,
        defer_builtins: bool,
    ) -> anyhow::Result<Self> {
        Self::load_inner(
            sandbox,
            &config.plugin_files,
            &config.builtins,
            &CompileCache::at(config.cache_dir.clone()),
            &config.plugin_limits,
            &config.plugin_tables,
            defer_builtins,
        )
        .await
    }

    /// Loads the built-in plugins named in `builtins`, then `files` in order, each
    /// offered as its `[plugins.NAME]` table in `tables` says. A file that is not a
    /// component (or a typed one warren cannot offer), a bad tool name or schema, a
    /// host tool's name, a tool list past `limits`, a table naming a plugin or tool
    /// that is not there, or two plugins offering the same tool is an error naming the
    /// file(s). A file with the very bytes of a built-in replaces it.
    pub async fn load_with(
        sandbox: Arc<Sandbox>,
        files: &[PathBuf],
        builtins: &[String],
        cache: &CompileCache,
        limits: &PluginLimits,
        tables: &BTreeMap<String, PluginTable>,
    ) -> anyhow::Result<Self> {
        Self::load_inner(sandbox, files, builtins, cache, limits, tables, false).await
    }

    async fn load_inner(
        sandbox: Arc<Sandbox>,
        files: &[PathBuf],
        builtins: &[String],
        cache: &CompileCache,
        limits: &PluginLimits,
        tables: &BTreeMap<String, PluginTable>,
        defer_builtins: bool,
    ) -> anyhow::Result<Self> {
        let mut sources: Vec<(String, PathBuf, std::borrow::Cow<'static, [u8]>, bool)> = Vec::new();
        let mut file_bytes = Vec::new();
        for path in files {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            file_bytes.push((path.clone(), bytes));
        }
        for (name, bytes) in crate::builtin::BUILTINS {
            if builtins.iter().any(|b| b == name) && !file_bytes.iter().any(|(_, f)| f == bytes) {
                let path = PathBuf::from(format!("(built-in)/{name}.wasm"));
                sources.push((name.to_string(), path, bytes.into(), true));
            }
        }
        for (path, bytes) in file_bytes {
            let name = path.file_stem().map_or_else(
                || path.display().to_string(),
                |s| s.to_string_lossy().into_owned(),
            );
            sources.push((name, path, bytes.into(), false));
        }
        if let Some(stray) = tables
            .keys()
            .find(|t| !sources.iter().any(|(name, ..)| name == *t))
        {
            anyhow::bail!(
                "[plugins.{stray}]: no plugin `{stray}` is loaded (plugins are named by their file name without .wasm: {})",
                sources
                    .iter()
                    .map(|(name, ..)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let no_table = PluginTable::default();
        let mut plugins: Vec<Plugin> = Vec::new();
        let mut index = BTreeMap::new();
        let mut deferred = Vec::new();
        for (name, path, bytes, builtin) in sources {
            let started = Instant::now();
            let table = tables.get(&name).unwrap_or(&no_table);
            let recorded = match (&bytes, defer_builtins) {
                (std::borrow::Cow::Borrowed(embedded), true) => {
                    recorded_tools(&name).map(|tools| (*embedded, tools))
                }
                _ => None,
            };
            let (kind, own, outcome, sha256) = match recorded {
                Some((embedded, tools)) => {
                    let sha256 = cache::digest(embedded);
                    let code = DeferredCode::new(
                        &name,
                        embedded,
                        sha256.clone(),
                        sandbox.clone(),
                        cache.clone(),
                        tools.clone(),
                    );
                    deferred.push(code.clone());
                    let names = tools.iter().map(|t| t.name.clone()).collect();
                    let pre = WitCode::Deferred(code);
                    (PluginKind::Wit { pre, names }, tools, None, sha256)
                }
                None => {
                    let (kind, own, outcome, sha256) =
                        Self::compile(&sandbox, cache, limits, table, &name, &path, bytes).await?;
                    (kind, own, Some(outcome), sha256)
                }
            };
            // The names as the plugin offers them: what `[plugins.NAME]` keys refer to.
            let own_names: Vec<String> = own.iter().map(|spec| spec.name.clone()).collect();
            let offered = overrides::offer(table, own, matches!(kind, PluginKind::Wit { .. }))
                .with_context(|| format!("[plugins.{name}] ({})", path.display()))?;
            let (sources, tools): (Vec<usize>, Vec<ToolSpec>) = offered.into_iter().unzip();
            anyhow::ensure!(
                tools.len() <= limits.max_tools,
                "{}: offers {} tools; a plugin may offer at most {} ([plugins] max_tools)",
                path.display(),
                tools.len(),
                limits.max_tools
            );
            let mut schemas = Vec::with_capacity(tools.len());
            for (position, spec) in tools.iter().enumerate() {
                anyhow::ensure!(
                    spec.description.len() <= limits.max_description_bytes,
                    "{}: the description of `{}` has {} bytes; at most {} KiB ([plugins] max_description_kb)",
                    path.display(),
                    spec.name,
                    spec.description.len(),
                    limits.max_description_bytes / 1024
                );
                anyhow::ensure!(
                    spec.input_schema.len() <= limits.max_schema_bytes,
                    "{}: the input schema of `{}` has {} bytes; at most {} KiB ([plugins] max_schema_kb)",
                    path.display(),
                    spec.name,
                    spec.input_schema.len(),
                    limits.max_schema_bytes / 1024
                );
                if !crate::config::is_valid_name(&spec.name) {
                    anyhow::bail!(
                        "{}: tool name `{}` must match ^[a-zA-Z0-9_-]{{1,64}}$",
                        path.display(),
                        spec.name
                    );
                }
                if crate::config::SPAWN_TOOLS.contains(&spec.name.as_str()) {
                    anyhow::bail!(
                        "{}: tool name `{}` is reserved for the host's spawn tools; a plugin may not offer it",
                        path.display(),
                        spec.name
                    );
                }
                match serde_json::from_str::<serde_json::Value>(&spec.input_schema) {
                    Ok(schema @ serde_json::Value::Object(_)) => schemas.push(Arc::new(schema)),
                    Ok(_) => anyhow::bail!(
                        "{}: input schema of `{}` is not a JSON object",
                        path.display(),
                        spec.name
                    ),
                    Err(e) => anyhow::bail!(
                        "{}: input schema of `{}` is not valid JSON: {e}",
                        path.display(),
                        spec.name
                    ),
                }
                if let Some((other, _)) = index.insert(spec.name.clone(), (plugins.len(), position))
                {
                    let hint = if plugins[other].builtin {
                        format!(
                            "; to use this plugin's, leave the built-in out: [plugins] builtins = [{}] (or false)",
                            crate::builtin::names()
                                .filter(|n| *n != plugins[other].name)
                                .map(|n| format!("\"{n}\""))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    } else {
                        String::new()
                    };
                    anyhow::bail!(
                        "tool `{}` is offered by both {} and {}; tool names must be unique across plugins: {}{hint}",
                        spec.name,
                        plugins[other].path.display(),
                        path.display(),
                        clash_remedy(&name, &own_names[sources[position]])
                    );
                }
            }
            let hints = sources
                .iter()
                .map(|&source| {
                    let own = &own_names[source];
                    hints::declared(&name, builtin, own, table.annotate.get(own))
                })
                .collect();
            let elapsed = started.elapsed();
            match outcome {
                Some(outcome) => {
                    info!(plugin = %name, tools = tools.len(), ?outcome, ?elapsed, "plugin loaded")
                }
                None => info!(
                    plugin = %name,
                    tools = tools.len(),
                    "plugin's tools listed from the binary; its code compiles in the background"
                ),
            }
            plugins.push(Plugin {
                name,
                path: path.clone(),
                builtin,
                tools,
                schemas,
                sha256,
                sources,
                kind,
                hints,
            });
        }
        // Only once the whole registry is valid: a configuration error compiles nothing.
        for code in &deferred {
            code.start();
        }
        Ok(ToolRegistry {
            sandbox,
            plugins,
            index,
        })
    }

    /// Compiles (or loads from `cache`) plugin `name` and links it: its code and the
    /// tools it lists, its compile outcome and its SHA-256.
    async fn compile(
        sandbox: &Arc<Sandbox>,
        cache: &CompileCache,
        limits: &PluginLimits,
        table: &PluginTable,
        name: &str,
        path: &Path,
        bytes: std::borrow::Cow<'static, [u8]>,
    ) -> anyhow::Result<(PluginKind, Vec<ToolSpec>, CacheOutcome, String)> {
        // The bytes come back from the blocking task: a typed component's docs
        // may be in them.
        let ((component, outcome), bytes, sha256) = {
            let (engine, cache, path) = (sandbox.engine().clone(), cache.clone(), path.to_owned());
            let (loaded, bytes, sha256) = tokio::task::spawn_blocking(move || {
                let sha256 = cache::digest(&bytes);
                let loaded = cache.load_digested(&engine, &path, &bytes, &sha256);
                (loaded, bytes, sha256)
            })
            .await?;
            (loaded?, bytes, sha256)
        };
        let (kind, own) = if typed::is_plugin(&component, sandbox) {
            let pre = sandbox.prepare(&component).with_context(|| {
                format!(
                    "{} does not fit the warren:plugin/plugin world (see wit/plugin.wit)",
                    path.display()
                )
            })?;
            let tools = sandbox
                .list_tools(&pre, name)
                .await
                .with_context(|| format!("loading {}", path.display()))?;
            let names = tools.iter().map(|t| t.name.clone()).collect();
            let pre = WitCode::Ready(pre);
            (PluginKind::Wit { pre, names }, tools)
        } else {
            let options = TypedOptions {
                wit: table.wit.as_deref(),
                hidden: &table.hide,
                limits,
            };
            let (typed, tools) = TypedComponent::load(sandbox, &component, &bytes, &options)
                .with_context(|| {
                    format!(
                        "{}: cannot offer this typed component's functions as tools",
                        path.display()
                    )
                })?;
            (PluginKind::Typed(typed), tools)
        };
        Ok((kind, own, outcome, sha256))
    }

    /// Each plugin's SHA-256 by name: what a run's journal records, so a resume
    /// can tell a changed plugin.
    pub fn digests(&self) -> std::collections::BTreeMap<String, String> {
        self.plugins
            .iter()
            .map(|p| (p.name.clone(), p.sha256.clone()))
            .collect()
    }

    /// The loaded plugins, in load order.
    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// Checks that the tool definitions `profile` sees (names, descriptions and
    /// schemas, as every model request of its agents carries them) fit in
    /// `limits.max_profile_bytes`.
    pub fn check_profile(&self, profile: &Profile, limits: &PluginLimits) -> anyhow::Result<()> {
        let bytes: usize = self
            .tools_for(profile)
            .map(|(spec, _)| spec.name.len() + spec.description.len() + spec.input_schema.len())
            .sum();
        anyhow::ensure!(
            bytes <= limits.max_profile_bytes,
            "profile `{}` sees {bytes} bytes of tool definitions, more than {} KiB ([plugins] max_profile_tools_kb); narrow its `tools`",
            profile.name,
            limits.max_profile_bytes / 1024
        );
        Ok(())
    }

    /// What tool `name` does in effect under `profile`, for MCP clients' tool
    /// annotations (`None`: no such tool).
    pub fn hints_for(&self, name: &str, profile: &Profile) -> Option<crate::config::ToolHints> {
        let &(plugin, tool) = self.index.get(name)?;
        Some(hints::effective(
            name,
            &self.plugins[plugin].hints[tool],
            &profile.capabilities,
        ))
    }

    /// The names of every tool `profile` may call, sorted.
    pub fn names_for<'a>(&'a self, profile: &'a Profile) -> Vec<&'a str> {
        self.tools_for(profile)
            .map(|(spec, _)| spec.name.as_str())
            .collect()
    }

    /// Every loaded tool's name, sorted.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.index.keys().map(String::as_str)
    }

    /// The sandbox running the calls.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Every tool `profile` may call, sorted by name, with the plugin offering it.
    pub fn tools_for<'a>(
        &'a self,
        profile: &'a Profile,
    ) -> impl Iterator<Item = (&'a ToolSpec, &'a Plugin)> + 'a {
        self.allowed(profile)
            .map(|(plugin, t)| (&plugin.tools[t], plugin))
    }

    /// Every tool `profile` may call, sorted by name: its plugin and its index there.
    fn allowed<'a>(
        &'a self,
        profile: &'a Profile,
    ) -> impl Iterator<Item = (&'a Plugin, usize)> + 'a {
        self.index
            .iter()
            .filter(|(name, _)| profile.tools.allows(name))
            .map(|(_, &(p, t))| (&self.plugins[p], t))
    }

    /// The definitions of every tool `profile` may call, sorted by name, as model
    /// requests carry them; the schemas are shared, not copied.
    pub fn definitions_for<'a>(
        &'a self,
        profile: &'a Profile,
    ) -> impl Iterator<Item = ToolDefinition> + 'a {
        self.allowed(profile).map(|(plugin, t)| ToolDefinition {
            name: plugin.tools[t].name.clone(),
            description: plugin.tools[t].description.clone(),
            input_schema: plugin.schemas[t].clone(),
        })
    }

    /// Runs `tool` with JSON `arguments` under `access`.
    pub async fn call(
        &self,
        access: &ToolAccess,
        tool: &str,
        arguments: &str,
    ) -> Result<String, ToolCallError> {
        self.call_measured(access, tool, arguments).await.result
    }

    /// [`ToolRegistry::call`], with what the call used (the fuel its guest burned,
    /// the size of what it returned): what an agent reports for each call.
    pub async fn call_measured(
        &self,
        access: &ToolAccess,
        tool: &str,
        arguments: &str,
    ) -> Measured {
        let profile = &access.profile;
        let Some(&(p, t)) = self.index.get(tool).filter(|_| profile.tools.allows(tool)) else {
            return Measured::refused(ToolCallError::UnknownTool {
                tool: tool.to_string(),
                profile: profile.name.clone(),
                available: self
                    .tools_for(profile)
                    .map(|(spec, _)| spec.name.clone())
                    .collect(),
            });
        };
        let arguments_object = match serde_json::from_str::<serde_json::Value>(arguments) {
            Ok(serde_json::Value::Object(object)) => object,
            Ok(_) => {
                return Measured::refused(ToolCallError::InvalidInput {
                    tool: tool.into(),
                    message: "arguments must be a JSON object".into(),
                })
            }
            Err(e) => {
                return Measured::refused(ToolCallError::InvalidInput {
                    tool: tool.into(),
                    message: format!("arguments are not valid JSON: {e}"),
                })
            }
        };
        let plugin = &self.plugins[p];
        let source = plugin.sources[t];
        let request = ToolRequest {
            tool,
            arguments,
            plugin: &plugin.name,
            profile: &profile.name,
            capabilities: &profile.capabilities,
            scratch: access.scratch_dir(),
        };
        match &plugin.kind {
            PluginKind::Wit { pre, names } => {
                let pre = match pre {
                    WitCode::Ready(pre) => pre,
                    WitCode::Deferred(code) => match code.get().await {
                        Ok(pre) => pre,
                        Err(reason) => {
                            return Measured::refused(ToolCallError::Host {
                                tool: tool.into(),
                                source: anyhow::anyhow!("{reason}"),
                            })
                        }
                    },
                };
                self.sandbox.call_as(pre, &names[source], request).await
            }
            PluginKind::Typed(typed) => {
                typed
                    .call(&self.sandbox, source, &arguments_object, request)
                    .await
            }
        }
    }
}
