//! What a model call can fail with. Messages never contain API keys: request headers
//! are never part of an error, and body excerpts come from the server's response.

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The model is misconfigured (missing key variable, bad URL, unreadable script).
    #[error("model `{model}`: {message}")]
    Config {
        /// The model's name in the config.
        model: String,
        /// What is wrong.
        message: String,
    },
    /// 401 or 403: the key is missing, wrong or lacks access.
    #[error("{provider} rejected the API key (HTTP {status}) for model `{model}`: {excerpt}")]
    Auth {
        /// Provider name.
        provider: &'static str,
        /// The model requested.
        model: String,
        /// HTTP status.
        status: u16,
        /// Start of the server's answer.
        excerpt: String,
    },
    /// 404, or a 400 naming the model: the server does not know it.
    #[error("{provider} does not know model `{model}` (HTTP {status}): {excerpt}")]
    UnknownModel {
        /// Provider name.
        provider: &'static str,
        /// The model requested.
        model: String,
        /// HTTP status.
        status: u16,
        /// Start of the server's answer.
        excerpt: String,
    },
    /// The conversation is longer than the model's context window.
    #[error("{provider}: the conversation is too long for model `{model}`: {excerpt}")]
    ContextTooLong {
        /// Provider name.
        provider: &'static str,
        /// The model requested.
        model: String,
        /// Start of the server's answer.
        excerpt: String,
    },
    /// Still rate limited (429) after every retry.
    #[error("{provider} rate limited model `{model}` after {retries} retries: {excerpt}")]
    RateLimited {
        /// Provider name.
        provider: &'static str,
        /// The model requested.
        model: String,
        /// Retries made.
        retries: u32,
        /// Start of the last answer.
        excerpt: String,
    },
    /// Another 4xx: the request itself is wrong; not retried.
    #[error("{provider} refused the request (HTTP {status}): {excerpt}")]
    BadRequest {
        /// Provider name.
        provider: &'static str,
        /// HTTP status.
        status: u16,
        /// Start of the server's answer.
        excerpt: String,
    },
    /// 5xx after every retry, or an error event in the stream.
    #[error("{provider} server error (HTTP {status}) after {retries} retries: {excerpt}")]
    Server {
        /// Provider name.
        provider: &'static str,
        /// HTTP status (0 for an error event inside a stream).
        status: u16,
        /// Retries made.
        retries: u32,
        /// Start of the server's answer.
        excerpt: String,
    },
    /// No connection, or no answer in time, after every retry.
    #[error("{provider}: {what} after {retries} retries")]
    Connection {
        /// Provider name.
        provider: &'static str,
        /// What went wrong (connect failure, timeout), without the URL's secrets.
        what: String,
        /// Retries made.
        retries: u32,
    },
    /// The response did not parse: bad JSON, or a stream cut short.
    #[error("{provider}: malformed response at byte {offset}: {detail}")]
    Malformed {
        /// Provider name.
        provider: &'static str,
        /// Byte position in the response body.
        offset: usize,
        /// What was wrong, with the offending bytes.
        detail: String,
    },
    /// A scripted model has no turn left for this requester.
    #[error("scripted model `{model}` ({script}) has no turn left for profile `{profile}`")]
    ScriptExhausted {
        /// The model's name.
        model: String,
        /// The script file.
        script: String,
        /// Who asked.
        profile: String,
    },
}

impl LlmError {
    /// A short, stable name for the kind of failure (for traces).
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::Config { .. } => "config",
            LlmError::Auth { .. } => "auth",
            LlmError::UnknownModel { .. } => "unknown_model",
            LlmError::ContextTooLong { .. } => "context_too_long",
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::BadRequest { .. } => "bad_request",
            LlmError::Server { .. } => "server_error",
            LlmError::Connection { .. } => "connection",
            LlmError::Malformed { .. } => "malformed_response",
            LlmError::ScriptExhausted { .. } => "script_exhausted",
        }
    }
}
