//! What can go wrong when a [`Host`](super::Host) is loaded or starts a run, by kind:
//! a caller tells a bad configuration from a failure without reading messages.

use crate::config::ConfigError;
use crate::llm::LlmError;

/// Why loading a host, or starting, resuming or replaying a run, failed.
///
/// Its `Display` is the whole chain of causes on one line, as `warren` prints it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is wrong, or the call asked for something it does not
    /// define (a profile, a model). The `warren` binary exits with 2.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A configured model cannot be used as written: its base URL, headers, timeouts
    /// or key variable, or a `provider = "custom"` model no provider was supplied for.
    /// The `warren` binary exits with 2.
    #[error(transparent)]
    Model(LlmError),
    /// A plugin could not be read, compiled or offered to a profile.
    #[error("{0:#}")]
    Plugin(anyhow::Error),
    /// The Redis queue could not be reached or used, or a backend was supplied
    /// beside `[queue] redis`.
    #[error("{0:#}")]
    Queue(anyhow::Error),
    /// A run's journal could not be created, found, read, locked or continued (the
    /// run finished, another process holds it, its configuration changed).
    #[error("{0:#}")]
    Journal(anyhow::Error),
    /// The run could not start: its root has no model, its scratch directory could
    /// not be made, the sandbox's engine could not be created.
    #[error("{0:#}")]
    Run(anyhow::Error),
}

impl Error {
    /// Whether the caller's input is at fault (a configuration, profile or model
    /// that is wrong or missing) rather than the work.
    pub fn is_config(&self) -> bool {
        matches!(self, Error::Config(_) | Error::Model(_))
    }

    /// `error` from loading a model: a configuration error as [`Error::Model`].
    pub(crate) fn model(error: LlmError) -> Error {
        match error {
            error @ LlmError::Config { .. } => Error::Model(error),
            other => Error::Run(other.into()),
        }
    }
}
