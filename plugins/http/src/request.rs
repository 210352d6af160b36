//! One HTTP GET through `wasi:http/outgoing-handler`: URL parsing, the request, the
//! response headers and a body read up to a cap. Redirects are not followed; the host
//! checks every request against `capabilities.net` and a refusal becomes a denial.

use crate::exports::warren::plugin::tool::ToolError;
use crate::wasi::http::outgoing_handler;
use crate::wasi::http::types::{ErrorCode, Fields, Method, OutgoingRequest, Scheme};
use crate::wasi::io::streams::StreamError;

/// The body is read in chunks of this many bytes.
const READ_CHUNK_BYTES: u64 = 16 * 1024;

/// The parts of an `http(s)://authority/path?query` URL that a request needs.
pub(crate) struct Url {
    /// Whether the scheme is `https`.
    https: bool,
    /// `host[:port]`, as the host's network policy sees it.
    pub(crate) authority: String,
    /// Everything after the authority except the fragment, starting with `/`.
    path_and_query: String,
}

impl Url {
    pub(crate) fn parse(url: &str) -> Result<Url, ToolError> {
        let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(ToolError::InvalidInput(format!(
                "`{url}` is not an http:// or https:// URL"
            )));
        };
        let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(split);
        if authority.is_empty() || authority.contains('@') {
            return Err(ToolError::InvalidInput(format!(
                "`{url}` has no valid host"
            )));
        }
        let tail = tail.split('#').next().unwrap_or("");
        let path_and_query = if tail.starts_with('/') {
            tail.to_string()
        } else {
            format!("/{tail}")
        };
        Ok(Url {
            https,
            authority: authority.to_string(),
            path_and_query,
        })
    }
}

impl Url {
    /// `http` or `https`.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.https {
            "https"
        } else {
            "http"
        }
    }
}

/// A response with its body read up to the caller's cap.
pub(crate) struct Response {
    /// The HTTP status code.
    pub(crate) status: u16,
    /// Every header, in the order the server sent them.
    pub(crate) headers: Vec<(String, Vec<u8>)>,
    /// The body, at most the cap.
    pub(crate) body: Vec<u8>,
    /// Whether the body was longer than the cap.
    pub(crate) truncated: bool,
}

impl Response {
    /// The first header called `name` (ASCII case-insensitive), as text.
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| String::from_utf8_lossy(value).into_owned())
    }
}

/// GETs `url` and reads at most `max_body_bytes` of the body.
pub(crate) fn get(url: &Url, max_body_bytes: usize) -> Result<Response, ToolError> {
    let request = OutgoingRequest::new(Fields::new());
    let set = request
        .set_method(&Method::Get)
        .and(request.set_scheme(Some(if url.https {
            &Scheme::Https
        } else {
            &Scheme::Http
        })))
        .and(request.set_authority(Some(&url.authority)))
        .and(request.set_path_with_query(Some(&url.path_and_query)));
    if set.is_err() {
        return Err(ToolError::InvalidInput(format!(
            "invalid URL parts for {}",
            url.authority
        )));
    }
    let pending = outgoing_handler::handle(request, None).map_err(|e| request_error(url, e))?;
    pending.subscribe().block();
    let response = pending
        .get()
        .ok_or_else(|| ToolError::Failed("response was not ready".into()))?
        .map_err(|()| ToolError::Failed("response already taken".into()))?
        .map_err(|e| request_error(url, e))?;
    let status = response.status();
    let headers = response.headers().entries();

    let body = response
        .consume()
        .map_err(|()| ToolError::Failed("response body unavailable".into()))?;
    let stream = body
        .stream()
        .map_err(|()| ToolError::Failed("response body unavailable".into()))?;
    let mut bytes = Vec::new();
    let mut truncated = false;
    loop {
        match stream.blocking_read(READ_CHUNK_BYTES) {
            Ok(chunk) => {
                let room = max_body_bytes - bytes.len();
                if chunk.len() > room {
                    bytes.extend_from_slice(&chunk[..room]);
                    truncated = true;
                    break;
                }
                bytes.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(ToolError::Failed(format!(
                    "reading the body failed: {}",
                    e.to_debug_string()
                )));
            }
        }
    }
    Ok(Response {
        status,
        headers,
        body: bytes,
        truncated,
    })
}

fn request_error(url: &Url, error: ErrorCode) -> ToolError {
    match error {
        ErrorCode::HttpRequestDenied => ToolError::Failed(format!(
            "denied: {} is not in this profile's network allow-list (capabilities.net)",
            url.authority
        )),
        other => ToolError::Failed(format!("request to {} failed: {other:?}", url.authority)),
    }
}
