//! A configuration made in code ([`ConfigBuilder`]): the keys of `warren.toml`, set
//! one by one and checked exactly as the file is, by the same parser, so every
//! default, bound and error is the file's.

use std::path::{Path, PathBuf};

use super::error::ConfigError;

/// What a configuration built in code calls itself in errors (`NAME:LINE: key: …`)
/// and where its relative paths resolve: a `warren.toml` that is not on disk.
const BUILT_IN_CODE: &str = "warren.toml (built in code)";

/// Builds a [`Config`] in code, key by key, with the names and values `warren.toml`
/// takes (see docs/configuration.md).
///
/// ```
/// let config = warren::Config::builder(".")
///     .model("mine", "custom", "")
///     .set("defaults.max_turns", 4)
///     .profile("reader", "Read what you are asked to.", &["read_file"])
///     .build()?;
/// assert_eq!(config.profile("reader")?.limits.max_turns, 4);
/// # Ok::<(), warren::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ConfigBuilder {
    /// Where relative paths resolve, as the directory of a `warren.toml`.
    dir: PathBuf,
    /// The keys set so far, as the file would hold them.
    table: toml::Table,
}

impl ConfigBuilder {
    pub(super) fn new(dir: PathBuf) -> ConfigBuilder {
        ConfigBuilder {
            dir,
            table: toml::Table::new(),
        }
    }

    /// Sets `key`, a dotted path as written in `warren.toml` (`defaults.max_turns`,
    /// `profiles.reader.capabilities.memory_mb`), to `value`. A name holding a dot
    /// needs [`ConfigBuilder::set_path`].
    pub fn set(self, key: &str, value: impl Into<toml::Value>) -> ConfigBuilder {
        let path: Vec<&str> = key.split('.').collect();
        self.set_path(&path, value)
    }

    /// Sets the key at `path` (`["models", "gpt-4.1", "model"]`) to `value`,
    /// replacing what was there.
    pub fn set_path(mut self, path: &[&str], value: impl Into<toml::Value>) -> ConfigBuilder {
        let Some((last, tables)) = path.split_last() else {
            return self;
        };
        let mut table = &mut self.table;
        for name in tables {
            let entry = table
                .entry(name.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if !entry.is_table() {
                *entry = toml::Value::Table(toml::Table::new());
            }
            table = entry.as_table_mut().expect("made a table above");
        }
        table.insert(last.to_string(), value.into());
        self
    }

    /// Adds model `name` (`[models.NAME]`): `provider` is `openai`, `anthropic`,
    /// `scripted` or `custom` (answered by a provider given to
    /// `HostBuilder::provider`); `model` is the name its API expects (empty for a
    /// custom model). Further keys go through [`ConfigBuilder::set_path`].
    pub fn model(self, name: &str, provider: &str, model: &str) -> ConfigBuilder {
        let built = self.set_path(&["models", name, "provider"], provider);
        match model.is_empty() {
            true => built,
            false => built.set_path(&["models", name, "model"], model),
        }
    }

    /// Adds profile `name` (`[profiles.NAME]`) with its system prompt and tools
    /// (names or patterns, as `tools` takes them). Further keys (`capabilities`,
    /// limits, `model`) go through [`ConfigBuilder::set_path`].
    pub fn profile(self, name: &str, system_prompt: &str, tools: &[&str]) -> ConfigBuilder {
        let tools: Vec<toml::Value> = tools.iter().map(|&tool| tool.into()).collect();
        self.set_path(&["profiles", name, "system_prompt"], system_prompt)
            .set_path(&["profiles", name, "tools"], tools)
    }

    /// The file it stands for (in `dir`, the name errors give) and its text.
    pub(super) fn file(&self) -> Result<(PathBuf, String), ConfigError> {
        let path = Path::new(&self.dir).join(BUILT_IN_CODE);
        match toml::to_string(&self.table) {
            Ok(text) => Ok((path, text)),
            Err(error) => Err(ConfigError::Parse {
                path,
                message: error.to_string(),
            }),
        }
    }
}

/// `error` from parsing `text`, naming the key: the file's error shows the offending
/// line, and code has no such line.
pub(super) fn naming_the_key(text: &str, error: ConfigError) -> ConfigError {
    match error {
        ConfigError::Parse { path, message } => match key_in_error(text, &message) {
            Some(key) => ConfigError::Parse {
                path,
                message: format!("{key}: {message}"),
            },
            None => ConfigError::Parse { path, message },
        },
        other => other,
    }
}

/// The dotted key on the line a TOML error points at (`… at line N, column C`) in
/// `text`, as `toml::to_string` writes a table: `[a.b]` headers, then `key = value`.
fn key_in_error(text: &str, message: &str) -> Option<String> {
    let at = message.split("at line ").nth(1)?;
    let line: usize = at
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let mut table = String::new();
    for (number, row) in text.lines().enumerate() {
        let row = row.trim();
        if row.starts_with('[') {
            table = row.trim_matches(|c| c == '[' || c == ']').to_string();
        }
        if number + 1 == line {
            let key = row.split('=').next()?.trim();
            return Some(match (table.is_empty(), row.starts_with('[')) {
                (_, true) => table,
                (true, false) => key.to_string(),
                (false, false) => format!("{table}.{key}"),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_built_config_is_the_parsed_file() {
        let dir = tempfile::tempdir().unwrap();
        let text = "[models.m]\nprovider = \"openai\"\nmodel = \"gpt\"\n\
                    [defaults]\nmax_turns = 4\nmax_depth = 2\n\
                    [profiles.reader]\nsystem_prompt = \"Read.\"\ntools = [\"read_file\"]\n";
        let parsed = Config::parse(&dir.path().join(BUILT_IN_CODE), text).unwrap();
        let built = Config::builder(dir.path())
            .model("m", "openai", "gpt")
            .set("defaults.max_turns", 4)
            .set("defaults.max_depth", 2)
            .profile("reader", "Read.", &["read_file"])
            .build()
            .unwrap();
        assert_eq!(format!("{built:?}"), format!("{parsed:?}"));
    }

    #[test]
    fn a_bad_key_or_value_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        // The error of a config built with `key` set to `value`.
        let refusal = |key: &str, value: toml::Value| {
            Config::builder(dir.path())
                .set(key, value)
                .build()
                .unwrap_err()
                .to_string()
        };
        let error = refusal("defaults.max_turn", 4.into());
        assert!(
            error.contains("built in code") && error.contains("max_turn"),
            "{error}"
        );
        let error = refusal("profiles.a.capabilities.memory_mb", 0.into());
        assert!(
            error.contains("profiles.a.capabilities.memory_mb") && error.contains("between 1 and"),
            "{error}"
        );
        let error = refusal("defaults.model", "nope".into());
        assert!(error.contains("nope"), "{error}");
    }
}
