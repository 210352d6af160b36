//! Loading a [`Host`] with parts supplied in code: a model provider for a
//! `provider = "custom"` model (or in place of any configured one), and a backend
//! that runs sub-agents somewhere other than this process.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::error::Error;
use crate::config::Config;
use crate::jobs::Backend;
use crate::llm::Provider;

/// What the embedding program supplies beside the configuration.
#[derive(Default)]
pub(crate) struct Supplied {
    /// Providers by `[models]` name.
    pub(crate) providers: BTreeMap<String, Arc<dyn Provider>>,
    /// Where children run instead of this process.
    pub(crate) backend: Option<Arc<dyn Backend>>,
}

/// Builds a [`Host`] from a [`Config`] and parts made by the embedding program.
///
/// ```no_run
/// # async fn example(config: warren::Config, mine: std::sync::Arc<dyn warren::Provider>) -> Result<(), warren::Error> {
/// let host = warren::Host::builder(config).provider("mine", mine).load().await?;
/// # Ok(())
/// # }
/// ```
pub struct HostBuilder {
    pub(super) config: Config,
    pub(super) supplied: Supplied,
}

impl HostBuilder {
    pub(super) fn new(config: Config) -> HostBuilder {
        HostBuilder {
            config,
            supplied: Supplied::default(),
        }
    }

    /// Answers model `model` (a `[models]` name) with `provider` instead of
    /// connecting it: required for a `provider = "custom"` model, allowed for any.
    pub fn provider(mut self, model: &str, provider: Arc<dyn Provider>) -> HostBuilder {
        self.supplied.providers.insert(model.to_string(), provider);
        self
    }

    /// Runs every sub-agent through `backend` (as `[queue] redis` runs them on
    /// workers): it gets each child's narrowed spec and returns its outcome. Refused
    /// beside `[queue] redis`.
    pub fn backend(mut self, backend: Arc<dyn Backend>) -> HostBuilder {
        self.supplied.backend = Some(backend);
        self
    }

    /// The configuration and the parts, once they fit each other: a provider only
    /// for a model the configuration defines, a backend only without `[queue] redis`.
    pub(super) fn checked(self) -> Result<(Config, Supplied), Error> {
        for model in self.supplied.providers.keys() {
            if !self.config.models.contains_key(model) {
                return Err(Error::Config(crate::config::ConfigError::UnknownModel {
                    path: self.config.path.clone(),
                    name: model.clone(),
                    available: self.config.models.keys().cloned().collect(),
                }));
            }
        }
        if self.supplied.backend.is_some() && self.config.queue.redis.is_some() {
            return Err(Error::Queue(anyhow::anyhow!(
                "a backend was supplied and {} sets [queue] redis: sub-agents can go to only one",
                self.config.path.display()
            )));
        }
        Ok((self.config, self.supplied))
    }
}
