//! HTTP for the providers: one client with connect and read timeouts, retries with
//! exponential backoff and jitter (honouring `Retry-After`) on 429, 5xx and
//! connection errors, and classification of error statuses into [`LlmError`].
//! Redirects to another origin are never followed: a request carries the API key (in
//! headers an HTTP client keeps across hosts, such as `x-api-key`) and the whole
//! conversation (see [`redirect_policy`]). The request headers (content type, API key,
//! version, the config's extras) are built and checked once per model; key values are
//! marked sensitive so they never print. An error response's body is read up to
//! [`MAX_ERROR_BODY_BYTES`] within the read timeout, and every error and warning that
//! leaves the transport has the configured secrets removed ([`Secrets::redact`]).
//! Also the helpers both HTTP providers share: reading the key, and reporting a
//! malformed body at its byte offset.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tracing::{debug, warn};

use super::error::{excerpt, LlmError};
use super::model::ModelConfig;
use super::secrets::Secrets;

/// Longest wait honoured from a `Retry-After` header.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Longest backoff between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Most bytes of an error response's body (4xx, 5xx) read, for its excerpt and its
/// classification; the rest is not read. The whole read gets one read timeout.
pub(crate) const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// A configured HTTP client for one model.
pub(crate) struct Transport {
    /// Shared connection pool.
    client: reqwest::Client,
    /// The endpoint every request goes to (`{base_url}/{path}`), parsed once.
    url: reqwest::Url,
    /// Its `path` part, e.g. `chat/completions`.
    path: &'static str,
    /// `openai` or `anthropic`, for messages.
    pub(crate) provider: &'static str,
    /// The model requested, for messages.
    pub(crate) model: String,
    /// Idle limit for the response headers and between body chunks.
    read_timeout: Duration,
    /// Most body bytes read from one response.
    max_response_bytes: usize,
    /// Retries after the first attempt.
    max_retries: u32,
    /// First backoff delay.
    retry_base: Duration,
    /// Sent with every request: content type, the provider's own (API key, version)
    /// and the config's extra headers; built and checked once, keys marked sensitive.
    headers: reqwest::header::HeaderMap,
    /// Removed from every error and warning the transport lets out: every secret the
    /// host was configured with, this model's key and header values included.
    secrets: Secrets,
}

/// What one attempt ended with.
enum Attempt {
    Done(reqwest::Response),
    Retry {
        error: LlmError,
        after: Option<Duration>,
    },
    Fail(LlmError),
}

impl Transport {
    /// A transport for model `name`'s `config` that POSTs to `{base_url}/{path}` (the base URL
    /// `default_base` when the config names none); `provider_headers` are (name, value,
    /// sensitive). `secrets` are the host's other configured secrets.
    pub(crate) fn new(
        provider: &'static str,
        name: &str,
        config: &ModelConfig,
        (default_base, path): (&str, &'static str),
        provider_headers: &[(&str, String, bool)],
        secrets: &Secrets,
    ) -> Result<Self, LlmError> {
        let invalid = |message: String| LlmError::Config {
            model: name.to_string(),
            message,
        };
        let base = config.base_url.as_deref().unwrap_or(default_base);
        let url = reqwest::Url::parse(&format!("{}/{path}", base.trim_end_matches('/')))
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
            .ok_or_else(|| {
                invalid(format!(
                    "base_url `{base}` is not an http:// or https:// URL with a host"
                ))
            })?;
        if !(config.connect_timeout_s > 0.0 && config.read_timeout_s > 0.0) {
            return Err(invalid(
                "connect_timeout_s and read_timeout_s must be positive".into(),
            ));
        }
        if !(1..=super::model::MAX_RESPONSE_MIB).contains(&config.max_response_mib) {
            return Err(invalid(format!(
                "max_response_mib must be between 1 and {}, not {}",
                super::model::MAX_RESPONSE_MIB,
                config.max_response_mib
            )));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs_f64(config.connect_timeout_s))
            .redirect(redirect_policy())
            .build()
            .map_err(|e| invalid(format!("cannot build the HTTP client: {e}")))?;
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
        let extra = config
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.clone(), false));
        let mut own_secrets = Vec::new();
        for (name, value, sensitive) in provider_headers.iter().cloned().chain(extra) {
            if sensitive || config.headers.contains_key(name) {
                own_secrets.extend(value.strip_prefix("Bearer ").map(str::to_string));
                own_secrets.push(value.clone());
            }
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("`{name}` is not a valid HTTP header name")))?;
            let mut value = reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                invalid(format!(
                    "the value of header `{name}` is not a valid HTTP header value"
                ))
            })?;
            value.set_sensitive(sensitive);
            headers.insert(name, value);
        }
        Ok(Transport {
            client,
            url,
            path,
            provider,
            model: config.model.clone(),
            read_timeout: Duration::from_secs_f64(config.read_timeout_s),
            max_response_bytes: config.max_response_mib as usize * 1024 * 1024,
            max_retries: config.max_retries,
            retry_base: Duration::from_millis(config.retry_base_ms),
            headers,
            secrets: secrets.with(own_secrets),
        })
    }

    /// POSTs the JSON `body` to the endpoint with the configured headers, retrying as
    /// configured; returns a response with a success status.
    async fn post_json(&self, body: &bytes::Bytes) -> Result<reqwest::Response, LlmError> {
        self.send(|| {
            self.client
                .post(self.url.clone())
                .headers(self.headers.clone())
                .body(body.clone())
        })
        .await
    }

    /// Sends the request `build` makes, retrying as configured; returns a response
    /// with a success status.
    async fn send(
        &self,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, LlmError> {
        let mut retries = 0;
        loop {
            let attempt = match tokio::time::timeout(self.read_timeout, build().send()).await {
                Err(_) => Attempt::Retry {
                    error: self.connection(
                        format!("no response within {:?}", self.read_timeout),
                        retries,
                    ),
                    after: None,
                },
                Ok(Err(e)) if e.is_connect() || e.is_timeout() || e.is_request() => {
                    Attempt::Retry {
                        error: self.connection(describe(&e), retries),
                        after: None,
                    }
                }
                Ok(Err(e)) => Attempt::Fail(self.connection(describe(&e), retries)),
                Ok(Ok(response)) if response.status().is_success() => Attempt::Done(response),
                Ok(Ok(response)) => self.classify(response, retries).await,
            };
            let attempt = match attempt {
                Attempt::Retry { error, after } => Attempt::Retry {
                    error: self.secrets.redact_error(error),
                    after,
                },
                Attempt::Fail(error) => Attempt::Fail(self.secrets.redact_error(error)),
                done => done,
            };
            match attempt {
                Attempt::Done(response) => return Ok(response),
                Attempt::Fail(error) => return Err(error),
                Attempt::Retry { error, .. } if retries >= self.max_retries => return Err(error),
                Attempt::Retry { error, after } => {
                    let delay = after.unwrap_or_else(|| self.backoff(retries));
                    warn!(provider = self.provider, model = %self.model, retry = retries + 1, ?delay, "retrying model call: {error}");
                    tokio::time::sleep(delay).await;
                    retries += 1;
                }
            }
        }
    }

    /// POSTs `body` to the endpoint and reads the response with `read`, the whole
    /// exchange retried by [`Transport::with_stream_retries`]: the one call path of both
    /// HTTP providers.
    pub(crate) async fn exchange<F, Fut>(
        &self,
        body: bytes::Bytes,
        read: F,
    ) -> Result<super::chat::ChatResponse, LlmError>
    where
        F: Fn(reqwest::Response) -> Fut,
        Fut: std::future::Future<Output = Result<super::chat::ChatResponse, LlmError>>,
    {
        let digest = body_digest(&body);
        let mut response = self
            .with_stream_retries(|| async {
                let response = self.post_json(&body).await?;
                Ok(read(response).await)
            })
            .await?;
        response.request_digest = Some(digest);
        Ok(response)
    }

    /// Runs `attempt` (a request, then the reading of its whole response) again while
    /// the reading fails in a way a new attempt may fix (a rate limit, overload or
    /// server error inside the stream, a cut body), with the same backoff as HTTP
    /// errors, up to `max_retries`. An outer `Err` is the request's own failure,
    /// already retried by [`Transport::post_json`], and is returned as is.
    pub(crate) async fn with_stream_retries<F, Fut>(
        &self,
        attempt: F,
    ) -> Result<super::chat::ChatResponse, LlmError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<
            Output = Result<Result<super::chat::ChatResponse, LlmError>, LlmError>,
        >,
    {
        let mut retries = 0;
        loop {
            match attempt().await?.map_err(|e| self.secrets.redact_error(e)) {
                Err(error) if error.retryable_after_start() && retries < self.max_retries => {
                    let delay = self.backoff(retries);
                    warn!(provider = self.provider, model = %self.model, retry = retries + 1, ?delay, "retrying model call: {error}");
                    tokio::time::sleep(delay).await;
                    retries += 1;
                }
                Err(error) => return Err(error.with_retries(retries)),
                Ok(response) => return Ok(response),
            }
        }
    }

    /// Reads a whole SSE body, handing every event to `on_event` as it completes
    /// (a last event without its closing blank line included, since the body ended
    /// cleanly); returns the number of bytes read.
    pub(crate) async fn read_events(
        &self,
        mut response: reqwest::Response,
        mut on_event: impl FnMut(&super::sse::SseEvent) -> Result<(), LlmError>,
    ) -> Result<usize, LlmError> {
        let mut parser = super::sse::SseParser::default();
        while let Some(chunk) = self.chunk(&mut response, parser.position()).await? {
            for event in parser.push(&chunk) {
                on_event(&event)?;
            }
        }
        for event in parser.finish() {
            on_event(&event)?;
        }
        Ok(parser.position())
    }

    /// Reads the next body chunk within the read timeout. `position` is how many bytes
    /// of the body came before it; with them, the chunk may not pass `max_response_mib`.
    pub(crate) async fn chunk(
        &self,
        response: &mut reqwest::Response,
        position: usize,
    ) -> Result<Option<bytes::Bytes>, LlmError> {
        match tokio::time::timeout(self.read_timeout, response.chunk()).await {
            Ok(Ok(Some(chunk))) if position + chunk.len() > self.max_response_bytes => {
                Err(LlmError::Malformed {
                    provider: self.provider,
                    offset: self.max_response_bytes,
                    detail: format!(
                        "the response is longer than max_response_mib ({} MiB); the rest was not read",
                        self.max_response_bytes >> 20
                    ),
                })
            }
            Ok(Ok(chunk)) => Ok(chunk),
            Ok(Err(e)) => Err(LlmError::Truncated {
                provider: self.provider,
                offset: position,
                detail: format!("the response body broke off: {}", describe(&e)),
                retries: 0,
            }),
            Err(_) => Err(LlmError::Truncated {
                provider: self.provider,
                offset: position,
                detail: format!("no data for {:?} (read timeout)", self.read_timeout),
                retries: 0,
            }),
        }
    }

    /// Reads a whole (non-streamed) body. One that arrives in one chunk, as most do,
    /// is returned without a copy.
    pub(crate) async fn body(
        &self,
        mut response: reqwest::Response,
    ) -> Result<bytes::Bytes, LlmError> {
        let (mut chunks, mut length) = (Vec::new(), 0);
        while let Some(chunk) = self.chunk(&mut response, length).await? {
            length += chunk.len();
            chunks.push(chunk);
        }
        Ok(match chunks.len() {
            1 => chunks.swap_remove(0),
            _ => chunks.concat().into(),
        })
    }

    /// The start of an error response's body: at most [`MAX_ERROR_BODY_BYTES`] (and
    /// never more than `max_response_mib`), all of it within one read timeout; what
    /// arrived is kept when the body breaks off or the time runs out.
    async fn error_body(&self, mut response: reqwest::Response) -> String {
        let limit = MAX_ERROR_BODY_BYTES.min(self.max_response_bytes);
        let mut body = Vec::new();
        let read = async {
            while body.len() < limit {
                match response.chunk().await {
                    Ok(Some(chunk)) => {
                        body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())])
                    }
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(self.read_timeout, read).await;
        String::from_utf8_lossy(&body).into_owned()
    }

    fn connection(&self, what: String, retries: u32) -> LlmError {
        LlmError::Connection {
            provider: self.provider,
            what,
            retries,
        }
    }

    fn backoff(&self, retries: u32) -> Duration {
        let exponential = self
            .retry_base
            .saturating_mul(1 << retries.min(16))
            .min(MAX_BACKOFF);
        // Full jitter in [50%, 100%] of the delay, so retrying clients spread out.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(retries);
        let fraction = 0.5 + (hasher.finish() % 1000) as f64 / 2000.0;
        exponential.mul_f64(fraction)
    }

    /// The error for a redirect not followed: where `response` points, and the
    /// `base_url` to set when that ends in this endpoint's path.
    fn redirected(&self, response: &reqwest::Response) -> LlmError {
        let location = response.headers().get(reqwest::header::LOCATION);
        let target = location
            .and_then(|value| value.to_str().ok())
            .and_then(|text| self.url.join(text).ok())
            .filter(reqwest::Url::has_host)
            .map(|url| without_secrets(&url));
        let base = target
            .as_deref()
            .and_then(|target| target.strip_suffix(self.path))
            .and_then(|base| base.strip_suffix('/'));
        LlmError::Redirected {
            provider: self.provider,
            status: response.status().as_u16(),
            location: match (location, &target) {
                (None, _) => "no address (no Location header)".into(),
                (Some(_), None) => "an address that does not parse".into(),
                (Some(_), Some(target)) => format!("`{target}`"),
            },
            remedy: match base {
                Some(base) => format!("set base_url to `{base}`"),
                None => "set base_url to the address the server points to".into(),
            },
        }
    }

    async fn classify(&self, response: reqwest::Response, retries: u32) -> Attempt {
        if response.status().is_redirection() {
            return Attempt::Fail(self.redirected(&response));
        }
        let status = response.status().as_u16();
        let retry_after = retry_after(&response);
        let body = self.error_body(response).await;
        let excerpt = excerpt(&self.secrets.redact(&body));
        debug!(provider = self.provider, status, %excerpt, "model call failed");
        let lower = body.to_ascii_lowercase();
        let (provider, model) = (self.provider, self.model.clone());
        match status {
            401 | 403 => Attempt::Fail(LlmError::Auth {
                provider,
                model,
                status,
                excerpt,
            }),
            404 => Attempt::Fail(LlmError::UnknownModel {
                provider,
                model,
                status,
                excerpt,
            }),
            429 => Attempt::Retry {
                error: LlmError::RateLimited {
                    provider,
                    model,
                    retries,
                    excerpt,
                },
                after: retry_after,
            },
            500..=599 => Attempt::Retry {
                error: LlmError::Server {
                    provider,
                    status,
                    retries,
                    excerpt,
                },
                after: retry_after,
            },
            _ if [
                "context length",
                "context_length",
                "too long",
                "maximum context",
                "prompt is too long",
            ]
            .iter()
            .any(|p| lower.contains(p)) =>
            {
                Attempt::Fail(LlmError::ContextTooLong {
                    provider,
                    model,
                    excerpt,
                })
            }
            400 if lower.contains("model")
                && (lower.contains("not found")
                    || lower.contains("does not exist")
                    || lower.contains("unknown")) =>
            {
                Attempt::Fail(LlmError::UnknownModel {
                    provider,
                    model,
                    status,
                    excerpt,
                })
            }
            _ => Attempt::Fail(LlmError::BadRequest {
                provider,
                status,
                excerpt,
            }),
        }
    }
}

/// The wait a `Retry-After` header of seconds asks for, at most [`MAX_RETRY_AFTER`].
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s).min(MAX_RETRY_AFTER))
}

/// What the host's own HTTP clients (model calls, the OTLP exporter) do with a
/// redirect: a 307 or 308 to the same origin (scheme, host and port), which keeps the
/// method and body, is followed, up to five times (a server fixing a trailing
/// slash); any other is not, and its 3xx answer comes back to the caller. reqwest
/// would follow up to ten to any host, dropping `Authorization` and cookies on the
/// way but keeping `x-api-key` and every header the config adds, with the body on
/// 307 and 308.
pub(crate) fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .last()
            .is_some_and(|previous| previous.origin() == attempt.url().origin());
        let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
        if same_origin && keeps_body && attempt.previous().len() <= 5 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// A URL as `scheme://host[:port]/path`: without user info, query or fragment, which
/// can carry secrets.
fn without_secrets(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port().map(|p| format!(":{p}")).unwrap_or_default(),
        url.path()
    )
}

/// A reqwest error without its URL (query strings can carry keys).
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_connect() {
        "connection failed"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_body() || error.is_decode() {
        "reading the body failed"
    } else {
        "request failed"
    }
    .to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Reads the key from the configured variable ([`ModelConfig::key_variable`]). With
/// the default variable, a missing key means none (local servers need none); a
/// variable named in the config must exist.
pub(crate) fn api_key(name: &str, config: &ModelConfig) -> Result<Option<String>, LlmError> {
    let variable = config.key_variable().unwrap_or_default();
    match std::env::var(variable) {
        Ok(key) if !key.is_empty() => Ok(Some(key)),
        _ if config.api_key_env.is_some() => Err(LlmError::Config {
            model: name.to_string(),
            message: format!("api_key_env names {variable}, which is not set"),
        }),
        _ => Ok(None),
    }
}

pub(crate) fn malformed(
    provider: &'static str,
    offset: usize,
    what: &str,
    bytes: &[u8],
) -> LlmError {
    let shown = excerpt(&String::from_utf8_lossy(bytes));
    LlmError::Malformed {
        provider,
        offset,
        detail: if shown.is_empty() {
            what.to_string()
        } else {
            format!("{what}: {shown:?}")
        },
    }
}

/// Byte offset of a JSON error, from its line and column.
pub(crate) fn json_offset(body: &[u8], error: &serde_json::Error) -> usize {
    let line_start: usize = body
        .split(|b| *b == b'\n')
        .take(error.line().saturating_sub(1))
        .map(|l| l.len() + 1)
        .sum();
    line_start + error.column().saturating_sub(1)
}

/// The digest a journal records of a request body: XXH3-128 of its bytes, hex.
pub(crate) fn body_digest(body: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(body))
}
