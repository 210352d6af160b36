//! `[models.NAME]` in `warren.toml`: which wire format a model speaks and how to
//! reach it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::chat::Price;

/// Which wire format a model speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub(crate) enum ProviderKind {
    /// OpenAI Chat Completions, and every server speaking it (Ollama, vLLM, …).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Replays a script file (offline demos and tests).
    Scripted,
    /// Supplied in code by the program that embeds warren
    /// (`HostBuilder::provider`); the `warren` binary has none.
    Custom,
}

/// `[models.NAME]` in `warren.toml`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelConfig {
    /// The wire format.
    pub provider: ProviderKind,
    /// API root, e.g. `https://api.openai.com/v1` (the default per provider).
    pub base_url: Option<String>,
    /// The model name the API expects.
    #[serde(default)]
    pub model: String,
    /// Environment variable holding the API key (default `OPENAI_API_KEY` or
    /// `ANTHROPIC_API_KEY`; with the default, a missing variable means no key, for
    /// local servers).
    pub api_key_env: Option<String>,
    /// Extra request headers (e.g. OpenRouter's `HTTP-Referer`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Prices, for cost accounting (default: free).
    #[serde(default)]
    pub price: Price,
    /// Output token limit per call (required by Anthropic; default 4096).
    pub max_tokens: Option<u32>,
    /// Stream responses (default true).
    #[serde(default = "yes")]
    pub stream: bool,
    /// Seconds to wait for a connection (default 10).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_s: f64,
    /// Seconds to wait for response headers or the next chunk (default 120).
    #[serde(default = "default_read_timeout")]
    pub read_timeout_s: f64,
    /// Retries on 429, 5xx and connection errors (default 3).
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// First backoff delay in milliseconds, doubled per retry, with jitter (default 500).
    #[serde(default = "default_retry_base")]
    pub retry_base_ms: u64,
    /// Longest response read, in MiB of body as sent (SSE framing included; default
    /// 64, at most 4096): a server that sends more gets a `malformed_response` error, so a
    /// broken or hostile one cannot make warren hold unbounded memory.
    #[serde(default = "default_max_response_mib")]
    pub max_response_mib: u32,
    /// The script file of a scripted model (relative to the config file).
    pub script: Option<PathBuf>,
}

impl ModelConfig {
    /// The environment variable holding the API key: `api_key_env`, else the
    /// provider's default (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`); a scripted model
    /// has none.
    pub(crate) fn key_variable(&self) -> Option<&str> {
        self.api_key_env.as_deref().or(match self.provider {
            ProviderKind::Openai => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Scripted | ProviderKind::Custom => None,
        })
    }
}

/// `stream` unless set.
pub(crate) const DEFAULT_STREAM: bool = true;
/// `connect_timeout_s` unless set.
pub(crate) const DEFAULT_CONNECT_TIMEOUT_S: f64 = 10.0;
/// `read_timeout_s` unless set.
pub(crate) const DEFAULT_READ_TIMEOUT_S: f64 = 120.0;
/// `max_retries` unless set.
pub(crate) const DEFAULT_MAX_RETRIES: u32 = 3;
/// `retry_base_ms` unless set.
pub(crate) const DEFAULT_RETRY_BASE_MS: u64 = 500;
/// `max_response_mib` unless set.
pub(crate) const DEFAULT_MAX_RESPONSE_MIB: u32 = 64;
/// The largest `max_response_mib`.
pub(crate) const MAX_RESPONSE_MIB: u32 = 4096;

fn yes() -> bool {
    DEFAULT_STREAM
}
fn default_connect_timeout() -> f64 {
    DEFAULT_CONNECT_TIMEOUT_S
}
fn default_read_timeout() -> f64 {
    DEFAULT_READ_TIMEOUT_S
}
fn default_retries() -> u32 {
    DEFAULT_MAX_RETRIES
}
fn default_retry_base() -> u64 {
    DEFAULT_RETRY_BASE_MS
}
fn default_max_response_mib() -> u32 {
    DEFAULT_MAX_RESPONSE_MIB
}
