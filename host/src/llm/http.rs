//! What the two HTTP providers (OpenAI-compatible and Anthropic) share. [`Http`] is
//! a provider's transport with what of its model's config every response needs (the
//! price, whether to stream); [`HttpApi`] is the part each speaks its own way (the
//! body, reading a whole response or a stream); and the one [`Provider`] over it
//! sends, retries, picks the stream or the whole response and digests the body the
//! same way for both.

use serde_json::Value;

use super::chat::{
    AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason, Price, Provider, Usage,
};
use super::error::LlmError;
use super::model::ModelConfig;
use super::secrets::Secrets;
use super::transport::{body_digest, json_offset, malformed, Transport};

/// An HTTP provider's transport, with what of its model's config every response needs.
pub(crate) struct Http {
    /// HTTP to the endpoint, retries and error classification.
    pub(crate) transport: Transport,
    /// For cost.
    price: Price,
    /// Whether to stream.
    pub(crate) stream: bool,
}

impl Http {
    /// The transport of `provider` for model `name`'s `config`, POSTing to `endpoint`
    /// (a default base URL and a path) with `headers` (see [`Transport::new`]).
    pub(crate) fn new(
        provider: &'static str,
        name: &str,
        config: &ModelConfig,
        endpoint: (&str, &'static str),
        headers: &[(&str, String, bool)],
        secrets: &Secrets,
    ) -> Result<Http, LlmError> {
        Ok(Http {
            transport: Transport::new(provider, name, config, endpoint, headers, secrets)?,
            price: config.price,
            stream: config.stream,
        })
    }

    /// The model requested.
    pub(crate) fn model(&self) -> &str {
        &self.transport.model
    }

    /// A whole (not streamed) response's body, parsed.
    pub(crate) async fn json(&self, response: reqwest::Response) -> Result<Value, LlmError> {
        let body = self.transport.body(response).await?;
        serde_json::from_slice(&body).map_err(|e| {
            let offset = json_offset(&body, &e);
            malformed(self.transport.provider, offset, &e.to_string(), &body)
        })
    }

    /// The error `error` the API reported inside a response or a stream.
    pub(crate) fn error(&self, error: &Value) -> LlmError {
        LlmError::in_stream(self.transport.provider, &self.transport.model, error)
    }

    /// The response made of `message`, `finish` and `usage`, priced.
    pub(crate) fn priced(
        &self,
        message: AssistantMessage,
        finish: FinishReason,
        usage: Usage,
    ) -> ChatResponse {
        ChatResponse::priced(message, finish, usage, &self.price)
    }
}

/// What an HTTP provider says its own way; the [`Provider`] around it is the same.
#[async_trait::async_trait]
pub(crate) trait HttpApi: Send + Sync {
    /// Its transport and config.
    fn http(&self) -> &Http;

    /// The request body, as the API documents it, serialised once (every retry sends
    /// the same bytes) and straight from the request: a parent's history can hold
    /// thousands of messages, so no `Value` tree is built and dropped per turn.
    fn request_body(&self, request: &ChatRequest) -> bytes::Bytes;

    /// The API's error object, when a whole (not streamed) answer is one.
    fn error_in(answer: &serde_json::Value) -> Option<&serde_json::Value>;

    /// The response a whole (not streamed) answer holds.
    fn read_json(
        &self,
        answer: &serde_json::Value,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError>;

    /// Whether a typed answer is asked for as a tool call (see
    /// [`Provider::answers_by_tool`]): by an API with no structured-output parameter.
    fn typed_by_tool(&self) -> bool {
        false
    }

    /// Reads a streamed response, reporting its events as they come.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError>;
}

#[async_trait::async_trait]
impl<A: HttpApi> Provider for A {
    fn model(&self) -> &str {
        self.http().model()
    }

    fn provider_name(&self) -> &str {
        self.http().transport.provider
    }

    fn answers_by_tool(&self) -> bool {
        self.typed_by_tool()
    }

    fn request_digest(&self, request: &ChatRequest) -> Option<String> {
        Some(body_digest(&self.request_body(request)))
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let http = self.http();
        http.transport
            .exchange(self.request_body(request), |response| async move {
                if http.stream {
                    self.read_stream(response, events).await
                } else {
                    let answer = http.json(response).await?;
                    match A::error_in(&answer) {
                        Some(error) => Err(http.error(error)),
                        None => self.read_json(&answer, events),
                    }
                }
            })
            .await
    }
}
