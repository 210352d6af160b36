//! What a configuration that cannot be loaded fails with: the file, and for a bad
//! value its line and dotted key.

use std::path::PathBuf;

use super::names::names_or_none;

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
