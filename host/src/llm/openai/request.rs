//! The Chat Completions request body, serialized straight from a [`ChatRequest`]
//! without copying it: messages, tools offered, tool calls sent back, streaming and
//! the JSON-schema response format.

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::llm::chat::{ChatRequest, Message, ToolCall, ToolDefinition};

/// The Chat Completions request body, borrowing from the request.
#[derive(Serialize)]
pub(super) struct Body<'a> {
    pub(super) model: &'a str,
    #[serde(serialize_with = "system_then_messages")]
    pub(super) messages: &'a ChatRequest,
    #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "tools_wire")]
    pub(super) tools: &'a [ToolDefinition],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
    /// `stream` and `stream_options`, when streaming.
    #[serde(flatten)]
    pub(super) streaming: Option<Streaming>,
    /// `{type: "json_schema", json_schema: {...}}` when the answer is typed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) response_format: Option<ResponseFormat<'a>>,
}

/// `response_format` asking for JSON matching a schema. `strict: false`: strict mode
/// accepts only a subset of JSON Schema, and warren checks the answer itself.
#[derive(Serialize)]
pub(super) struct ResponseFormat<'a> {
    pub(super) r#type: &'static str,
    pub(super) json_schema: JsonSchemaFormat<'a>,
}

#[derive(Serialize)]
pub(super) struct JsonSchemaFormat<'a> {
    pub(super) name: &'static str,
    pub(super) schema: &'a Value,
    pub(super) strict: bool,
}

/// `"stream": true` with usage in the last chunk.
#[derive(Serialize)]
pub(super) struct Streaming {
    pub(super) stream: bool,
    pub(super) stream_options: StreamOptions,
}

#[derive(Serialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

/// One message on the wire.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` when the turn was only tool calls.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "calls_wire")]
        tool_calls: &'a [ToolCall],
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(message: &'a Message) -> Self {
        match message {
            Message::User(text) => WireMessage::User { content: text },
            Message::Assistant(assistant) => WireMessage::Assistant {
                content: Some(assistant.text.as_str()).filter(|text| !text.is_empty()),
                tool_calls: &assistant.tool_calls,
            },
            Message::ToolResult {
                call_id, content, ..
            } => WireMessage::Tool {
                tool_call_id: call_id,
                content,
            },
        }
    }
}

/// `{"id"?: ..., "type": "function", "function": ...}`: a tool offered (no id) or a
/// call of one.
#[derive(Serialize)]
struct FunctionWire<'a, F> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    r#type: &'static str,
    function: F,
}

impl<'a, F> FunctionWire<'a, F> {
    fn new(id: Option<&'a str>, function: F) -> Self {
        FunctionWire {
            id,
            r#type: "function",
            function,
        }
    }
}

#[derive(Serialize)]
struct ToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

fn system_then_messages<S: Serializer>(
    request: &&ChatRequest,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    // No system message at all when there is no prompt: an empty one is not "none" to
    // every server (some reject it, some send it to the model as is).
    let system = (!request.system.trim().is_empty()).then_some(WireMessage::System {
        content: &request.system,
    });
    serializer.collect_seq(
        system
            .into_iter()
            .chain(request.messages.iter().map(WireMessage::from)),
    )
}

fn tools_wire<S: Serializer>(tools: &&[ToolDefinition], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(tools.iter().map(|tool| {
        let function = ToolFunction {
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.input_schema,
        };
        FunctionWire::new(None, function)
    }))
}

fn calls_wire<S: Serializer>(calls: &&[ToolCall], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(calls.iter().map(|call| {
        let function = CallFunction {
            name: &call.name,
            arguments: &call.arguments,
        };
        FunctionWire::new(Some(&call.id), function)
    }))
}
