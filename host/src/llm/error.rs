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
    /// A 3xx not followed: to another origin (the request carries the API key and
    /// the whole conversation), or one that would drop the body; not retried.
    #[error(
        "{provider} answered HTTP {status} with a redirect to {location}; model calls follow only 307 and 308 redirects within the same origin (the request carries the API key and the conversation): {remedy}"
    )]
    Redirected {
        /// Provider name.
        provider: &'static str,
        /// HTTP status.
        status: u16,
        /// The `Location` without query, fragment or user info, in backquotes, or a
        /// phrase saying there was none.
        location: String,
        /// What to set `base_url` to.
        remedy: String,
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
    /// The body broke off (connection reset, incomplete chunked encoding, read
    /// timeout) before the response was complete. Retried like a connection error.
    #[error(
        "{provider}: the response was cut at byte {offset}: {detail} (after {retries} retries)"
    )]
    Truncated {
        /// Provider name.
        provider: &'static str,
        /// Bytes received.
        offset: usize,
        /// How it broke off.
        detail: String,
        /// Retries made before giving up.
        retries: u32,
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
    /// Whether a new attempt may succeed: rate limits, overload and server errors
    /// reported inside a stream, and bodies cut by the transport.
    pub(crate) fn retryable_after_start(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. } | LlmError::Server { .. } | LlmError::Truncated { .. }
        )
    }

    /// This error as the `retries`-th retry reports it.
    pub(crate) fn with_retries(mut self, count: u32) -> Self {
        match &mut self {
            LlmError::RateLimited { retries, .. }
            | LlmError::Server { retries, .. }
            | LlmError::Truncated { retries, .. }
            | LlmError::Connection { retries, .. } => *retries = count,
            _ => {}
        }
        self
    }

    /// The typed error for an error object a provider sent inside a successful
    /// (HTTP 200) stream or body: `{"type": …, "code": …, "message": …}` as OpenAI,
    /// Anthropic, Groq and OpenRouter send it. Rate limits, overload and server
    /// errors keep their code and are retried.
    pub(crate) fn in_stream(
        provider: &'static str,
        model: &str,
        error: &serde_json::Value,
    ) -> LlmError {
        let text = |key: &str| error[key].as_str().unwrap_or_default().to_ascii_lowercase();
        let (kind, code, message) = (
            text("type"),
            text("code"),
            error["message"].as_str().unwrap_or_default(),
        );
        let numeric = in_stream_status(error, &code);
        let excerpt = in_stream_excerpt(&kind, &code, message);
        let says = |words: &[&str]| words.iter().any(|w| kind.contains(w) || code.contains(w));
        let model = model.to_string();
        match numeric {
            Some(429) => LlmError::RateLimited {
                provider,
                model,
                retries: 0,
                excerpt,
            },
            Some(status @ 500..=599) => LlmError::Server {
                provider,
                status: status as u16,
                retries: 0,
                excerpt,
            },
            _ if says(&["rate_limit", "rate limit", "too_many_requests"]) => {
                LlmError::RateLimited {
                    provider,
                    model,
                    retries: 0,
                    excerpt,
                }
            }
            _ if says(&["overloaded"]) => LlmError::Server {
                provider,
                status: 529,
                retries: 0,
                excerpt,
            },
            _ if says(&[
                "server_error",
                "api_error",
                "internal",
                "unavailable",
                "timeout",
            ]) =>
            {
                LlmError::Server {
                    provider,
                    status: 500,
                    retries: 0,
                    excerpt,
                }
            }
            _ if says(&["context_length", "context length"])
                || message.to_ascii_lowercase().contains("context length") =>
            {
                LlmError::ContextTooLong {
                    provider,
                    model,
                    excerpt,
                }
            }
            Some(status @ 400..=499) => LlmError::BadRequest {
                provider,
                status: status as u16,
                excerpt,
            },
            _ => LlmError::BadRequest {
                provider,
                status: 400,
                excerpt,
            },
        }
    }

    /// Whether this is a server refusing the `response_format` parameter (a 400
    /// naming it): the request can be sent again without it.
    pub(crate) fn rejects_response_format(&self) -> bool {
        matches!(self, LlmError::BadRequest { status: 400, excerpt, .. } if excerpt.contains("response_format"))
    }

    /// A short, stable name for the kind of failure (for traces).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            LlmError::Config { .. } => "config",
            LlmError::Auth { .. } => "auth",
            LlmError::UnknownModel { .. } => "unknown_model",
            LlmError::ContextTooLong { .. } => "context_too_long",
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::BadRequest { .. } => "bad_request",
            LlmError::Redirected { .. } => "redirected",
            LlmError::Server { .. } => "server_error",
            LlmError::Connection { .. } => "connection",
            LlmError::Malformed { .. } => "malformed_response",
            LlmError::Truncated { .. } => "truncated_response",
            LlmError::ScriptExhausted { .. } => "script_exhausted",
        }
    }
}

/// Longest body excerpt quoted in an error.
const EXCERPT_BYTES: usize = 400;

/// The start of a response body, for error messages.
pub(crate) fn excerpt(body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.len() <= EXCERPT_BYTES {
        return trimmed.to_string();
    }
    format!(
        "{}…",
        &trimmed[..trimmed.floor_char_boundary(EXCERPT_BYTES)]
    )
}

/// The HTTP status an in-stream error carries: its numeric `code` or `status`, or a
/// `code` written as a number.
fn in_stream_status(error: &serde_json::Value, code: &str) -> Option<u64> {
    error["code"]
        .as_u64()
        .or_else(|| error["status"].as_u64())
        .or_else(|| code.parse().ok())
}

/// The excerpt of an in-stream error: its type and code (when it has them and they
/// differ), then its message.
fn in_stream_excerpt(kind: &str, code: &str, message: &str) -> String {
    excerpt(&format!(
        "in-stream error{}{}: {message}",
        if kind.is_empty() {
            String::new()
        } else {
            format!(" {kind}")
        },
        if code.is_empty() || code == kind {
            String::new()
        } else {
            format!(" ({code})")
        },
    ))
}
