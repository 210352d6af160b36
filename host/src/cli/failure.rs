//! Why a command failed, which decides the exit code, from the library's error
//! kinds.

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

/// [`Host::load`], its error sorted by kind.
pub(super) async fn load(config: Config) -> Result<Host, Failure> {
    Ok(Host::load(config).await?)
}

/// A configuration error (exit 2) or a failure (exit 1), by the library's kind.
impl From<crate::host::Error> for Failure {
    fn from(error: crate::host::Error) -> Failure {
        match error {
            crate::host::Error::Config(error) => Failure::Config(error),
            crate::host::Error::Model(error) => Failure::Model(error),
            other => Failure::Run(other.into()),
        }
    }
}
