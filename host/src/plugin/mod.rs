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

pub(crate) mod cache;
mod checks;
pub(crate) mod componentize;
pub(crate) mod deferred;
pub(crate) mod hints;
pub(crate) mod overrides;
pub(crate) mod typed;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use tracing::info;

pub(crate) use self::cache::{CacheOutcome, CompileCache};
pub(crate) use self::deferred::recorded_tools;
use self::deferred::DeferredCode;
use self::typed::{TypedComponent, TypedOptions};
use crate::config::{Config, PluginLimits, PluginTable, Profile, ToolHints};
use crate::llm::ToolDefinition;
use crate::sandbox::{Measured, Prepared, Sandbox, ToolCallError, ToolRequest, ToolSpec};

/// One loaded plugin file.
pub(crate) struct Plugin {
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
    hints: Vec<ToolHints>,
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

/// A plugin's code as loaded: its kind, the tools it lists itself, how the compile
/// cache served it (none for a deferred built-in) and its SHA-256.
type Loaded = (PluginKind, Vec<ToolSpec>, Option<CacheOutcome>, String);

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
    pub(crate) fn is_typed(&self) -> bool {
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

impl ToolRegistry {
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
    pub(crate) async fn for_serving(
        sandbox: Arc<Sandbox>,
        config: &Config,
    ) -> anyhow::Result<Self> {
        Self::load_config(sandbox, config, true).await
    }

    async fn load_config(
        sandbox: Arc<Sandbox>,
        config: &Config,
        defer_builtins: bool,
    ) -> anyhow::Result<Self> {
        let registry = Self::load_with(
            sandbox,
            &config.plugin_files,
            &config.builtins,
            &CompileCache::at(config.cache_dir.clone()),
            &config.plugin_limits,
            &config.plugin_tables,
            defer_builtins,
        )
        .await?;
        // An interpreter some profile names starts compiling now, in the background,
        // so its first call (a first run compiles it for seconds) waits less or not at all.
        for plugin in &registry.plugins {
            if let PluginKind::Wit {
                pre: WitCode::Deferred(code),
                ..
            } = &plugin.kind
            {
                let named =
                    |tool: &ToolSpec| config.each_profile().any(|p| p.tools.allows(&tool.name));
                if plugin.tools.iter().any(named) {
                    code.start();
                }
            }
        }
        Ok(registry)
    }

    /// Loads the built-in plugins named in `builtins`, then `files` in order, each
    /// offered as its `[plugins.NAME]` table in `tables` says. A file that is not a
    /// component (or a typed one warren cannot offer), a bad tool name or schema, a
    /// host tool's name, a tool list past `limits`, a table naming a plugin or tool
    /// that is not there, or two plugins offering the same tool is an error naming the
    /// file(s). A file with the very bytes of a built-in replaces it. With
    /// `defer_builtins` (a server that lists its tools at once, see
    /// [`ToolRegistry::for_serving`]) the built-ins are offered from their recorded
    /// tool lists and compiled in the background.
    pub(crate) async fn load_with(
        sandbox: Arc<Sandbox>,
        files: &[PathBuf],
        builtins: &[String],
        cache: &CompileCache,
        limits: &PluginLimits,
        tables: &BTreeMap<String, PluginTable>,
        defer_builtins: bool,
    ) -> anyhow::Result<Self> {
        let sources = checks::sources(files, builtins, tables)?;
        let no_table = PluginTable::default();
        let mut registry = ToolRegistry {
            sandbox,
            plugins: Vec::new(),
            index: BTreeMap::new(),
        };
        let mut deferred = Vec::new();
        for mut source in sources {
            let started = Instant::now();
            let table = tables.get(&source.name).unwrap_or(&no_table);
            // The interpreters compile on their first call, whatever the caller.
            let on_first_call = crate::builtin::ON_FIRST_CALL.contains(&source.name.as_str());
            let recorded = match &source.bytes {
                Cow::Borrowed(embedded) if defer_builtins || on_first_call => {
                    recorded_tools(&source.name).map(|tools| (*embedded, tools))
                }
                _ => None,
            };
            let loaded = match recorded {
                Some((embedded, tools)) => {
                    let (loaded, code) =
                        Self::defer(&registry.sandbox, cache, &source.name, embedded, tools);
                    if !on_first_call {
                        deferred.push(code);
                    }
                    loaded
                }
                None => {
                    let (kind, own, outcome, sha256) = Self::compile(
                        &registry.sandbox,
                        cache,
                        limits,
                        table,
                        &source.name,
                        &source.path,
                        std::mem::take(&mut source.bytes),
                    )
                    .await?;
                    (kind, own, Some(outcome), sha256)
                }
            };
            registry.admit(&source, table, limits, loaded, started)?;
        }
        // Only once the whole registry is valid: a configuration error compiles nothing.
        for code in &deferred {
            code.start();
        }
        Ok(registry)
    }

    /// A built-in offered from the tool list recorded in the binary, its code
    /// compiled in the background once the registry is valid.
    fn defer(
        sandbox: &Arc<Sandbox>,
        cache: &CompileCache,
        name: &str,
        embedded: &'static [u8],
        tools: Vec<ToolSpec>,
    ) -> (Loaded, Arc<DeferredCode>) {
        let sha256 =
            crate::builtin::digest(name).map_or_else(|| cache::digest(embedded), str::to_string);
        let code = DeferredCode::new(
            name,
            embedded,
            sha256.clone(),
            sandbox.clone(),
            cache.clone(),
            tools.clone(),
        );
        let names = tools.iter().map(|t| t.name.clone()).collect();
        let pre = WitCode::Deferred(code.clone());
        ((PluginKind::Wit { pre, names }, tools, None, sha256), code)
    }

    /// Adds plugin `source`, `loaded`, offering its tools as `table` says: each tool
    /// checked against `limits` and against the tools already loaded.
    fn admit(
        &mut self,
        source: &checks::Source,
        table: &PluginTable,
        limits: &PluginLimits,
        (kind, own, outcome, sha256): Loaded,
        started: Instant,
    ) -> anyhow::Result<()> {
        let (name, path) = (&source.name, &source.path);
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
            schemas.push(checks::check_tool(path, spec, limits)?);
            let slot = (self.plugins.len(), position);
            if let Some((other, _)) = self.index.insert(spec.name.clone(), slot) {
                let other = &self.plugins[other];
                let holder = checks::Holder {
                    name: &other.name,
                    path: &other.path,
                    builtin: other.builtin,
                };
                let own = &own_names[sources[position]];
                return Err(checks::clash(&spec.name, &holder, name, path, own));
            }
        }
        let hints = sources
            .iter()
            .map(|&source_tool| {
                let own = &own_names[source_tool];
                hints::declared(name, source.builtin, own, table.annotate.get(own))
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
                "plugin's tools listed from the binary; its code compiles in the background or at its first call"
            ),
        }
        self.plugins.push(Plugin {
            name: name.clone(),
            path: path.clone(),
            builtin: source.builtin,
            tools,
            schemas,
            sha256,
            sources,
            kind,
            hints,
        });
        Ok(())
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
        bytes: Cow<'static, [u8]>,
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
    pub(crate) fn digests(&self) -> std::collections::BTreeMap<String, String> {
        self.plugins
            .iter()
            .map(|p| (p.name.clone(), p.sha256.clone()))
            .collect()
    }

    /// The loaded plugins, in load order.
    pub(crate) fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// Checks that the tool definitions `profile` sees (names, descriptions and
    /// schemas, as every model request of its agents carries them) fit in
    /// `limits.max_profile_bytes`.
    pub(crate) fn check_profile(
        &self,
        profile: &Profile,
        limits: &PluginLimits,
    ) -> anyhow::Result<()> {
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
    pub(crate) fn hints_for(&self, name: &str, profile: &Profile) -> Option<ToolHints> {
        let &(plugin, tool) = self.index.get(name)?;
        Some(hints::effective(
            name,
            &self.plugins[plugin].hints[tool],
            &profile.capabilities,
        ))
    }

    /// The names of every tool `profile` may call, sorted.
    pub(crate) fn names_for<'a>(&'a self, profile: &'a Profile) -> Vec<&'a str> {
        self.tools_for(profile)
            .map(|(spec, _)| spec.name.as_str())
            .collect()
    }

    /// Every loaded tool's name, sorted.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.index.keys().map(String::as_str)
    }

    /// Every tool `profile` may call, sorted by name, with the plugin offering it.
    pub(crate) fn tools_for<'a>(
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
    pub(crate) fn definitions_for<'a>(
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
