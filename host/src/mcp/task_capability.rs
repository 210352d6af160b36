//! What rmcp 3.11 cannot say of the 2025-11-25 revision's tasks, added to its
//! answers: the `tasks` capability on `initialize`, `execution.taskSupport` on the
//! tools that run as tasks.

use http_body_util::combinators::BoxBody;
use serde_json::{json, Value};

/// `response` (rmcp's answer to `method`, `initialize` or `tools/list`, as JSON or
/// as an event stream) with what rmcp 3.11 cannot say of this revision's tasks: the
/// `tasks` capability (list, cancel, `tools/call`), and `execution.taskSupport:
/// "optional"` on `spawn_agent`.
pub(super) async fn advertise(
    method: &str,
    response: hyper::Response<BoxBody<bytes::Bytes, std::convert::Infallible>>,
) -> hyper::Response<BoxBody<bytes::Bytes, std::convert::Infallible>> {
    use http_body_util::BodyExt as _;
    let (mut parts, body) = response.into_parts();
    let Ok(collected) = body.collect().await;
    let text = String::from_utf8_lossy(&collected.to_bytes()).into_owned();
    let amend = |message: &str| -> Option<String> {
        let mut message: Value = serde_json::from_str(message).ok()?;
        let result = message.get_mut("result")?;
        match method {
            "initialize" => {
                result["capabilities"]["tasks"] = json!({
                    "list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}
                });
            }
            _ => {
                for tool in result["tools"].as_array_mut()? {
                    if tool["name"] == "spawn_agent" || tool["name"] == "await_agents" {
                        tool["execution"] = json!({"taskSupport": "optional"});
                    }
                }
            }
        }
        Some(message.to_string())
    };
    let event_stream = parts
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    let text = if event_stream {
        text.split_inclusive('\n')
            .map(|line| {
                let data = line.strip_prefix("data:").map(str::trim);
                match data.and_then(amend) {
                    Some(amended) => format!("data: {amended}\n"),
                    None => line.to_string(),
                }
            })
            .collect()
    } else {
        amend(&text).unwrap_or(text)
    };
    parts.headers.remove(hyper::header::CONTENT_LENGTH);
    hyper::Response::from_parts(
        parts,
        http_body_util::Full::new(bytes::Bytes::from(text)).boxed(),
    )
}
