//! The config file being read: its path, text and directory, to resolve relative
//! paths against and to turn a value's span into the line an error names.

use std::path::Path;

use toml::Spanned;

use super::error::ConfigError;
use super::text_file::{read_text, MAX_PROMPT_FILE_BYTES};

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

    /// `AGENTS.md` and `ENVIRONMENT.md` beside the config, when present: read once.
    /// Found, not named, so each must resolve inside the config's directory (a cloned
    /// project must not make warren send a file from elsewhere to the model), be a
    /// regular file and hold at most [`MAX_PROMPT_FILE_BYTES`] of UTF-8; one that is
    /// not so is left out with a warning naming it and why, so a broken or hostile
    /// file cannot stop every command run beside it.
    pub(super) fn default_bootstrap(&self) -> Vec<String> {
        let inside = if self.base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            self.base
        };
        let mut texts = Vec::new();
        for name in ["AGENTS.md", "ENVIRONMENT.md"] {
            let path = self.base.join(name);
            if std::fs::symlink_metadata(&path).is_err() {
                continue;
            }
            match read_text(&path, MAX_PROMPT_FILE_BYTES, Some(inside)) {
                Ok(text) => texts.push(text),
                Err(reason) => {
                    tracing::warn!("not using {} as a bootstrap file: {reason}", path.display())
                }
            }
        }
        texts
    }

    /// The text of `file`, relative to the config file (a regular file of at most
    /// [`MAX_PROMPT_FILE_BYTES`], wherever it is: the config names it); an error at its
    /// line for `key`.
    pub(super) fn read_file(
        &self,
        file: &Spanned<String>,
        key: &str,
    ) -> Result<String, ConfigError> {
        let path = self.base.join(file.get_ref());
        read_text(&path, MAX_PROMPT_FILE_BYTES, None).or_else(|message| {
            self.invalid(
                file.span(),
                key,
                format!("cannot use {}: {message}", path.display()),
            )
        })
    }
}
