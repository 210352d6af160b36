//! The client's own model, scripted: a [`FakeLlm`] answering in the wire format the
//! client speaks (OpenAI chat completions, Anthropic Messages streamed, OpenAI
//! Responses streamed) with the tool calls of [`next_call`], one per turn, each chosen
//! from what the client showed the model of the calls before. What the model was shown
//! is read back from the requests ([`ClientModel::shown`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};

/// The file the model reads first, and its text.
pub(super) const GRANTED: (&str, &str) =
    ("/docs/install.md", "Install with cargo install warren\n");

/// What a sub-agent's task starts with: one answering, one whose model never answers.
pub(super) const SUMMARY_TASK: &str = "SUMMARY-TASK";
pub(super) const HANG_TASK: &str = "HANG-TASK";

/// The API a client speaks to its model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Wire {
    /// OpenAI chat completions, not streamed (the Agents SDK).
    Chat,
    /// Anthropic Messages, streamed (Claude Code).
    Anthropic,
    /// OpenAI Responses, streamed (Codex).
    Responses,
}

/// One tool result as the client showed it to its model.
#[derive(Clone, Debug)]
pub(super) struct Shown {
    pub(super) text: String,
    /// Whether the client marked it an error, where its wire format can say so.
    pub(super) error: Option<bool>,
}

/// What warren's bounded `await_agents` ends with when jobs still run.
const STILL_RUNNING: &str = "Call await_agents again to keep waiting.";

/// The results without the bounded awaits' interim answers (a job still running).
pub(super) fn settled(all: &[Shown]) -> Vec<Shown> {
    all.iter()
        .filter(|r| !r.text.contains(STILL_RUNNING))
        .cloned()
        .collect()
}

/// The job id in `Started job abc123 (...)`.
pub(super) fn job_id(started: &str) -> Option<String> {
    let rest = &started[started.find("Started job ")? + "Started job ".len()..];
    Some(
        rest.chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect(),
    )
}

/// The tool (warren's name) and arguments of the model's next call, from the results of
/// the calls before; `None` when it is done. Reads a granted file, then one outside the
/// grant, spawns a researcher and awaits it, spawns one that hangs and cancels it.
pub(super) fn next_call(all: &[Shown]) -> Option<(&'static str, Value)> {
    let results = settled(all);
    let id = |n: usize| {
        results
            .get(n)
            .and_then(|r| job_id(&r.text))
            .unwrap_or_else(|| "no-job-id".into())
    };
    if all.last().is_some_and(|r| r.text.contains(STILL_RUNNING)) {
        // As a model does when warren's bounded await says so: await again.
        return Some(("await_agents", json!({"job_ids": [id(2)]})));
    }
    Some(match results.len() {
        0 => ("read_file", json!({"path": GRANTED.0})),
        1 => ("read_file", json!({"path": "/etc/passwd"})),
        2 => (
            "spawn_agent",
            json!({"profile": "researcher", "task": format!("{SUMMARY_TASK}: the install docs")}),
        ),
        3 => ("await_agents", json!({"job_ids": [id(2)]})),
        4 => (
            "spawn_agent",
            json!({"profile": "researcher", "task": format!("{HANG_TASK}: never answers")}),
        ),
        5 => ("cancel_agent", json!({"job_id": id(4)})),
        _ => return None,
    })
}

/// The text of a tool result's content: a string, or text blocks.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str().or(b.as_str()))
            .collect::<Vec<_>>()
            .join(""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The tool results in a request body, in order.
pub(super) fn results(wire: Wire, body: &Value) -> Vec<Shown> {
    let empty = Vec::new();
    match wire {
        Wire::Chat => body["messages"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| Shown {
                text: content_text(&m["content"]),
                error: None,
            })
            .collect(),
        Wire::Anthropic => body["messages"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| {
                b["type"] == "tool_result"
                    && !b["tool_use_id"]
                        .as_str()
                        .is_some_and(|id| id.starts_with(SEARCH_ID))
            })
            .map(|b| Shown {
                text: content_text(&b["content"]),
                error: Some(b["is_error"].as_bool().unwrap_or(false)),
            })
            .collect(),
        Wire::Responses => body["input"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| Shown {
                text: content_text(&i["output"]),
                error: None,
            })
            .collect(),
    }
}

/// The names of the tools a request offers the model; a tool in a Responses
/// `namespace` (Codex puts each MCP server's in one, `mcp__warren`) as
/// `{namespace}__{name}`.
pub(super) fn offered(wire: Wire, body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        match wire {
            Wire::Chat => names.extend(tool["function"]["name"].as_str().map(str::to_string)),
            Wire::Responses if tool["type"] == "namespace" => {
                let namespace = tool["name"].as_str().unwrap_or_default();
                names.extend(
                    tool["tools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t["name"].as_str())
                        .map(|name| format!("{namespace}__{name}")),
                );
            }
            Wire::Anthropic | Wire::Responses => {
                names.extend(tool["name"].as_str().map(str::to_string))
            }
        }
    }
    names
}

/// A fresh id for a tool call.
fn call_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("call_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// How the ids of Claude Code's `ToolSearch` calls start, to tell their results apart.
const SEARCH_ID: &str = "search_";

/// Claude Code defers MCP tools: its prompt names them, and the model loads their
/// schemas with `ToolSearch` before it may call them. The `ToolSearch` call loading
/// warren's tools, when the request names them but does not offer them yet.
fn tool_search(body: &Value, prefix: &str) -> Option<(String, Value)> {
    let read_file = format!("{prefix}read_file");
    let searched = body.to_string().contains(SEARCH_ID);
    (!offered(Wire::Anthropic, body).contains(&read_file) && !searched).then(|| {
        let names: Vec<String> = super::SERVED
            .iter()
            .map(|t| format!("{prefix}{t}"))
            .collect();
        (
            "ToolSearch".to_string(),
            json!({"query": format!("select:{}", names.join(",")), "max_results": 10}),
        )
    })
}

/// The model's reply: a call of `tool` with `arguments`, or (`None`) a final answer.
fn reply(wire: Wire, call: Option<(String, Value)>) -> Reply {
    const DONE: &str = "All done.";
    match (wire, call) {
        (Wire::Chat, Some((tool, arguments))) => {
            Reply::tool_calls(&[(tool.as_str(), arguments)], (100, 10))
        }
        (Wire::Chat, None) => Reply::answer(DONE, (100, 10)),
        (Wire::Anthropic, call) => {
            let (block, stop) = match call {
                Some((tool, arguments)) => (
                    vec![
                        json!({"type": "content_block_start", "index": 0, "content_block":
                            {"type": "tool_use", "name": tool, "input": {},
                             "id": if tool == "ToolSearch" { format!("{SEARCH_ID}{}", call_id()) } else { call_id() }}}),
                        json!({"type": "content_block_delta", "index": 0, "delta":
                            {"type": "input_json_delta", "partial_json": arguments.to_string()}}),
                    ],
                    "tool_use",
                ),
                None => (
                    vec![
                        json!({"type": "content_block_start", "index": 0, "content_block":
                            {"type": "text", "text": ""}}),
                        json!({"type": "content_block_delta", "index": 0, "delta":
                            {"type": "text_delta", "text": DONE}}),
                    ],
                    "end_turn",
                ),
            };
            let mut events = vec![json!({"type": "message_start", "message": {
                "id": "msg_scripted", "type": "message", "role": "assistant", "model": "claude-scripted",
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 1}}})];
            events.extend(block);
            events.push(json!({"type": "content_block_stop", "index": 0}));
            events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 10}}));
            events.push(json!({"type": "message_stop"}));
            Reply::anthropic_stream(events)
        }
        (Wire::Responses, call) => {
            let item = match call {
                Some((tool, arguments)) => {
                    let mut item = json!({"type": "function_call", "id": format!("fc_{}", call_id()),
                        "call_id": call_id(), "name": tool, "arguments": arguments.to_string(), "status": "completed"});
                    // A namespaced tool is called by its name and namespace.
                    if let Some((namespace, name)) = tool.rsplit_once("__") {
                        item["namespace"] = json!(namespace);
                        item["name"] = json!(name);
                    }
                    item
                }
                None => {
                    json!({"type": "message", "id": "msg_scripted", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": DONE, "annotations": []}]})
                }
            };
            let events = [
                json!({"type": "response.created", "response": {"id": "resp_scripted"}}),
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
                json!({"type": "response.completed", "response": {"id": "resp_scripted",
                    "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}}}),
            ];
            Reply::Stream {
                pieces: events
                    .iter()
                    .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
                    .collect(),
                delay: std::time::Duration::ZERO,
            }
        }
    }
}

/// Whether a request names warren's tools to the model (offered, or deferred):
/// a turn of the conversation, not a side request of the client's (a title, a summary).
fn names_warren(wire: Wire, body: &Value, prefix: &str) -> bool {
    let read_file = format!("{prefix}read_file");
    offered(wire, body).contains(&read_file) || body.to_string().contains(&read_file)
}

/// The client's scripted model.
pub(super) struct ClientModel {
    pub(super) server: FakeLlm,
    wire: Wire,
}

impl ClientModel {
    /// Starts it; the client names warren's tools `{prefix}{name}` (Claude Code:
    /// `mcp__warren__`). A request that offers none of warren's tools (a client's side
    /// request: a title, a summary) gets a plain answer. The call that cancels the
    /// hanging sub-agent waits until warren's model (`hangs`: its server's permits)
    /// has that sub-agent's request, so the cancel always meets it in flight.
    pub(super) async fn start(
        wire: Wire,
        prefix: &'static str,
        hangs: Arc<tokio::sync::Semaphore>,
    ) -> ClientModel {
        let server = FakeLlm::start().await;
        server.respond_with(Arc::new(move |body: &Value| {
            if !names_warren(wire, body, prefix) {
                return Some(reply(wire, None));
            }
            let search = (wire == Wire::Anthropic)
                .then(|| tool_search(body, prefix))
                .flatten();
            let next = next_call(&results(wire, body));
            let cancels = search.is_none()
                && next
                    .as_ref()
                    .is_some_and(|(tool, _)| *tool == "cancel_agent");
            let call = search
                .or_else(|| next.map(|(tool, arguments)| (format!("{prefix}{tool}"), arguments)));
            Some(match cancels {
                true => Reply::Gated(hangs.clone(), Box::new(reply(wire, call))),
                false => reply(wire, call),
            })
        }));
        ClientModel { server, wire }
    }

    /// The requests that named warren's tools to the model (the conversation's turns).
    pub(super) fn turns(&self, prefix: &str) -> Vec<Value> {
        self.server
            .requests()
            .into_iter()
            .map(|r| r.body)
            .filter(|body| names_warren(self.wire, body, prefix))
            .collect()
    }

    /// The tool results the client showed its model in the last turn.
    pub(super) fn shown(&self, prefix: &str) -> Vec<Shown> {
        self.turns(prefix)
            .last()
            .map(|body| results(self.wire, body))
            .unwrap_or_default()
    }
}
