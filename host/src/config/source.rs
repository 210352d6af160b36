//! The config file being read: its path, text and directory, to resolve relative
//! paths against and to turn a value's span into the line an error names.

use std::path::Path;

use toml::Spanned;

use super::error::ConfigError;

/// The file being read, for everything resolved after parsing (paths, files, names
/// across tables), so errors still name the file, line and key.
pub(super) struct Source<'a> {
    /// The config file.
    pub(super) path: &'a Path,
    /// Its text, for the line of a span.
    pub(super) text: &'a str,
    /// Its directory: relative paths are resolved against it.
    pub(super) base: &'a Path,
}

impl Source<'_> {
    /// An error at the line of `span`, for `key`.
    pub(super) fn invalid<T>(
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

    /// `AGENTS.md` and `ENVIRONMENT.md` beside the config, when present: read once, and
    /// a file that exists but cannot be read is an error.
    pub(super) fn default_bootstrap(&self) -> Result<Vec<String>, ConfigError> {
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

    /// The text of `file`, relative to the config file; an error at its line for `key`.
    pub(super) fn read_file(
        &self,
        file: &Spanned<String>,
        key: &str,
    ) -> Result<String, ConfigError> {
        let path = self.base.join(file.get_ref());
        std::fs::read_to_string(&path).or_else(|e| {
            self.invalid(
                file.span(),
                key,
                format!("cannot read {}: {e}", path.display()),
            )
        })
    }
}
