//! LLM providers: one [`Provider`] trait over OpenAI-compatible Chat Completions,
//! the Anthropic Messages API and a scripted replay, with streaming, usage, cost and
//! retries.
//!
//! Layout: [`chat`] (the provider-neutral vocabulary: requests, messages, responses,
//! usage, streaming, the [`Provider`] trait), [`model`] (`[models.NAME]`), `error`
//! ([`LlmError`]); [`openai`], [`anthropic`] and [`scripted`] implement the trait;
//! `transport` holds the HTTP client, retries and error classification shared by the
//! two HTTP providers; [`secrets`] removes configured secrets from what they let out;
//! `sse` parses server-sent events; `tests` runs them against servers on 127.0.0.1:0.
//! This file only connects a configured model to its provider.

pub(crate) mod anthropic;
pub(crate) mod chat;
pub(crate) mod error;
pub(crate) mod http;
pub(crate) mod model;
pub(crate) mod openai;
pub(crate) mod scripted;
pub(crate) mod secrets;
pub(crate) mod sse;
#[cfg(test)]
mod tests;
mod transport;

use std::sync::Arc;

#[cfg(feature = "internals")]
use self::http::HttpApi as _;

pub(crate) use self::chat::{
    AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason, Message, Provider,
    Requester, StreamEvent, ToolCall, ToolDefinition, Usage,
};
pub(crate) use self::error::excerpt;
pub(crate) use self::error::LlmError;
pub(crate) use self::model::{ModelConfig, ProviderKind};
pub(crate) use self::secrets::Secrets;
pub(crate) use self::transport::redirect_policy;

/// Builds the provider for model `name`; `secrets` (the host's configured secrets,
/// see [`Secrets`]) never appear in what its errors and warnings say.
pub(crate) fn connect(
    name: &str,
    config: &ModelConfig,
    secrets: &Secrets,
) -> Result<Arc<dyn Provider>, LlmError> {
    Ok(match config.provider {
        ProviderKind::Openai => Arc::new(openai::OpenAi::new(name, config, secrets)?),
        ProviderKind::Anthropic => Arc::new(anthropic::Anthropic::new(name, config, secrets)?),
        ProviderKind::Scripted => Arc::new(scripted::Scripted::new(name, config)?),
        ProviderKind::Custom => {
            return Err(LlmError::Config {
                model: name.to_string(),
                message: "`provider = \"custom\"` is answered by a provider the program embedding warren supplies (`HostBuilder::provider`), and none was supplied".into(),
            })
        }
    })
}

/// What [`request_encoder`] returns: a request in, its body out.
#[cfg(feature = "internals")]
pub(crate) type RequestEncoder = Box<dyn Fn(&ChatRequest) -> bytes::Bytes>;

/// A function encoding the request body `provider` (`openai` or `anthropic`) sends
/// for a request, to a model of default settings. Not for embedders: `cargo bench
/// --bench request_bodies` times the encoding of a long history alone, which a whole
/// request (network, model) would drown; the providers themselves are the crate's.
#[cfg(feature = "internals")]
pub fn request_encoder(provider: &str) -> Result<RequestEncoder, LlmError> {
    let config: ModelConfig = toml::from_str(&format!("provider = {provider:?}\nmodel = \"m\"\n"))
        .map_err(|error| LlmError::Config {
            model: provider.to_string(),
            message: error.to_string(),
        })?;
    let secrets = Secrets::default();
    Ok(match config.provider {
        ProviderKind::Openai => {
            let openai = openai::OpenAi::new(provider, &config, &secrets)?;
            Box::new(move |request| openai.request_body(request))
        }
        ProviderKind::Anthropic => {
            let anthropic = anthropic::Anthropic::new(provider, &config, &secrets)?;
            Box::new(move |request| anthropic.request_body(request))
        }
        _ => {
            return Err(LlmError::Config {
                model: provider.to_string(),
                message: "requests are encoded by the `openai` and `anthropic` providers".into(),
            })
        }
    })
}
