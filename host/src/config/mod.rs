//! `warren.toml`: plugins, defaults and profiles, parsed strictly.
//!
//! Unknown keys and bad values are rejected with the file, line and key. Values are
//! validated while they are deserialised (so the TOML error points at them); checks
//! that need the file system (a granted directory exists) run afterwards and report
//! the line from the value's span. Host paths are relative to the config file.
//!
//! Layout: `keys` (every key's default, bounds and doc, in one table; the reference
//! is rendered from it by `reference`); `raw` (the file's shape as written) with
//! `values` (scalars checked as they are read) and `names` (the name rule); then, resolved against the file (`source`):
//! `models`, `capabilities`, `defaults` (what every profile inherits), `profile_table` (a `[profiles.NAME]` table into a
//! [`Profile`]), `agent_dir` and `agent_files` (agent files into profiles),
//! `plugins` and `plugin_tables`, `queue`; `tool_selection` maps tool names;
//! `profile`, `output_schema`, `limits` and `error` are the types they produce. This file puts them
//! together into a [`Config`].

pub(crate) mod agent_dir;
mod agent_files;
mod approval;
pub(crate) mod builder;
mod capabilities;
mod defaults;
pub(crate) mod error;
mod journal;
// The key table describes what the resolver does (it names the resolver's defaults
// and bounds); its checks and the reference's rendering are what read it.
#[cfg(test)]
mod keys;
pub(crate) mod limits; // named by path from the fuzz build's copy of agent_files.rs
mod models;
mod names;
pub(crate) mod output_schema; // named by path from the fuzz build's copy of agent_files.rs
mod plugin_tables;
mod plugins;
pub(crate) mod profile;
mod profile_table;
mod queue;
mod raw;
#[cfg(test)]
mod reference;
mod remote;
mod schema_cost;
mod secrets;
mod source;
mod text_file;
mod tool_selection;
mod values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::Spanned;

use crate::llm::ModelConfig;

pub(crate) use self::agent_dir::AgentFilesReport;
pub(crate) use self::approval::touches as approval_touches;
pub(crate) use self::approval::{AnswerPolicy, ApprovalRule};
pub(crate) use self::builder::ConfigBuilder;
use self::defaults::Inherited;
pub(crate) use self::error::ConfigError;
pub(crate) use self::limits::{AgentLimits, PluginLimits, RunLimits, MAX_DEPTH};
pub(crate) use self::names::is_valid_name;
pub(crate) use self::names::names_or_none;
pub(crate) use self::output_schema::{OutputSchema, MAX_OUTPUT_SCHEMA_BYTES};
pub(crate) use self::plugin_tables::{PluginTable, ToolHints};
pub(crate) use self::plugins::default_cache_dir;
#[cfg(test)] // the spawn tools' tests
pub(crate) use self::profile::MAX_PROFILE_DESCRIPTION_BYTES;
pub(crate) use self::profile::{Profile, ProfileNote, ProfileSource};
pub(crate) use self::queue::QueueConfig;
use self::queue::RawQueue;
use self::raw::RawConfig;
pub(crate) use self::remote::RemoteAgent;
use self::source::Source;
pub(crate) use self::text_file::read_text;
pub(crate) use self::tool_selection::glob_match as tool_pattern_matches;
pub(crate) use self::tool_selection::ASK_TOOL;
pub(crate) use self::tool_selection::NAMED_ONLY;
pub(crate) use self::tool_selection::SPAWN_TOOLS;

/// Name of the profile used when none is given.
pub(crate) const DEFAULT_PROFILE: &str = "main";

/// A loaded, validated `warren.toml`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file it came from.
    pub(crate) path: PathBuf,
    /// The plugin files to load, in order.
    pub(crate) plugin_files: Vec<PathBuf>,
    /// Where compiled plugins are cached (`None`: caching is off).
    pub(crate) cache_dir: Option<PathBuf>,
    /// What one plugin and one profile's tool list may hold.
    pub(crate) plugin_limits: PluginLimits,
    /// `[plugins.NAME]` tables by plugin name (`wit` paths resolved).
    pub(crate) plugin_tables: BTreeMap<String, PluginTable>,
    /// The built-in plugins to load (`[plugins] builtins`; default all of them).
    pub(crate) builtins: Vec<String>,
    /// Models by name (`[models.NAME]`), script paths resolved.
    pub(crate) models: BTreeMap<String, ModelConfig>,
    /// Profiles by name.
    pub(crate) profiles: BTreeMap<String, Profile>,
    /// Limits of every run.
    pub(crate) run_limits: RunLimits,
    /// `[queue]`: where sub-agent jobs go (in-process unless `redis` is set).
    pub(crate) queue: QueueConfig,
    /// Agent files that were skipped or are not agent files.
    pub(crate) agent_files: AgentFilesReport,
    /// Where runs are journaled (`[journal]`); `None`: they are not.
    pub(crate) journal_dir: Option<PathBuf>,
    /// How large one run's journal may grow, in bytes (`[journal] max_run_mib`): past
    /// it the run goes on unjournaled, and cannot be resumed.
    pub(crate) journal_max_run_bytes: u64,
    /// The implicit profile used when the file defines none.
    implicit: Profile,
}

impl Config {
    /// Every secret this configuration names (model keys and header values, the
    /// Redis password, OTLP headers), for the model providers to remove from what
    /// remote servers say.
    pub(crate) fn secrets(&self) -> crate::llm::Secrets {
        secrets::configured(&self.models, &self.queue)
    }

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
    pub(crate) fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let cx = Source {
            path,
            text,
            base: &base,
        };

        let plugin_files = plugins::files(&cx, &raw.plugins)?;
        let cache_dir = plugins::cache_dir(&base, &raw.plugins);
        let models = models::models(&cx, &raw.models)?;
        let model_aliases = models::model_aliases(&cx, &raw.model_aliases, &models)?;
        let run_limits = raw.defaults.run_limits();
        let inherited = Inherited::resolve(
            &cx,
            &raw.defaults,
            &models,
            &model_aliases,
            raw::tool_aliases(&raw.tool_aliases),
        )?;
        let mut profiles = BTreeMap::new();
        for (name, raw_profile) in &raw.profiles {
            let profile = profile_table::profile(&cx, &name.0, raw_profile, &inherited)?;
            profiles.insert(name.0.clone(), profile);
        }
        let agent_files = agent_dir::load(&base, path, &mut profiles, &inherited);
        let implicit = inherited.implicit_main(DEFAULT_PROFILE);
        let plugin_limits = plugins::limits(&raw.plugins);
        let builtins = plugins::builtins(&cx, &raw.plugins)?;
        let mut plugin_tables = raw.plugins.tables.0;
        for table in plugin_tables.values_mut() {
            table.wit = table.wit.take().map(|wit| base.join(wit));
        }
        let default_profile_at = raw
            .queue
            .as_ref()
            .and_then(|q| q.default_profile.as_ref())
            .map(Spanned::span);
        let journal = raw.journal.unwrap_or_default();
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
            queue: raw.queue.map(RawQueue::resolve).unwrap_or_default(),
            agent_files,
            journal_dir: journal.resolve(&base),
            journal_max_run_bytes: journal.max_run_bytes(),
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
    #[cfg(not(feature = "internals"))]
    pub(crate) fn profile(&self, name: &str) -> Result<Profile, ConfigError> {
        self.profile_or_error(name)
    }

    /// The profile called `name` (as the crate's own `Config::profile`), for the
    /// suite and the benches: a profile, as loaded, is not the library's API.
    #[cfg(feature = "internals")]
    pub fn profile(&self, name: &str) -> Result<Profile, ConfigError> {
        self.profile_or_error(name)
    }

    /// The profiles `[profiles]` and agent files define (not the implicit `main`),
    /// for the suite.
    #[cfg(feature = "internals")]
    pub fn defined_profiles(&self) -> &BTreeMap<String, Profile> {
        &self.profiles
    }

    /// Agent files that were skipped or are not agent files, for the suite.
    #[cfg(feature = "internals")]
    pub fn agent_files(&self) -> &AgentFilesReport {
        &self.agent_files
    }

    fn profile_or_error(&self, name: &str) -> Result<Profile, ConfigError> {
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
    pub(crate) fn profile_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.profiles.keys().cloned().collect();
        if !self.profiles.contains_key(DEFAULT_PROFILE) {
            names.insert(0, DEFAULT_PROFILE.to_string());
        }
        names
    }

    /// A configuration made in code, its relative paths (plugin directory, granted
    /// directories, the journal, agent files) resolved against `dir`, as if it were
    /// a `warren.toml` in `dir`.
    pub fn builder(dir: impl Into<PathBuf>) -> ConfigBuilder {
        ConfigBuilder::new(dir.into())
    }

    /// Every profile, the implicit `main` included (first, when it is implicit).
    pub(crate) fn all_profiles(&self) -> Vec<Profile> {
        self.each_profile().cloned().collect()
    }

    /// Every profile, borrowed, in the order of [`Config::all_profiles`].
    pub(crate) fn each_profile(&self) -> impl Iterator<Item = &Profile> {
        let implicit = (!self.profiles.contains_key(DEFAULT_PROFILE)).then_some(&self.implicit);
        implicit.into_iter().chain(self.profiles.values())
    }
}

impl ConfigBuilder {
    /// The configuration, checked as `warren.toml` is: an unknown key, a value out
    /// of bounds or a name that is not defined is an error naming the key.
    pub fn build(self) -> Result<Config, ConfigError> {
        let (path, text) = self.file()?;
        Config::parse(&path, &text).map_err(|error| builder::naming_the_key(&text, error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` parsed as a config file in a fresh directory with a `docs` folder.
    pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        Config::parse(&dir.path().join("warren.toml"), text)
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
