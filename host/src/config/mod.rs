//! `warren.toml`: plugins, defaults and profiles, parsed strictly.
//!
//! Unknown keys and bad values are rejected with the file, line and key. Values are
//! validated while they are deserialised (so the TOML error points at them); checks
//! that need the file system (a granted directory exists) run afterwards and report
//! the line from the value's span. Host paths are relative to the config file.

mod agent_files;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use crate::llm::{ModelConfig, ProviderKind};
use crate::plugin::CompileCache;
use crate::queue::QueueConfig;
use crate::sandbox::capabilities::{CapabilitySet, EnvGrant, FsGrant, FsMode, SCRATCH_GUEST_PATH};
use crate::sandbox::net::{NetPattern, NetPolicy};

/// Name of the profile used when none is given.
pub const DEFAULT_PROFILE: &str = "main";

/// A configuration that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key or a bad value (the message carries
    /// the line, column and key).
    #[error("{}: {message}", path.display())]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The parser's report.
        message: String,
    },
    /// A value parsed but is not usable.
    #[error("{}:{line}: {key}: {message}", path.display())]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// 1-based line of the value.
        line: usize,
        /// Dotted key of the value.
        key: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A model was asked for that the file does not define.
    #[error("{}: no model `{name}` (defined: {})", path.display(), names_or_none(available))]
    UnknownModel {
        /// The config file.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The names defined.
        available: Vec<String>,
    },
    /// A profile was asked for that the file does not define.
    #[error("{}: no profile `{name}` (defined: {})", path.display(), names_or_none(available))]
    UnknownProfile {
        /// The config file.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The names defined.
        available: Vec<String>,
    },
}

/// Which tools a profile may call: names, `*` wildcards, or all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSelection {
    /// Patterns such as `read_file`, `files_*` or `*`.
    patterns: Vec<String>,
}

impl ToolSelection {
    /// Every tool.
    pub fn all() -> Self {
        ToolSelection {
            patterns: vec!["*".into()],
        }
    }

    /// Exactly these tool names.
    pub fn from_names(names: Vec<String>) -> Self {
        ToolSelection { patterns: names }
    }

    /// The patterns as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether `tool` is selected.
    pub fn allows(&self, tool: &str) -> bool {
        self.patterns.iter().any(|p| glob_match(p, tool))
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((prefix, rest)) => {
            let Some(tail) = text.strip_prefix(prefix) else {
                return false;
            };
            (0..=tail.len())
                .filter(|i| tail.is_char_boundary(*i))
                .any(|i| glob_match(rest, &tail[i..]))
        }
    }
}

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

/// A named set of tools, capabilities, prompt, model and limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The key under `[profiles]`.
    pub name: String,
    /// What the profile is for, shown to a parent agent.
    pub description: Option<String>,
    /// The tools it may call.
    pub tools: ToolSelection,
    /// What those tools may touch.
    pub capabilities: CapabilitySet,
    /// Bootstrap files, then `system_prompt_file`, then `system_prompt`, joined.
    pub system_prompt: String,
    /// The `[models]` entry it uses (`None`: no model configured).
    pub model: Option<String>,
    /// Turn, time and cost limits.
    pub limits: AgentLimits,
}

/// A loaded, validated `warren.toml`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// The plugin files to load, in order.
    pub plugin_files: Vec<PathBuf>,
    /// Where compiled plugins are cached.
    pub cache: CompileCache,
    /// Models by name (`[models.NAME]`), script paths resolved.
    pub models: BTreeMap<String, ModelConfig>,
    /// Profiles by name.
    pub profiles: BTreeMap<String, Profile>,
    /// Limits of every run.
    pub run_limits: RunLimits,
    /// `[queue]`: where sub-agent jobs go (in-process unless `redis` is set).
    pub queue: QueueConfig,
    /// The implicit profile used when the file defines none.
    implicit: Profile,
}

impl Config {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(path, &text)
    }

    /// Validates `text` as if read from `path` (relative paths resolve against its
    /// directory).
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let cx = Resolver {
            path,
            text,
            base: &base,
        };

        let plugin_files = cx.plugin_files(&raw.plugins)?;
        let cache = match (&raw.plugins.cache, &raw.plugins.cache_dir) {
            (Some(false), _) => CompileCache::disabled(),
            (_, Some(dir)) => CompileCache::new(base.join(dir.get_ref())),
            _ => CompileCache::default_dir().map_or_else(CompileCache::disabled, CompileCache::new),
        };
        let mut models = BTreeMap::new();
        for (name, model) in &raw.models {
            let key = format!("models.{}", name.0);
            let mut config = model.get_ref().clone();
            if config.provider != ProviderKind::Scripted && config.model.is_empty() {
                return cx.invalid(
                    model.span(),
                    &key,
                    "`model` is required (the name the API expects)".into(),
                );
            }
            if config.provider == ProviderKind::Scripted {
                let Some(script) = &config.script else {
                    return cx.invalid(
                        model.span(),
                        &key,
                        "a scripted model needs `script = \"file.toml\"`".into(),
                    );
                };
                config.script = Some(base.join(script));
            }
            models.insert(name.0.clone(), config);
        }
        let default_capabilities =
            cx.capabilities(&raw.defaults.capabilities, None, "defaults.capabilities")?;
        let defaults = &raw.defaults;
        let default_model = match &defaults.model {
            Some(model) => Some(cx.model_name(model, &models, "defaults.model")?),
            None if models.len() == 1 => models.keys().next().cloned(),
            None => None,
        };
        let default_limits = AgentLimits {
            max_turns: defaults
                .max_turns
                .map_or(AgentLimits::default().max_turns, |v| v.0 as u32),
            timeout_s: defaults
                .timeout_s
                .map_or(AgentLimits::default().timeout_s, |v| v.0),
            max_cost_usd: None,
        };
        let run_limits = RunLimits {
            max_concurrent: defaults
                .max_concurrent
                .map_or(RunLimits::default().max_concurrent, |v| v.0 as usize),
            max_concurrent_total: defaults
                .max_concurrent_total
                .map_or(RunLimits::default().max_concurrent_total, |v| v.0 as usize),
            max_depth: defaults
                .max_depth
                .map_or(RunLimits::default().max_depth, |v| v.0 as u32),
            budget_usd: defaults.budget_usd.map(|v| v.0),
        };
        let default_bootstrap = ["AGENTS.md", "ENVIRONMENT.md"];
        let mut profiles = BTreeMap::new();
        for (name, raw_profile) in &raw.profiles {
            let key = format!("profiles.{}.capabilities", name.0);
            let capabilities = cx.capabilities(
                &raw_profile.capabilities,
                Some(&raw.defaults.capabilities),
                &key,
            )?;
            let tools = match &raw_profile.tools {
                Some(tools) => ToolSelection {
                    patterns: tools.iter().map(|t| t.0.clone()).collect(),
                },
                None => ToolSelection::all(),
            };
            let key = format!("profiles.{}", name.0);
            let mut prompt = Vec::new();
            match &raw_profile.bootstrap_files {
                Some(files) => {
                    for file in files {
                        prompt.push(cx.read_file(file, &format!("{key}.bootstrap_files"))?);
                    }
                }
                None => prompt.extend(
                    default_bootstrap
                        .iter()
                        .filter_map(|f| std::fs::read_to_string(base.join(f)).ok()),
                ),
            }
            if let Some(file) = &raw_profile.system_prompt_file {
                prompt.push(cx.read_file(file, &format!("{key}.system_prompt_file"))?);
            }
            prompt.extend(raw_profile.system_prompt.clone());
            let model = match &raw_profile.model {
                Some(model) => Some(cx.model_name(model, &models, &format!("{key}.model"))?),
                None => default_model.clone(),
            };
            let limits = AgentLimits {
                max_turns: raw_profile
                    .max_turns
                    .map_or(default_limits.max_turns, |v| v.0 as u32),
                timeout_s: raw_profile
                    .timeout_s
                    .map_or(default_limits.timeout_s, |v| v.0),
                max_cost_usd: raw_profile.max_cost_usd.map(|v| v.0),
            };
            profiles.insert(
                name.0.clone(),
                Profile {
                    name: name.0.clone(),
                    description: raw_profile.description.clone(),
                    tools,
                    capabilities,
                    system_prompt: prompt
                        .iter()
                        .map(|p| p.trim())
                        .filter(|p| !p.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n\n"),
                    model,
                    limits,
                },
            );
        }
        let agents_dir = base.join("agents");
        let mut agent_paths: Vec<PathBuf> = std::fs::read_dir(&agents_dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "md"))
                    .collect()
            })
            .unwrap_or_default();
        agent_paths.sort();
        for agent_path in agent_paths {
            let invalid = |line: usize, key: &str, message: String| ConfigError::Invalid {
                path: agent_path.clone(),
                line,
                key: key.to_string(),
                message,
            };
            let text =
                std::fs::read_to_string(&agent_path).map_err(|source| ConfigError::Read {
                    path: agent_path.clone(),
                    source,
                })?;
            let file = agent_files::parse(&agent_path, &text)
                .map_err(|(line, message)| invalid(line, "front matter", message))?;
            name_like(&file.name, "profile name", false)
                .map_err(|message| invalid(1, "name", message))?;
            if profiles.contains_key(&file.name) {
                return Err(invalid(
                    1,
                    "name",
                    format!(
                        "profile `{}` is already defined (in {} or another agent file)",
                        file.name,
                        path.display()
                    ),
                ));
            }
            let tools = match file.tools {
                Some(tools) => {
                    if let Some(bad) = tools
                        .iter()
                        .find(|t| name_like(t, "tool name", true).is_err())
                    {
                        return Err(invalid(
                            1,
                            "tools",
                            format!("`{bad}` is not a valid tool name"),
                        ));
                    }
                    ToolSelection { patterns: tools }
                }
                None => ToolSelection::all(),
            };
            // `inherit`, `sonnet` and other names warren does not define mean the default.
            let model = file
                .model
                .filter(|m| models.contains_key(m))
                .or_else(|| default_model.clone());
            profiles.insert(
                file.name.clone(),
                Profile {
                    name: file.name,
                    description: file.description,
                    tools,
                    capabilities: default_capabilities.clone(),
                    system_prompt: file.prompt,
                    model,
                    limits: AgentLimits {
                        max_turns: file.max_turns.unwrap_or(default_limits.max_turns),
                        ..default_limits
                    },
                },
            );
        }
        let implicit = Profile {
            name: DEFAULT_PROFILE.to_string(),
            description: None,
            tools: ToolSelection::all(),
            capabilities: default_capabilities.clone(),
            system_prompt: default_bootstrap
                .iter()
                .filter_map(|f| std::fs::read_to_string(base.join(f)).ok())
                .collect::<Vec<_>>()
                .join("\n\n"),
            model: default_model,
            limits: default_limits,
        };
        Ok(Config {
            path: path.to_path_buf(),
            plugin_files,
            cache,
            models,
            profiles,
            run_limits,
            queue: raw
                .queue
                .map(|q| {
                    let d = QueueConfig::default();
                    QueueConfig {
                        redis: q.redis,
                        name: q.name.map_or(d.name, |n| n.0),
                        keep_results_s: q.keep_results_s.map_or(d.keep_results_s, |v| v.0),
                        attempts: q.attempts.map_or(d.attempts, |v| v.0 as u32),
                        lock_ms: q.lock_ms.map_or(d.lock_ms, |v| v.0),
                        stalled_interval_ms: q
                            .stalled_interval_ms
                            .map_or(d.stalled_interval_ms, |v| v.0),
                        max_stalled: q.max_stalled.map_or(d.max_stalled, |v| v.0 as u32),
                        shutdown_grace_s: q.shutdown_grace_s.map_or(d.shutdown_grace_s, |v| v.0),
                        parent_timeout_s: q.parent_timeout_s.map_or(d.parent_timeout_s, |v| v.0),
                    }
                })
                .unwrap_or_default(),
            implicit,
        })
    }

    /// The profile called `name`. With no profiles defined, `main` is an implicit
    /// profile with every tool and the `[defaults]` capabilities.
    pub fn profile(&self, name: &str) -> Result<Profile, ConfigError> {
        if let Some(profile) = self.profiles.get(name) {
            return Ok(profile.clone());
        }
        if self.profiles.is_empty() && name == DEFAULT_PROFILE {
            return Ok(self.implicit.clone());
        }
        Err(ConfigError::UnknownProfile {
            path: self.path.clone(),
            name: name.to_string(),
            available: self.profiles.keys().cloned().collect(),
        })
    }
}

/// Resolves raw values that need the file system, reporting errors with lines.
struct Resolver<'a> {
    path: &'a Path,
    text: &'a str,
    base: &'a Path,
}

impl Resolver<'_> {
    fn invalid<T>(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        message: String,
    ) -> Result<T, ConfigError> {
        let line = self.text[..span.start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1;
        Err(ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line,
            key: key.to_string(),
            message,
        })
    }

    fn model_name(
        &self,
        name: &Spanned<String>,
        models: &BTreeMap<String, ModelConfig>,
        key: &str,
    ) -> Result<String, ConfigError> {
        if models.contains_key(name.get_ref()) {
            return Ok(name.get_ref().clone());
        }
        let known = models.keys().cloned().collect::<Vec<_>>().join(", ");
        self.invalid(
            name.span(),
            key,
            format!(
                "no model `{}` under [models] (defined: {known})",
                name.get_ref()
            ),
        )
    }

    fn read_file(&self, file: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let path = self.base.join(file.get_ref());
        std::fs::read_to_string(&path).or_else(|e| {
            self.invalid(
                file.span(),
                key,
                format!("cannot read {}: {e}", path.display()),
            )
        })
    }

    fn plugin_files(&self, raw: &RawPlugins) -> Result<Vec<PathBuf>, ConfigError> {
        let mut files = Vec::new();
        let dir = match &raw.dir {
            Some(dir) => Some((self.base.join(dir.get_ref()), Some(dir.span()))),
            None => Some((self.base.join("plugins"), None)),
        };
        if let Some((dir, span)) = dir {
            match std::fs::read_dir(&dir) {
                Ok(entries) => {
                    let mut found: Vec<PathBuf> = entries
                        .filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
                        .collect();
                    found.sort();
                    files.extend(found);
                }
                // The default directory is optional; one named in the file is not.
                Err(e) => {
                    if let Some(span) = span {
                        return self.invalid(
                            span,
                            "plugins.dir",
                            format!("cannot read directory {}: {e}", dir.display()),
                        );
                    }
                }
            }
        }
        for file in raw.files.iter().flatten() {
            let path = self.base.join(file.get_ref());
            if !path.is_file() {
                return self.invalid(
                    file.span(),
                    "plugins.files",
                    format!("no such file: {}", path.display()),
                );
            }
            if !files.contains(&path) {
                files.push(path);
            }
        }
        Ok(files)
    }

    fn capabilities(
        &self,
        raw: &RawCapabilities,
        defaults: Option<&RawCapabilities>,
        key: &str,
    ) -> Result<CapabilitySet, ConfigError> {
        // Each field comes from the profile, else from [defaults.capabilities], else the
        // built-in default (which grants nothing).
        macro_rules! pick {
            ($field:ident) => {
                raw.$field
                    .as_ref()
                    .or_else(|| defaults.and_then(|d| d.$field.as_ref()))
            };
        }
        let builtin = CapabilitySet::default();
        let mut fs = Vec::new();
        for (i, grant) in pick!(fs).into_iter().flatten().enumerate() {
            let host = self.base.join(grant.host.get_ref());
            let field = format!("{key}.fs[{i}].host");
            let host = match host.canonicalize() {
                Ok(host) if host.is_dir() => host,
                Ok(_) => {
                    return self.invalid(
                        grant.host.span(),
                        &field,
                        format!("{} is not a directory", host.display()),
                    )
                }
                Err(e) => {
                    return self.invalid(
                        grant.host.span(),
                        &field,
                        format!("{}: {e}", host.display()),
                    )
                }
            };
            fs.push(FsGrant {
                host,
                guest: grant.guest.0.clone(),
                mode: grant.mode,
            });
        }
        let scratch = pick!(scratch).copied().unwrap_or(builtin.scratch);
        if let Some(clash) = fs
            .iter()
            .position(|g| g.guest == SCRATCH_GUEST_PATH)
            .filter(|_| scratch)
        {
            let grant = &pick!(fs).expect("fs present")[clash];
            return self.invalid(
                grant.host.span(),
                &format!("{key}.fs[{clash}].guest"),
                format!("{SCRATCH_GUEST_PATH} is reserved for the scratch directory"),
            );
        }
        let env = pick!(env)
            .into_iter()
            .flatten()
            .map(|grant| match grant {
                RawEnvGrant::Name(name) => EnvGrant {
                    name: name.0.clone(),
                    value: None,
                },
                RawEnvGrant::Literal { name, value } => EnvGrant {
                    name: name.0.clone(),
                    value: Some(value.clone()),
                },
            })
            .collect();
        let net = NetPolicy::new(
            pick!(net)
                .into_iter()
                .flatten()
                .map(|p| p.0.clone())
                .collect(),
        );
        Ok(CapabilitySet {
            fs,
            scratch,
            env,
            net: Arc::new(net),
            fuel: pick!(fuel).map_or(builtin.fuel, |v| v.0),
            tool_timeout_ms: pick!(tool_timeout_ms).map_or(builtin.tool_timeout_ms, |v| v.0),
            memory_mb: pick!(memory_mb).map_or(builtin.memory_mb, |v| v.0),
            max_output_kb: pick!(max_output_kb).map_or(builtin.max_output_kb, |v| v.0),
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    plugins: RawPlugins,
    #[serde(default)]
    models: BTreeMap<ProfileName, Spanned<ModelConfig>>,
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    profiles: BTreeMap<ProfileName, RawProfile>,
    queue: Option<RawQueue>,
}

/// `[queue]`: sub-agent jobs through Redis (see [`crate::queue`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    redis: Option<String>,
    name: Option<QueueName>,
    keep_results_s: Option<Bounded<1, 31_536_000>>,
    attempts: Option<Bounded<1, 100>>,
    lock_ms: Option<Bounded<500, 3_600_000>>,
    stalled_interval_ms: Option<Bounded<100, 3_600_000>>,
    max_stalled: Option<Bounded<0, 100>>,
    shutdown_grace_s: Option<Bounded<0, 86_400>>,
    parent_timeout_s: Option<Bounded<2, 86_400>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlugins {
    /// Directory whose `*.wasm` files are loaded (default `plugins`, optional).
    dir: Option<Spanned<String>>,
    /// Further plugin files.
    files: Option<Vec<Spanned<String>>>,
    /// Where compiled plugins are cached (default `~/.cache/warren/components`).
    cache_dir: Option<Spanned<String>>,
    /// `false` turns the compile cache off.
    cache: Option<bool>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    model: Option<Spanned<String>>,
    max_turns: Option<Bounded<1, 1000>>,
    timeout_s: Option<Bounded<1, 86_400>>,
    max_concurrent: Option<Bounded<1, 256>>,
    max_concurrent_total: Option<Bounded<1, 4096>>,
    max_depth: Option<Bounded<0, 16>>,
    budget_usd: Option<Dollars>,
    #[serde(default)]
    capabilities: RawCapabilities,
}

/// A non-negative, finite amount of US dollars.
#[derive(Clone, Copy, Deserialize)]
#[serde(try_from = "f64")]
struct Dollars(f64);

impl TryFrom<f64> for Dollars {
    type Error = String;
    fn try_from(value: f64) -> Result<Self, String> {
        if value.is_finite() && value >= 0.0 {
            Ok(Dollars(value))
        } else {
            Err(format!(
                "must be a non-negative amount of dollars, got {value}"
            ))
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    description: Option<String>,
    system_prompt: Option<String>,
    system_prompt_file: Option<Spanned<String>>,
    bootstrap_files: Option<Vec<Spanned<String>>>,
    model: Option<Spanned<String>>,
    max_turns: Option<Bounded<1, 1000>>,
    timeout_s: Option<Bounded<1, 86_400>>,
    max_cost_usd: Option<Dollars>,
    tools: Option<Vec<ToolPattern>>,
    #[serde(default)]
    capabilities: RawCapabilities,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapabilities {
    fs: Option<Vec<RawFsGrant>>,
    scratch: Option<bool>,
    env: Option<Vec<RawEnvGrant>>,
    net: Option<Vec<NetPatternValue>>,
    fuel: Option<Bounded<1, 1_000_000_000_000>>,
    tool_timeout_ms: Option<Bounded<1, 3_600_000>>,
    memory_mb: Option<Bounded<1, { crate::sandbox::capabilities::MAX_MEMORY_MB }>>,
    max_output_kb: Option<Bounded<1, 1_048_576>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFsGrant {
    host: Spanned<String>,
    guest: GuestPath,
    #[serde(default = "read_only")]
    mode: FsMode,
}

fn read_only() -> FsMode {
    FsMode::ReadOnly
}

#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "an environment variable name, or a table { name = \"...\", value = \"...\" }"
)]
enum RawEnvGrant {
    Name(EnvName),
    Literal { name: EnvName, value: String },
}

/// An integer in `MIN..=MAX`, rejected at its line otherwise.
#[derive(Clone, Copy, Deserialize)]
#[serde(try_from = "i64")]
struct Bounded<const MIN: u64, const MAX: u64>(u64);

impl<const MIN: u64, const MAX: u64> TryFrom<i64> for Bounded<MIN, MAX> {
    type Error = String;
    fn try_from(value: i64) -> Result<Self, String> {
        u64::try_from(value)
            .ok()
            .filter(|v| (MIN..=MAX).contains(v))
            .map(Bounded)
            .ok_or_else(|| format!("must be between {MIN} and {MAX}, got {value}"))
    }
}

macro_rules! validated_string {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
        #[serde(try_from = "String")]
        struct $name(String);

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(value: String) -> Result<Self, String> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(&value).map(|()| $name(value))
            }
        }
    };
}

validated_string!(
    /// `[a-zA-Z0-9_-]{1,64}`: a profile name, also used as an enum value for models.
    ProfileName,
    |s| name_like(s, "profile name", false)
);
validated_string!(
    /// `[a-zA-Z0-9_-]{1,64}`: a queue name (BullMQ keys are `bull:NAME:…`).
    QueueName,
    |s| name_like(s, "queue name", false)
);
validated_string!(
    /// A tool name or a pattern with `*`.
    ToolPattern,
    |s| name_like(s, "tool name or pattern", true)
);
validated_string!(
    /// A POSIX-style variable name.
    EnvName,
    |s| {
        let mut chars = s.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            Ok(())
        } else {
            Err(format!("`{s}` is not a valid environment variable name"))
        }
    }
);
validated_string!(
    /// An absolute guest path without `.` or `..` components.
    GuestPath,
    |s| {
        let valid = s.starts_with('/')
            && s.len() > 1
            && s[1..].split('/').all(|part| !part.is_empty() && part != "." && part != "..");
        if valid {
            Ok(())
        } else {
            Err(format!("guest path `{s}` must be absolute, like /docs, with no empty, `.` or `..` parts"))
        }
    }
);

fn name_like(s: &str, what: &str, allow_star: bool) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || (allow_star && c == '*'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{s}` is not a valid {what} (letters, digits, `_` and `-`, at most 64)"
        ))
    }
}

/// A `capabilities.net` entry, validated at its line.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "String")]
struct NetPatternValue(NetPattern);

impl TryFrom<String> for NetPatternValue {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        value.parse().map(NetPatternValue)
    }
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `names` joined with commas, or `none`.
pub(crate) fn names_or_none<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        Config::parse(&dir.path().join("warren.toml"), text)
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("files_*", "files_read"));
        assert!(!glob_match("files_*", "http_get"));
        assert!(glob_match("*_get", "http_get"));
        assert!(glob_match("read_file", "read_file"));
        assert!(!glob_match("read_file", "read_files"));
    }

    #[test]
    fn profile_inherits_defaults_field_by_field() {
        let config = parse(
            r#"
[defaults.capabilities]
memory_mb = 32
net = ["example.com"]
[profiles.reader]
tools = ["read_file"]
[profiles.reader.capabilities]
fs = [{ host = "docs", guest = "/docs" }]
net = []
"#,
        )
        .unwrap();
        let reader = config.profile("reader").unwrap();
        assert_eq!(reader.capabilities.memory_mb, 32);
        assert!(reader.capabilities.net.patterns().is_empty());
        assert_eq!(reader.capabilities.fs[0].mode, FsMode::ReadOnly);
        assert_eq!(
            reader.capabilities.fuel,
            crate::sandbox::capabilities::DEFAULT_FUEL
        );
        assert!(reader.tools.allows("read_file") && !reader.tools.allows("write_file"));
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let cases = [
            ("[profiles.a]\nbogus = 1\n", "line 2", "unknown field `bogus`"),
            ("[profiles.a.capabilities]\nmemory_mb = 0\n", "line 2", "must be between 1 and 4096"),
            ("[profiles.a.capabilities]\nnet = [\"http://x.com\"]\n", "line 2", "without scheme"),
            ("[profiles.a.capabilities]\nfs = [{ host = \"docs\", guest = \"/d\", mode = \"rwx\" }]\n", "line 2", "unknown variant `rwx`"),
            ("[profiles.a.capabilities]\nfs = [{ host = \"docs\", guest = \"../d\" }]\n", "line 2", "must be absolute"),
            ("[profiles.a.capabilities]\nenv = [\"1BAD\"]\n", "line 2", "environment variable name"),
            ("[profiles.\"bad name\"]\n", "line 1", "not a valid profile name"),
            ("[queue]\nparent_timeout_s = 1\n", "line 2", "must be between 2 and 86400"),
            ("[queue]\nname = \"a:b\"\n", "line 2", "queue name"),
        ];
        for (text, line, message) in cases {
            let error = parse(text).unwrap_err().to_string();
            assert!(
                error.contains("warren.toml") && error.contains(line) && error.contains(message),
                "{text:?} gave: {error}"
            );
        }
        let missing =
            parse("[profiles.a.capabilities]\n\nfs = [{ host = \"nope\", guest = \"/n\" }]\n")
                .unwrap_err()
                .to_string();
        assert!(
            missing.contains("warren.toml:3: profiles.a.capabilities.fs[0].host"),
            "{missing}"
        );
    }

    #[test]
    fn models_parse_with_defaults_and_resolved_scripts() {
        let config = parse(
            r#"
[models.default]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "gpt-4o-mini"
price = { input_per_mtok = 0.15, output_per_mtok = 0.60 }
[models.offline]
provider = "scripted"
script = "demo.toml"
"#,
        )
        .unwrap();
        let default = &config.models["default"];
        assert!(default.stream && default.max_retries == 3);
        assert_eq!(default.price.output_per_mtok, 0.60);
        assert!(config.models["offline"]
            .script
            .as_ref()
            .unwrap()
            .ends_with("demo.toml"));
        assert!(config.models["offline"]
            .script
            .as_ref()
            .unwrap()
            .is_absolute());
        let error = parse("[models.x]\nprovider = \"anthropic\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(":1: models.x: `model` is required"),
            "{error}"
        );
        let error = parse("[models.x]\nprovider = \"gemini\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("line 2") && error.contains("unknown variant `gemini`"),
            "{error}"
        );
    }

    #[test]
    fn agent_files_load_as_profiles() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("agents")).unwrap();
        std::fs::write(
            dir.path().join("agents/reviewer.md"),
            "---\nname: reviewer\ndescription: Reviews\ntools: read_file\nmaxTurns: 3\n---\nReview it.\n",
        )
        .unwrap();
        let path = dir.path().join("warren.toml");
        let config = Config::parse(
            &path,
            "[defaults]\nmax_turns = 7\n[defaults.capabilities]\nmemory_mb = 16\n[profiles.main]\n",
        )
        .unwrap();
        let reviewer = config.profile("reviewer").unwrap();
        assert_eq!(reviewer.system_prompt, "Review it.");
        assert_eq!(reviewer.limits.max_turns, 3);
        assert_eq!(reviewer.capabilities.memory_mb, 16);
        assert!(reviewer.tools.allows("read_file") && !reviewer.tools.allows("write_file"));
        std::fs::write(dir.path().join("agents/main.md"), "---\nname: main\n---\n").unwrap();
        let error = Config::parse(&path, "[profiles.main]\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("main.md:1: name: profile `main` is already defined"),
            "{error}"
        );
    }

    #[test]
    fn queue_settings_default_and_parse() {
        let config = parse("").unwrap();
        assert_eq!(config.queue, QueueConfig::default());
        assert_eq!(config.queue.parent_timeout_s, 30);
        let config =
            parse("[queue]\nredis = \"redis://h:1\"\nparent_timeout_s = 5\nkeep_results_s = 60\n")
                .unwrap();
        assert_eq!(config.queue.redis.as_deref(), Some("redis://h:1"));
        assert_eq!(config.queue.parent_timeout_s, 5);
        assert_eq!(config.queue.keep_results_s, 60);
        assert_eq!(config.queue.attempts, QueueConfig::default().attempts);
    }

    #[test]
    fn unknown_profile_lists_the_defined_ones() {
        let config = parse("[profiles.a]\n[profiles.b]\n").unwrap();
        let error = config.profile("c").unwrap_err().to_string();
        assert!(error.contains("no profile `c` (defined: a, b)"), "{error}");
        let empty = parse("").unwrap();
        assert!(empty.profile("main").unwrap().tools.allows("anything"));
    }
}
