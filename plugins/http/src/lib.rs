//! The `http` plugin: `http_get`, an HTTP GET to the hosts the profile allows.
//!
//! Requests go through `wasi:http/outgoing-handler`, so the host's network policy
//! (`capabilities.net`) decides which hosts are reachable; a refused request comes back
//! as `HTTP-request-denied` and is reported as a denial.

use serde::Deserialize;

wit_bindgen::generate!({ path: "../../wit", world: "warren:plugin/plugin", generate_all });

use exports::warren::plugin::tool::{Guest, ToolError, ToolSpec};
use wasi::http::outgoing_handler;
use wasi::http::types::{ErrorCode, Fields, Method, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

/// The response body is cut after this many bytes (the answer says so), keeping a
/// large page from flooding the model's context.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// Response headers worth showing the model; the rest are noise.
const SHOWN_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "location",
    "last-modified",
    "etag",
];

struct Http;

impl Guest for Http {
    fn list_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "http_get".into(),
            description: format!(
                "HTTP GET a URL. Returns the status line, a few headers (content-type, content-length, location, last-modified, etag) and the body as text, cut after {} KiB.",
                MAX_BODY_BYTES / 1024
            ),
            input_schema: r#"{"type":"object","properties":{"url":{"type":"string","description":"http:// or https:// URL"}},"required":["url"],"additionalProperties":false}"#.into(),
        }]
    }

    fn call_tool(name: String, arguments: String) -> Result<String, ToolError> {
        if name != "http_get" {
            return Err(ToolError::InvalidInput(format!("unknown tool `{name}`")));
        }
        let args: GetArgs = serde_json::from_str(&arguments)
            .map_err(|e| ToolError::InvalidInput(format!("bad arguments: {e}")))?;
        let url = Url::parse(&args.url)?;
        get(&url)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    url: String,
}

/// The parts of an `http(s)://authority/path?query` URL that a request needs.
struct Url {
    https: bool,
    authority: String,
    path_and_query: String,
}

impl Url {
    fn parse(url: &str) -> Result<Url, ToolError> {
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

fn get(url: &Url) -> Result<String, ToolError> {
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

    let mut out = format!("HTTP {}\n", response.status());
    for (name, value) in response.headers().entries() {
        if SHOWN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            out.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(&value)));
        }
    }
    out.push('\n');

    let body = response
        .consume()
        .map_err(|()| ToolError::Failed("response body unavailable".into()))?;
    let stream = body
        .stream()
        .map_err(|()| ToolError::Failed("response body unavailable".into()))?;
    let mut bytes = Vec::new();
    let mut truncated = false;
    loop {
        match stream.blocking_read(16 * 1024) {
            Ok(chunk) => {
                let room = MAX_BODY_BYTES - bytes.len();
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
    out.push_str(&String::from_utf8_lossy(&bytes));
    if truncated {
        out.push_str(&format!("\n[body cut after {} KiB]", MAX_BODY_BYTES / 1024));
    }
    Ok(out)
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

export!(Http);
