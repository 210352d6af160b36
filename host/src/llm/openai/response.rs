//! Reading a Chat Completions response: a whole `message`, or stream chunks (the
//! common shape parsed borrowed, any other through `serde_json::Value`), assembled
//! into one assistant message with its usage and finish reason.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::llm::chat::{AssistantMessage, FinishReason, ToolCall, Usage};

/// A stream chunk of the common shape, read borrowed: text, reasoning, refusal and
/// tool-call fragments as strings. Other shapes fail to parse or are not
/// [`PlainChunk::is_plain`], and take the general path.
#[derive(serde::Deserialize)]
pub(super) struct PlainChunk<'a> {
    #[serde(default, borrow)]
    pub(super) choices: Vec<PlainChoice<'a>>,
    pub(super) usage: Option<serde::de::IgnoredAny>,
    pub(super) x_groq: Option<serde::de::IgnoredAny>,
    pub(super) error: Option<serde::de::IgnoredAny>,
}

impl PlainChunk<'_> {
    /// Whether nothing in it needs the general path (usage and errors do).
    pub(super) fn is_plain(&self) -> bool {
        self.usage.is_none() && self.x_groq.is_none() && self.error.is_none()
    }
}

#[derive(serde::Deserialize)]
pub(super) struct PlainChoice<'a> {
    #[serde(default, borrow)]
    pub(super) delta: PlainDelta<'a>,
    #[serde(borrow)]
    pub(super) finish_reason: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Default, serde::Deserialize)]
pub(super) struct PlainDelta<'a> {
    #[serde(borrow)]
    pub(super) content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) reasoning_content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) reasoning: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) refusal: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) tool_calls: Option<Vec<PlainCall<'a>>>,
}

#[derive(serde::Deserialize)]
pub(super) struct PlainCall<'a> {
    pub(super) index: Option<u64>,
    #[serde(borrow)]
    pub(super) id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) function: Option<PlainFunction<'a>>,
}

#[derive(serde::Deserialize)]
pub(super) struct PlainFunction<'a> {
    #[serde(borrow)]
    pub(super) name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) arguments: Option<std::borrow::Cow<'a, str>>,
}

/// An assistant message put together from a whole `message` or from stream deltas,
/// as OpenAI-compatible servers really send them.
#[derive(Default)]
pub(super) struct Assembly {
    pub(super) text: String,
    pub(super) reasoning: String,
    /// Refusal text as it arrived (empty or blank when the model did not refuse).
    pub(super) refusal: String,
    /// Calls in arrival order.
    pub(super) calls: Vec<ToolCall>,
    /// `index` → position in `calls`, for servers that number their fragments.
    pub(super) by_index: BTreeMap<u64, usize>,
    pub(super) finish: Option<FinishReason>,
    pub(super) usage: Usage,
}

impl Assembly {
    /// Applies a `message` or a `delta`.
    pub(super) fn message(&mut self, part: &Value) {
        match &part["content"] {
            Value::String(text) => self.text.push_str(text),
            // Content as parts (Mistral): text parts are the answer, thinking parts
            // are reasoning.
            Value::Array(parts) => {
                for piece in parts {
                    match piece["type"].as_str() {
                        Some("text") => self
                            .text
                            .push_str(piece["text"].as_str().unwrap_or_default()),
                        Some("thinking") => {
                            self.reasoning.push_str(&parts_text(&piece["thinking"]))
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        for key in ["reasoning_content", "reasoning"] {
            if let Some(reasoning) = part[key].as_str() {
                self.reasoning.push_str(reasoning);
            }
        }
        if let Some(refusal) = part["refusal"].as_str() {
            self.refusal.push_str(refusal);
        }
        for fragment in part["tool_calls"].as_array().into_iter().flatten() {
            self.tool_call(fragment);
        }
    }

    /// One tool-call fragment as JSON (arguments may be an object rather than a
    /// string).
    pub(super) fn tool_call(&mut self, fragment: &Value) {
        let arguments = match &fragment["function"]["arguments"] {
            Value::String(piece) => Some(std::borrow::Cow::Borrowed(piece.as_str())),
            Value::Null => None,
            object => Some(std::borrow::Cow::Owned(object.to_string())),
        };
        self.tool_call_parts(
            fragment["index"].as_u64(),
            fragment["id"].as_str(),
            fragment["function"]["name"].as_str(),
            arguments.as_deref(),
        );
    }

    /// A plain chunk's delta: the same rules as [`Assembly::message`].
    pub(super) fn plain_delta(&mut self, delta: &PlainDelta<'_>) {
        if let Some(text) = &delta.content {
            self.text.push_str(text);
        }
        for reasoning in [&delta.reasoning_content, &delta.reasoning]
            .into_iter()
            .flatten()
        {
            self.reasoning.push_str(reasoning);
        }
        if let Some(refusal) = &delta.refusal {
            self.refusal.push_str(refusal);
        }
        for fragment in delta.tool_calls.iter().flatten() {
            let function = fragment.function.as_ref();
            self.tool_call_parts(
                fragment.index,
                fragment.id.as_deref(),
                function.and_then(|f| f.name.as_deref()),
                function.and_then(|f| f.arguments.as_deref()),
            );
        }
    }

    /// One tool-call fragment, by its parts. Fragments are matched by `index` when the
    /// server numbers them; otherwise a fragment with a new `id` starts a new call and
    /// one without an id continues the last call. A whole call may come in one
    /// fragment.
    pub(super) fn tool_call_parts(
        &mut self,
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) {
        let id = id.filter(|id| !id.is_empty());
        let position = match index {
            Some(index) => match self.by_index.get(&index) {
                Some(&position) => Some(position),
                None => {
                    self.by_index.insert(index, self.calls.len());
                    None
                }
            },
            None => match id {
                Some(id) if self.calls.iter().any(|c| c.id == id) => {
                    self.calls.iter().position(|c| c.id == id)
                }
                Some(_) => None,
                None => self.calls.len().checked_sub(1),
            },
        };
        let position = position.unwrap_or_else(|| {
            self.calls.push(ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[position];
        if let Some(id) = id {
            call.id = id.to_string();
        }
        // Some servers repeat the name in every fragment; others send it once.
        if let Some(name) = name {
            if call.name.is_empty() {
                call.name = name.to_string();
            } else if call.name != name {
                call.name.push_str(name);
            }
        }
        if let Some(piece) = arguments {
            call.arguments.push_str(piece);
        }
    }

    /// The message, the finish reason (inferred when none was sent: tool calls, else
    /// stop) and the usage.
    pub(super) fn into_parts(mut self) -> (AssistantMessage, FinishReason, Usage) {
        for (n, call) in self.calls.iter_mut().enumerate() {
            if call.arguments.trim().is_empty() {
                call.arguments = "{}".into();
            }
            if call.id.is_empty() {
                call.id = format!("call_{n}");
            }
        }
        let finish = self.finish.unwrap_or(if self.calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        let message = AssistantMessage {
            text: self.text,
            tool_calls: self.calls,
            reasoning: self.reasoning,
            // Snowflake Cortex and some gateways put `"refusal": ""` on every delta of
            // an answer: an empty refusal is no refusal.
            refusal: Some(self.refusal).filter(|refusal| !refusal.trim().is_empty()),
            provider_blocks: Vec::new(),
        };
        (message, finish, self.usage)
    }
}

/// The text of a `thinking` value: a string, or a list of `{text}` parts.
pub(super) fn parts_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or(p.as_str()))
            .collect(),
        _ => String::new(),
    }
}

/// The usage a chunk or body reports: `usage`, or where Groq puts it in streams
/// (`x_groq.usage`).
pub(super) fn usage(value: &Value) -> Option<Usage> {
    let usage = [&value["usage"], &value["x_groq"]["usage"]]
        .into_iter()
        .find(|u| u.is_object())?;
    Some(Usage {
        input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
        cached_input_tokens: usage["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
        output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
    })
}

pub(super) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        // `eos` (Together), `end_turn` (some proxies of Anthropic models): a normal end.
        "stop" | "eos" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" | "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}
