//! The `http` plugin: `http_get` (an HTTP GET, headers and raw body) and `fetch` (a web
//! page as readable text), to the hosts the profile allows.
//!
//! Requests go through `wasi:http/outgoing-handler`, so the host's network policy
//! (`capabilities.net`) decides which hosts are reachable; a refused request comes back
//! as `HTTP-request-denied` and is reported as a denial.
//!
//! Layout: `lib.rs` holds the tool specs, dispatch and `http_get`'s answer;
//! [`request`] sends the GET and reads the body; [`fetch`] turns a response into text.

use serde::Deserialize;
use serde_json::json;

wit_bindgen::generate!({ path: "../../wit", world: "warren:plugin/plugin", generate_all });

mod fetch;
mod request;

use exports::warren::plugin::tool::{Guest, ToolError, ToolSpec};
use request::Url;

/// `http_get` cuts the response body after this many bytes (the answer says so),
/// keeping a large page from flooding the model's context.
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
        vec![
            ToolSpec {
                name: "http_get".into(),
                description: format!(
                    "HTTP GET a URL. Returns the status line, a few headers (content-type, content-length, location, last-modified, etag) and the body as text, cut after {} KiB.",
                    MAX_BODY_BYTES / 1024
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {"url": {"type": "string", "description": "http:// or https:// URL"}},
                    "required": ["url"],
                    "additionalProperties": false
                })
                .to_string(),
            },
            ToolSpec {
                name: "fetch".into(),
                description: format!(
                    "Fetch a web page or text document (HTTP GET) and return it as readable text: HTML becomes Markdown-like text (headings as #, links as [text][n] with the URLs listed at the end); other text types are returned as they are; binary content is refused. The first line is `URL (status, content-type)`. Redirects are not followed: a redirect answer names its target, fetch that. At most {} MiB of the body is read and `max_length` characters returned.",
                    fetch::MAX_BODY_BYTES / (1024 * 1024)
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "url": {"type": "string", "description": "http:// or https:// URL"},
                        "max_length": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": fetch::MAX_LENGTH,
                            "default": fetch::DEFAULT_MAX_LENGTH,
                            "description": "Characters of text to return at most"
                        }
                    },
                    "required": ["url"],
                    "additionalProperties": false
                })
                .to_string(),
            },
        ]
    }

    fn call_tool(name: String, arguments: String) -> Result<String, ToolError> {
        match name.as_str() {
            "http_get" => {
                let args: GetArgs = parse(&arguments)?;
                http_get(&Url::parse(&args.url)?)
            }
            "fetch" => fetch::fetch(&parse(&arguments)?),
            other => Err(ToolError::InvalidInput(format!("unknown tool `{other}`"))),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    url: String,
}

fn parse<'a, T: Deserialize<'a>>(arguments: &'a str) -> Result<T, ToolError> {
    serde_json::from_str(arguments)
        .map_err(|e| ToolError::InvalidInput(format!("bad arguments: {e}")))
}

/// The status line, the [`SHOWN_HEADERS`], a blank line and the body, cut after
/// [`MAX_BODY_BYTES`].
fn http_get(url: &Url) -> Result<String, ToolError> {
    let response = request::get(url, MAX_BODY_BYTES)?;
    let mut out = format!("HTTP {}\n", response.status);
    for (name, value) in &response.headers {
        if SHOWN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            out.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(value)));
        }
    }
    out.push('\n');
    out.push_str(&String::from_utf8_lossy(&response.body));
    if response.truncated {
        out.push_str(&format!("\n[body cut after {} KiB]", MAX_BODY_BYTES / 1024));
    }
    Ok(out)
}

export!(Http);
