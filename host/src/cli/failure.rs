//! Why a command failed, which decides the exit code, and loading a host with a
//! model's configuration error told apart from a failure of the work.

use crate::config::{Config, ConfigError};
use crate::host::Host;

/// Why a command ended badly; decides the exit code.
#[derive(Debug, thiserror::Error)]
pub(super) enum Failure {
    /// Bad configuration or usage: exit code 2.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Bad arguments: exit code 2.
    #[error("{0}")]
    Usage(String),
    /// A configured model that cannot be used as written (its base URL, headers,
    /// timeouts or key variable): exit code 2, like any other bad configuration.
    #[error(transparent)]
    Model(crate::llm::LlmError),
    /// The work itself failed: exit code 1.
    #[error(transparent)]
    Run(#[from] anyhow::Error),
}

/// [`Host::load`], with a model's configuration error told apart from a failure.
pub(super) async fn load(config: Config) -> Result<Host, Failure> {
    model_failure(Host::load(config).await)
}

/// An LLM configuration error as [`Failure::Model`] (exit 2).
pub(super) fn model_failure(loaded: anyhow::Result<Host>) -> Result<Host, Failure> {
    loaded.map_err(|error| match error.downcast::<crate::llm::LlmError>() {
        Ok(error @ crate::llm::LlmError::Config { .. }) => Failure::Model(error),
        Ok(other) => Failure::Run(other.into()),
        Err(other) => Failure::Run(other),
    })
}
