//! `fetch`: a GET whose answer is readable text. HTML is rendered as Markdown-like
//! text by `html2text`, other text types pass through, binary types are refused.

use serde::Deserialize;

use crate::exports::warren::plugin::tool::ToolError;
use crate::request::{self, Url};

/// At most this much of the body is read; more is cut (the answer says so).
pub(crate) const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;

/// Characters returned when the call gives no `max_length`.
pub(crate) const DEFAULT_MAX_LENGTH: usize = 100_000;

/// The largest `max_length` a call may ask for.
pub(crate) const MAX_LENGTH: usize = 1_000_000;

/// Width HTML is laid out at: wide enough that prose is not broken into short lines,
/// narrow enough for tables to render.
const HTML_WIDTH: usize = 120;

/// Non-`text/*` media types that are text all the same.
const TEXT_TYPES: &[&str] = &[
    "application/json",
    "application/xml",
    "application/javascript",
    "application/ecmascript",
    "application/x-javascript",
    "application/yaml",
    "application/x-yaml",
    "application/toml",
    "application/x-sh",
    "application/sql",
    "application/graphql",
    "application/x-ndjson",
    "application/csv",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FetchArgs {
    url: String,
    max_length: Option<usize>,
}

/// How a body is turned into text.
enum Kind {
    /// Rendered to Markdown-like text.
    Html,
    /// Returned as it is.
    Text,
    /// Refused: the model cannot read it.
    Binary,
}

pub(crate) fn fetch(args: &FetchArgs) -> Result<String, ToolError> {
    let max_length = args.max_length.unwrap_or(DEFAULT_MAX_LENGTH);
    if !(1..=MAX_LENGTH).contains(&max_length) {
        return Err(ToolError::InvalidInput(format!(
            "max_length must be between 1 and {MAX_LENGTH}, not {max_length}"
        )));
    }
    let url = Url::parse(&args.url)?;
    let response = request::get(&url, MAX_BODY_BYTES)?;
    let content_type = response.header("content-type");
    let shown_type = content_type.as_deref().unwrap_or("no content-type");
    let mut out = format!("{} ({}, {shown_type})\n", args.url, response.status);

    if (300..400).contains(&response.status) {
        if let Some(location) = response.header("location") {
            let location = absolute(&url, &location);
            out.push_str(&format!(
                "redirect to {location} (not followed: fetch that URL to read it)"
            ));
            return Ok(out);
        }
    }
    let text = match kind(content_type.as_deref(), &response.body) {
        Kind::Html => html_to_text(&response.body)?,
        Kind::Text => String::from_utf8_lossy(&response.body).into_owned(),
        Kind::Binary => {
            let why =
                content_type.map_or("no content-type".into(), |t| format!("content-type {t}"));
            return Err(ToolError::Failed(format!(
                "{} is not text ({why})",
                args.url
            )));
        }
    };
    out.push('\n');
    let total = text.chars().count();
    match text.char_indices().nth(max_length) {
        Some((end, _)) => {
            out.push_str(&text[..end]);
            out.push_str(&format!("\n[cut at {max_length} characters of {total}]"));
        }
        None => out.push_str(&text),
    }
    if response.truncated {
        out.push_str(&format!(
            "\n[body cut after {} MiB]",
            MAX_BODY_BYTES / (1024 * 1024)
        ));
    }
    Ok(out)
}

/// `location` as an absolute URL when it is server-relative (`/next`, `//host/next`).
fn absolute(url: &Url, location: &str) -> String {
    if let Some(rest) = location.strip_prefix("//") {
        format!("{}://{rest}", url.scheme())
    } else if location.starts_with('/') {
        format!("{}://{}{location}", url.scheme(), url.authority)
    } else {
        location.to_string()
    }
}

/// The body's kind from its content type, or from its bytes when there is none.
fn kind(content_type: Option<&str>, body: &[u8]) -> Kind {
    let Some(content_type) = content_type else {
        let looks_like_text = !body.contains(&0) && std::str::from_utf8(body).is_ok();
        let start = String::from_utf8_lossy(&body[..body.len().min(512)])
            .trim_start()
            .to_ascii_lowercase();
        return if start.starts_with("<!doctype html") || start.starts_with("<html") {
            Kind::Html
        } else if looks_like_text {
            Kind::Text
        } else {
            Kind::Binary
        };
    };
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if media == "text/html" || media == "application/xhtml+xml" {
        Kind::Html
    } else if media.starts_with("text/")
        || media.ends_with("+json")
        || media.ends_with("+xml")
        || TEXT_TYPES.contains(&media.as_str())
    {
        Kind::Text
    } else {
        Kind::Binary
    }
}

fn html_to_text(html: &[u8]) -> Result<String, ToolError> {
    html2text::config::plain()
        .no_link_wrapping()
        .allow_width_overflow()
        .string_from_read(html, HTML_WIDTH)
        .map_err(|e| ToolError::Failed(format!("could not read the HTML: {e}")))
}
