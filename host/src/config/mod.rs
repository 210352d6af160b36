//! `warren.toml`: plugins, defaults and profiles, parsed strictly.
//!
//! Unknown keys and bad values are rejected with the file, line and key. Values are
//! validated while they are deserialised (so the TOML error points at them); checks
//! that need the file system (a granted directory exists) run afterwards and report
//! the line from the value's span. Host paths are relative to the config file.

mod agent_dir;
mod agent_files;
mod plugin_tables;
mod queue;
mod tool_selection;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use crate::llm::{ModelConfig, ProviderKind};
use crate::policy::call_limits::in_bounds;
use crate::policy::capabilities::{capability_keys, KnownKey};
use crate::policy::{
    CapabilitySet, EnvGrant, FsGrant, FsMode, NetPattern, NetPolicy, PartialCallLimits,
    SCRATCH_GUEST_PATH,
};

pub use self::agent_dir::{AgentFilesReport, SkippedFile};
pub use self::plugin_tables::PluginTable;
pub use self::queue::QueueConfig;
pub use self::tool_selection::glob_match as tool_pattern_matches;
use self::tool_selection::{resolve, ListKind};
pub use self::tool_selection::{ToolAliases, ToolSelection, SPAWN_TOOLS};

/// Name of the profile used when none is given.
pub const DEFAULT_PROFILE: &str = "main";

/// A configuration that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// There is no config file at the path: most often warren was started outside a
    /// project, so the message says how to make one or name another.
    #[error("cannot read {}: no such file; `warren init` creates a project in this directory, `--config PATH` uses another config file", path.display())]
    NotFound {
        /// The config file.
        path: PathBuf,
    },
    /// The file exists but could not be read.
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

/// Load-time bounds on what plugins may offer (`[plugins]`): a plugin past one is
/// refused at load, naming it, so no model request carries an unbounded tool list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginLimits {
    /// Tools one plugin may offer (`max_tools`, default 256).
    pub max_tools: usize,
    /// Bytes of one tool's description (`max_description_kb`, default 16 KiB).
    pub max_description_bytes: usize,
    /// Bytes of one tool's input schema (`max_schema_kb`, default 64 KiB).
    pub max_schema_bytes: usize,
    /// Bytes of all tool definitions one profile sees (`max_profile_tools_kb`,
    /// default 1 MiB): what every model request of its agents carries.
    pub max_profile_bytes: usize,
}

impl Default for PluginLimits {
    fn default() -> Self {
        PluginLimits {
            max_tools: 256,
            max_description_bytes: 16 * 1024,
            max_schema_bytes: 64 * 1024,
            max_profile_bytes: 1024 * 1024,
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
    /// The most turns a spawn may give an agent of this profile: its
    /// `max_turns_ceiling`, else `[defaults] max_turns_ceiling`, else its own
    /// `max_turns`. Spawns may raise `max_turns` up to it.
    pub max_turns_ceiling: u32,
    /// `model: inherit` (agent files): a sub-agent takes its parent's model.
    pub inherit_model: bool,
    /// Where it was defined.
    pub source: ProfileSource,
    /// What a user should know about the definition: tools with no sandboxed
    /// equivalent, a model name that means nothing here, keys with no meaning.
    pub notes: Vec<ProfileNote>,
}

impl Profile {
    /// The limits of an agent of this profile spawned with `asked` limits: turns up to
    /// [`Profile::max_turns_ceiling`], time and cost only ever lower. The one rule for
    /// spawns, in-process and on workers alike.
    pub fn spawn_limits(&self, asked: &AgentLimits) -> AgentLimits {
        AgentLimits {
            max_turns: asked
                .max_turns
                .min(self.max_turns_ceiling.max(self.limits.max_turns)),
            timeout_s: asked.timeout_s.min(self.limits.timeout_s),
            max_cost_usd: match (asked.max_cost_usd, self.limits.max_cost_usd) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }
}

/// Where a profile was defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileSource {
    /// `[profiles.NAME]` in `warren.toml` (or the implicit `main`).
    Config,
    /// An agent file; `written_name` is its `name` when that had to be changed into a
    /// valid profile name (or was missing).
    AgentFile {
        /// The file.
        path: PathBuf,
        /// The `name` as written, when it differs from the profile name.
        written_name: Option<String>,
    },
}

/// Something about a profile's definition worth telling the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileNote {
    /// Tool names with no sandboxed equivalent (warned once per process when an agent
    /// of the profile starts).
    UnavailableTools(Vec<String>),
    /// A model name that is neither a `[models]` nor a `[model_aliases]` name; the
    /// default model is used instead (warned like unavailable tools).
    UnknownModel {
        /// As written.
        written: String,
        /// What is used instead.
        used: Option<String>,
    },
    /// Agent-file keys warren gives no meaning to (`color`, `hooks`, …).
    IgnoredKeys(Vec<String>),
    /// The front matter was not valid YAML and was read leniently.
    Lenient(String),
    /// `permissionMode: plan`: every file grant read-only, no write tools.
    PlanMode,
}

impl ProfileNote {
    /// Whether an agent starting under the profile should log this as a warning.
    pub fn warns(&self) -> bool {
        matches!(
            self,
            ProfileNote::UnavailableTools(_) | ProfileNote::UnknownModel { .. }
        )
    }
}

impl fmt::Display for ProfileNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileNote::UnavailableTools(names) => write!(
                f,
                "tools with no sandboxed equivalent, not available: {}",
                names.join(", ")
            ),
            ProfileNote::UnknownModel { written, used } => write!(
                f,
                "model `{written}` is not under [models] or [model_aliases]; using {}",
                used.as_deref()
                    .map_or("no model".to_string(), |m| format!("`{m}`"))
            ),
            ProfileNote::IgnoredKeys(keys) => {
                write!(
                    f,
                    "keys with no meaning in warren, ignored: {}",
                    keys.join(", ")
                )
            }
            ProfileNote::Lenient(why) => write!(
                f,
                "front matter is not valid YAML ({why}); read with each key's text taken as written"
            ),
            ProfileNote::PlanMode => {
                f.write_str("permissionMode: plan: every file grant read-only, no write tools")
            }
        }
    }
}

/// The per-user compile cache: `$XDG_CACHE_HOME/warren/components` or
/// `~/.cache/warren/components` (`None` when neither variable is set).
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .map(|base| base.join("warren").join("components"))
}

/// A loaded, validated `warren.toml`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// The plugin files to load, in order.
    pub plugin_files: Vec<PathBuf>,
    /// Where compiled plugins are cached (`None`: caching is off).
    pub cache_dir: Option<PathBuf>,
    /// What one plugin and one profile's tool list may hold.
    pub plugin_limits: PluginLimits,
    /// `[plugins.NAME]` tables by plugin name (`wit` paths resolved).
    pub plugin_tables: BTreeMap<String, PluginTable>,
    /// The built-in plugins to load (`[plugins] builtins`; default all of them).
    pub builtins: Vec<String>,
    /// Models by name (`[models.NAME]`), script paths resolved.
    pub models: BTreeMap<String, ModelConfig>,
    /// Profiles by name.
    pub profiles: BTreeMap<String, Profile>,
    /// Limits of every run.
    pub run_limits: RunLimits,
    /// `[queue]`: where sub-agent jobs go (in-process unless `redis` is set).
    pub queue: QueueConfig,
    /// Agent files that were skipped or are not agent files.
    pub agent_files: AgentFilesReport,
    /// The implicit profile used when the file defines none.
    implicit: Profile,
}

impl Config {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| {
            let path = path.to_path_buf();
            if source.kind() == std::io::ErrorKind::NotFound {
                ConfigError::NotFound { path }
            } else {
                ConfigError::Read { path, source }
            }
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
        let cache_dir = match (&raw.plugins.cache, &raw.plugins.cache_dir) {
            (Some(false), _) => None,
            (_, Some(dir)) => Some(base.join(dir.get_ref())),
            _ => default_cache_dir(),
        };
        let models = cx.models(&raw.models)?;
        let model_aliases = cx.model_aliases(&raw.model_aliases, &models)?;
        let default_capabilities =
            cx.capabilities(&raw.defaults.capabilities, None, "defaults.capabilities")?;
        let defaults = &raw.defaults;
        let default_model = match &defaults.model {
            Some(model) => Some(cx.model_name(model, &models, &model_aliases, "defaults.model")?),
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
        let default_bootstrap = cx.default_bootstrap()?;
        let max_turns_ceiling = defaults.max_turns_ceiling.map(|v| v.0 as u32);
        let tool_aliases = cx.tool_aliases(&raw.tool_aliases);
        let mut profiles = BTreeMap::new();
        for (name, raw_profile) in &raw.profiles {
            let profile = cx.profile(
                &name.0,
                raw_profile,
                ProfileDefaults {
                    raw_capabilities: &raw.defaults.capabilities,
                    max_turns_ceiling,
                    bootstrap: &default_bootstrap,
                    model: &default_model,
                    limits: &default_limits,
                    models: &models,
                    model_aliases: &model_aliases,
                    tool_aliases: &tool_aliases,
                },
            )?;
            profiles.insert(name.0.clone(), profile);
        }
        let agent_files = agent_dir::load(
            &base,
            path,
            &mut profiles,
            &agent_dir::AgentDefaults {
                capabilities: &default_capabilities,
                max_turns_ceiling,
                model: &default_model,
                limits: &default_limits,
                models: &models,
                model_aliases: &model_aliases,
                tool_aliases: &tool_aliases,
            },
        );
        let implicit = Profile {
            name: DEFAULT_PROFILE.to_string(),
            description: None,
            tools: ToolSelection::all(),
            capabilities: default_capabilities.clone(),
            system_prompt: join_prompt(&default_bootstrap),
            model: default_model,
            max_turns_ceiling: turns_ceiling(None, max_turns_ceiling, default_limits.max_turns),
            limits: default_limits,
            inherit_model: false,
            source: ProfileSource::Config,
            notes: Vec::new(),
        };
        let plugin_limits = {
            let d = PluginLimits::default();
            let kb = |v: Option<Bounded<1, 1_048_576>>, default: usize| {
                v.map_or(default, |v| v.0 as usize * 1024)
            };
            PluginLimits {
                max_tools: raw.plugins.max_tools.map_or(d.max_tools, |v| v.0 as usize),
                max_description_bytes: kb(raw.plugins.max_description_kb, d.max_description_bytes),
                max_schema_bytes: kb(raw.plugins.max_schema_kb, d.max_schema_bytes),
                max_profile_bytes: kb(raw.plugins.max_profile_tools_kb, d.max_profile_bytes),
            }
        };
        let builtins = cx.builtins(&raw.plugins.builtins)?;
        let mut plugin_tables = raw.plugins.tables.0;
        for table in plugin_tables.values_mut() {
            table.wit = table.wit.take().map(|wit| base.join(wit));
        }
        let default_profile_at = raw
            .queue
            .as_ref()
            .and_then(|q| q.default_profile.as_ref())
            .map(Spanned::span);
        let config = Config {
            path: path.to_path_buf(),
            plugin_files,
            cache_dir,
            plugin_limits,
            plugin_tables,
            builtins,
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
                        default_profile: q.default_profile.map(|p| p.into_inner().0),
                        fail_jobs_on: q.fail_jobs_on.map_or(d.fail_jobs_on, |states| {
                            states.into_iter().map(|s| s.0).collect()
                        }),
                        keep_failed_s: q.keep_failed_s.map(|v| v.0),
                    }
                })
                .unwrap_or_default(),
            agent_files,
            implicit,
        };
        // Checked against the loaded profiles by the one lookup jobs use (the implicit
        // `main` included), not at the first job.
        if let (Some(at), Some(name)) = (default_profile_at, &config.queue.default_profile) {
            if config.find_profile(name).is_none() {
                return cx.invalid(
                    at,
                    "queue.default_profile",
                    format!(
                        "no profile `{name}` (defined: {})",
                        config.profile_names().join(", ")
                    ),
                );
            }
        }
        Ok(config)
    }

    /// The profile called `name`. Unless the configuration defines its own, `main`
    /// is an implicit profile with every tool and the `[defaults]` capabilities (the
    /// root's profile by default: `[profiles]` and agent files are for sub-agents and
    /// need not define it).
    pub fn profile(&self, name: &str) -> Result<Profile, ConfigError> {
        self.find_profile(name)
            .cloned()
            .ok_or_else(|| ConfigError::UnknownProfile {
                path: self.path.clone(),
                name: name.to_string(),
                available: self.profile_names(),
            })
    }

    /// The profile called `name`, borrowed (for each spawn and queue job, which
    /// narrow a copy of it anyway), with the same implicit `main` as [`Config::profile`].
    pub(crate) fn find_profile(&self, name: &str) -> Option<&Profile> {
        self.profiles
            .get(name)
            .or_else(|| (name == DEFAULT_PROFILE).then_some(&self.implicit))
    }

    /// Every profile name, the implicit `main` included.
    pub fn profile_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.profiles.keys().cloned().collect();
        if !self.profiles.contains_key(DEFAULT_PROFILE) {
            names.insert(0, DEFAULT_PROFILE.to_string());
        }
        names
    }

    /// Every profile, the implicit `main` included (first, when it is implicit).
    pub fn all_profiles(&self) -> Vec<Profile> {
        let implicit =
            (!self.profiles.contains_key(DEFAULT_PROFILE)).then(|| self.implicit.clone());
        implicit
            .into_iter()
            .chain(self.profiles.values().cloned())
            .collect()
    }
}

/// What a `[profiles]` table inherits.
struct ProfileDefaults<'a> {
    raw_capabilities: &'a RawCapabilities,
    /// `[defaults] max_turns_ceiling`, when set.
    max_turns_ceiling: Option<u32>,
    bootstrap: &'a [String],
    model: &'a Option<String>,
    limits: &'a AgentLimits,
    models: &'a BTreeMap<String, ModelConfig>,
    model_aliases: &'a BTreeMap<String, String>,
    tool_aliases: &'a ToolAliases,
}

/// The most turns a spawn may give an agent of a profile: the profile's own
/// `max_turns_ceiling`, else `[defaults] max_turns_ceiling`, else its `max_turns`; never
/// below its `max_turns`. The one rule for `[profiles]`, agent files and the implicit
/// `main`.
fn turns_ceiling(own: Option<u32>, defaults: Option<u32>, max_turns: u32) -> u32 {
    own.or(defaults).unwrap_or(max_turns).max(max_turns)
}

/// Prompt parts trimmed, empty ones dropped, joined by blank lines.
fn join_prompt(parts: &[String]) -> String {
    parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
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

    fn models(
        &self,
        raw: &BTreeMap<ProfileName, Spanned<ModelConfig>>,
    ) -> Result<BTreeMap<String, ModelConfig>, ConfigError> {
        let mut models = BTreeMap::new();
        for (name, model) in raw {
            let key = format!("models.{}", name.0);
            let mut config = model.get_ref().clone();
            if config.provider != ProviderKind::Scripted && config.model.is_empty() {
                return self.invalid(
                    model.span(),
                    &key,
                    "`model` is required (the name the API expects)".into(),
                );
            }
            if config.provider == ProviderKind::Scripted {
                let Some(script) = &config.script else {
                    return self.invalid(
                        model.span(),
                        &key,
                        "a scripted model needs `script = \"file.toml\"`".into(),
                    );
                };
                config.script = Some(self.base.join(script));
            }
            models.insert(name.0.clone(), config);
        }
        Ok(models)
    }

    /// `[plugins] builtins`: which built-in plugins load.
    fn builtins(&self, raw: &Option<Spanned<RawBuiltins>>) -> Result<Vec<String>, ConfigError> {
        let all = || crate::builtin::names().map(str::to_string).collect();
        match raw.as_ref().map(|r| (r.get_ref(), r.span())) {
            None | Some((RawBuiltins::All(true), _)) => Ok(all()),
            Some((RawBuiltins::All(false), _)) => Ok(Vec::new()),
            Some((RawBuiltins::Some(names), span)) => {
                if let Some(bad) = names
                    .iter()
                    .find(|n| !crate::builtin::names().any(|b| b == n.as_str()))
                {
                    return self.invalid(
                        span,
                        "plugins.builtins",
                        format!(
                            "no built-in plugin `{bad}` (built-in: {})",
                            crate::builtin::names().collect::<Vec<_>>().join(", ")
                        ),
                    );
                }
                Ok(names.clone())
            }
        }
    }

    /// `[model_aliases]`: each value must name a `[models]` entry.
    fn model_aliases(
        &self,
        raw: &BTreeMap<String, Spanned<String>>,
        models: &BTreeMap<String, ModelConfig>,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let mut aliases = BTreeMap::new();
        for (alias, target) in raw {
            let name = self.model_name(
                target,
                models,
                &BTreeMap::new(),
                &format!("model_aliases.{alias}"),
            )?;
            aliases.insert(alias.clone(), name);
        }
        Ok(aliases)
    }

    /// `[tool_aliases]`, each value one name or a list.
    fn tool_aliases(&self, raw: &BTreeMap<String, RawToolAlias>) -> ToolAliases {
        raw.iter()
            .map(|(alias, tools)| {
                let tools = match tools {
                    RawToolAlias::One(tool) => vec![tool.0.clone()],
                    RawToolAlias::Many(tools) => tools.iter().map(|t| t.0.clone()).collect(),
                };
                (alias.clone(), tools)
            })
            .collect()
    }

    /// A `[models]` name, or a `[model_aliases]` name for one.
    fn model_name(
        &self,
        name: &Spanned<String>,
        models: &BTreeMap<String, ModelConfig>,
        aliases: &BTreeMap<String, String>,
        key: &str,
    ) -> Result<String, ConfigError> {
        if models.contains_key(name.get_ref()) {
            return Ok(name.get_ref().clone());
        }
        if let Some(target) = aliases.get(name.get_ref()) {
            return Ok(target.clone());
        }
        let known = models.keys().cloned().collect::<Vec<_>>().join(", ");
        self.invalid(
            name.span(),
            key,
            format!(
                "no model `{}` under [models] or [model_aliases] (models: {known})",
                name.get_ref()
            ),
        )
    }

    /// `AGENTS.md` and `ENVIRONMENT.md` beside the config, when present: read once, and
    /// a file that exists but cannot be read is an error.
    fn default_bootstrap(&self) -> Result<Vec<String>, ConfigError> {
        let mut texts = Vec::new();
        for name in ["AGENTS.md", "ENVIRONMENT.md"] {
            let path = self.base.join(name);
            match std::fs::read_to_string(&path) {
                Ok(text) => texts.push(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(ConfigError::Read { path, source }),
            }
        }
        Ok(texts)
    }

    /// One `[profiles.NAME]` table.
    fn profile(
        &self,
        name: &str,
        raw: &RawProfile,
        defaults: ProfileDefaults<'_>,
    ) -> Result<Profile, ConfigError> {
        let key = format!("profiles.{name}");
        let capabilities = self.capabilities(
            &raw.capabilities,
            Some(defaults.raw_capabilities),
            &format!("{key}.capabilities"),
        )?;
        let mut notes = Vec::new();
        let patterns = |list: &Option<Vec<ToolPattern>>| -> Vec<String> {
            list.iter().flatten().map(|t| t.0.clone()).collect()
        };
        let allow = match &raw.tools {
            Some(_) => {
                let resolved = resolve(
                    &patterns(&raw.tools),
                    defaults.tool_aliases,
                    ListKind::Allow,
                );
                if !resolved.unavailable.is_empty() {
                    notes.push(ProfileNote::UnavailableTools(resolved.unavailable));
                }
                resolved.patterns
            }
            None => vec!["*".to_string()],
        };
        let deny = resolve(
            &patterns(&raw.disallowed_tools),
            defaults.tool_aliases,
            ListKind::Deny,
        )
        .patterns;
        let mut prompt = Vec::new();
        match &raw.bootstrap_files {
            Some(files) => {
                for file in files {
                    prompt.push(self.read_file(file, &format!("{key}.bootstrap_files"))?);
                }
            }
            None => prompt.extend(defaults.bootstrap.iter().cloned()),
        }
        if let Some(file) = &raw.system_prompt_file {
            prompt.push(self.read_file(file, &format!("{key}.system_prompt_file"))?);
        }
        prompt.extend(raw.system_prompt.clone());
        let model = match &raw.model {
            Some(model) => Some(self.model_name(
                model,
                defaults.models,
                defaults.model_aliases,
                &format!("{key}.model"),
            )?),
            None => defaults.model.clone(),
        };
        let max_turns = raw
            .max_turns
            .map_or(defaults.limits.max_turns, |v| v.0 as u32);
        Ok(Profile {
            name: name.to_string(),
            description: raw.description.clone(),
            tools: ToolSelection::new(allow, deny, true),
            capabilities,
            system_prompt: join_prompt(&prompt),
            model,
            limits: AgentLimits {
                max_turns,
                timeout_s: raw.timeout_s.map_or(defaults.limits.timeout_s, |v| v.0),
                max_cost_usd: raw.max_cost_usd.map(|v| v.0),
            },
            max_turns_ceiling: turns_ceiling(
                raw.max_turns_ceiling.map(|v| v.0 as u32),
                defaults.max_turns_ceiling,
                max_turns,
            ),
            inherit_model: false,
            source: ProfileSource::Config,
            notes,
        })
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
        let below = defaults.map(|d| d.limits).unwrap_or_default();
        Ok(CapabilitySet {
            fs,
            scratch,
            env,
            net: Arc::new(net),
            limits: raw.limits.over(&below).or_defaults(),
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
    /// More tool names (e.g. other systems' names) for warren tools.
    #[serde(default)]
    tool_aliases: BTreeMap<String, RawToolAlias>,
    /// Model names used by agent files (`sonnet`, `opus`, …) for `[models]` names.
    #[serde(default)]
    model_aliases: BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "true, false, or a list of built-in plugin names"
)]
enum RawBuiltins {
    All(bool),
    Some(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged, expecting = "a tool name or a list of tool names")]
enum RawToolAlias {
    One(ToolPattern),
    Many(Vec<ToolPattern>),
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
    default_profile: Option<Spanned<ProfileName>>,
    fail_jobs_on: Option<Vec<StateName>>,
    keep_failed_s: Option<Bounded<1, 31_536_000>>,
}

/// An agent end state by name (`error`, `timed_out`, `truncated`, …).
#[derive(Clone, Copy, Deserialize)]
#[serde(try_from = "String")]
struct StateName(crate::outcome::AgentState);

impl TryFrom<String> for StateName {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        crate::outcome::AgentState::from_name(&value)
            .map(StateName)
            .ok_or_else(|| {
                let names: Vec<&str> = crate::outcome::AgentState::ALL
                    .iter()
                    .map(|s| s.as_str())
                    .collect();
                format!("`{value}` is not an agent state ({})", names.join(", "))
            })
    }
}

/// `[plugins]`. Its known keys first; any other key is a `[plugins.NAME]` table (serde
/// cannot deny unknown fields beside a flattened map, so a misspelt key is reported by
/// `PluginTables`, naming it).
#[derive(Default, Deserialize)]
struct RawPlugins {
    /// Directory whose `*.wasm` files are loaded (default `plugins`, optional).
    dir: Option<Spanned<String>>,
    /// Further plugin files.
    files: Option<Vec<Spanned<String>>>,
    /// Where compiled plugins are cached (default `~/.cache/warren/components`).
    cache_dir: Option<Spanned<String>>,
    /// `false` turns the compile cache off.
    cache: Option<bool>,
    /// Built-in plugins: `true` (default), `false`, or a list of names.
    builtins: Option<Spanned<RawBuiltins>>,
    /// Tools one plugin may offer.
    max_tools: Option<Bounded<1, 100_000>>,
    /// KiB of one tool's description.
    max_description_kb: Option<Bounded<1, 1_048_576>>,
    /// KiB of one tool's input schema.
    max_schema_kb: Option<Bounded<1, 1_048_576>>,
    /// KiB of all tool definitions one profile sees.
    max_profile_tools_kb: Option<Bounded<1, 1_048_576>>,
    /// `[plugins.NAME]`: how one plugin's tools are offered.
    #[serde(flatten)]
    tables: plugin_tables::PluginTables,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    model: Option<Spanned<String>>,
    max_turns: Option<Bounded<1, 1000>>,
    max_turns_ceiling: Option<Bounded<1, 1000>>,
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
    max_turns_ceiling: Option<Bounded<1, 1000>>,
    timeout_s: Option<Bounded<1, 86_400>>,
    max_cost_usd: Option<Dollars>,
    tools: Option<Vec<ToolPattern>>,
    disallowed_tools: Option<Vec<ToolPattern>>,
    #[serde(default)]
    capabilities: RawCapabilities,
}

/// A `capabilities` table: the grants, then the limits (read by the policy's table,
/// each checked against its bounds at its line). Unknown keys are refused.
#[derive(Default)]
struct RawCapabilities {
    fs: Option<Vec<RawFsGrant>>,
    scratch: Option<bool>,
    env: Option<Vec<RawEnvGrant>>,
    net: Option<Vec<NetPatternValue>>,
    limits: PartialCallLimits,
}

impl<'de> Deserialize<'de> for RawCapabilities {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Reads the table's keys one by one.
        struct Table;
        impl<'de> serde::de::Visitor<'de> for Table {
            type Value = RawCapabilities;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a capabilities table")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawCapabilities, A::Error> {
                let mut raw = RawCapabilities::default();
                while let Some(key) = map.next_key_seed(KnownKey(capability_keys()))? {
                    match key {
                        "fs" => raw.fs = Some(map.next_value()?),
                        "scratch" => raw.scratch = Some(map.next_value()?),
                        "env" => raw.env = Some(map.next_value()?),
                        "net" => raw.net = Some(map.next_value()?),
                        limit => raw.limits.read(limit, &mut map, true)?,
                    }
                }
                Ok(raw)
            }
        }
        deserializer.deserialize_struct("RawCapabilities", capability_keys(), Table)
    }
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
        in_bounds(value, MIN, MAX).map(Bounded)
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

/// A valid profile name made from one written elsewhere (an agent file's `name` or file
/// name): every run of characters other than ASCII letters, digits, `_` and `-` becomes
/// one `-`, `-` at either end is dropped, and the result is cut to 64 characters
/// (`code.reviewer` → `code-reviewer`, `Code Reviewer` → `Code-Reviewer`). `None` when
/// nothing is left.
pub(crate) fn profile_name_from(written: &str) -> Option<String> {
    let mut name = String::new();
    for c in written.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name: String = name.trim_matches('-').chars().take(64).collect();
    let name = name.trim_end_matches('-').to_string();
    (!name.is_empty()).then_some(name)
}

/// The one name rule: profile, tool and queue names are 1 to 64 ASCII letters,
/// digits, `_` and `-`.
pub fn is_valid_name(s: &str) -> bool {
    name_chars(s, false)
}

/// A tool name that may also hold `*` wildcards.
pub fn is_valid_pattern(s: &str) -> bool {
    name_chars(s, true)
}

fn name_chars(s: &str, allow_star: bool) -> bool {
    (1..=64).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || (allow_star && c == '*'))
}

fn name_like(s: &str, what: &str, allow_star: bool) -> Result<(), String> {
    if name_chars(s, allow_star) {
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
        assert_eq!(reader.capabilities.limits.memory_mb, 32);
        assert!(reader.capabilities.net.patterns().is_empty());
        assert_eq!(reader.capabilities.fs[0].mode, FsMode::ReadOnly);
        assert_eq!(
            reader.capabilities.limits.fuel,
            crate::policy::CallLimits::default().fuel
        );
        assert!(reader.tools.allows("read_file") && !reader.tools.allows("write_file"));
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let cases = [
            ("[profiles.a]\nbogus = 1\n", "line 2", "unknown field `bogus`"),
            ("[profiles.a.capabilities]\nmemory_mb = 0\n", "line 2", "must be between 1 and 4096"),
            ("[defaults.capabilities]\nscratch = true\nmax_handles = 8\n", "line 3", "must be between 16 and 65536, got 8"),
            ("[profiles.a.capabilities]\nnet = []\ngpus = 1\n", "line 3", "unknown field `gpus`, expected one of `fs`, `scratch`, `env`, `net`, `fuel`"),
            ("[profiles.a.capabilities]\nfuel = \"lots\"\n", "line 2", "expected i64"),
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
        assert_eq!(reviewer.capabilities.limits.memory_mb, 16);
        assert!(reviewer.tools.allows("read_file") && !reviewer.tools.allows("write_file"));
        // A file whose name is taken is skipped, naming the config; the rest loads.
        std::fs::write(dir.path().join("agents/main.md"), "---\nname: main\n---\n").unwrap();
        let config = Config::parse(&path, "[profiles.main]\n").unwrap();
        assert!(config.profiles.contains_key("reviewer"));
        let skipped = &config.agent_files.skipped;
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].path.ends_with("agents/main.md"));
        assert_eq!(
            skipped[0].reason,
            format!("profile `main` is already defined by {}", path.display())
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
        assert!(
            error.contains("no profile `c` (defined: main, a, b)"),
            "{error}"
        );
        let empty = parse("").unwrap();
        assert!(empty.profile("main").unwrap().tools.allows("anything"));
    }
}
