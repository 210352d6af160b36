//! Typed answers: an agent whose profile (or spawn) has an output schema is told the
//! schema, asked for it through its provider's mechanism (OpenAI-compatible:
//! `response_format` with a `json_schema`; Anthropic: a `report_result` tool whose
//! input is the schema), and its final answer is checked against it. An answer that
//! does not match is sent back once with the errors; a second one ends the agent
//! `invalid_output`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{json, Value};

use crate::config::OutputSchema;
use crate::llm::{ChatRequest, LlmError, Message, Provider, ToolCall, ToolDefinition};

/// The tool a provider with no structured-output parameter reports a typed answer
/// with.
pub(crate) const REPORT_TOOL: &str = "report_result";

/// The property a schema that does not describe an object is wrapped in, as a
/// tool's input must be an object.
const WRAPPED: &str = "result";

/// What an agent with an output schema is asked for, and how far it got.
pub(super) struct TypedAnswer {
    /// The schema its answer must match.
    schema: OutputSchema,
    /// Whether the answer comes as a [`REPORT_TOOL`] call (else as the answer's text).
    by_tool: bool,
    /// Whether the schema is wrapped in a [`WRAPPED`] property for the report tool.
    wrapped: bool,
    /// Whether it was already sent back once with the errors.
    reasked: bool,
}

/// What an answer comes to.
pub(super) enum Settled {
    /// It matches: the agent ends with this value.
    Valid(Value),
    /// It did not match and was sent back with the errors: the loop goes on.
    Reasked,
    /// It did not match again: the agent ends `invalid_output` with this error and
    /// the raw answer.
    Invalid {
        /// The validation errors, in a sentence and a list.
        error: String,
        /// What it answered.
        raw: String,
    },
}

impl TypedAnswer {
    /// The typed answer of an agent with `schema` on `provider`; `None` without one.
    pub(super) fn new(schema: Option<&OutputSchema>, provider: &dyn Provider) -> Option<Self> {
        let schema = schema?.clone();
        let wrapped = schema.value()["type"] != "object";
        Some(TypedAnswer {
            schema,
            by_tool: provider.answers_by_tool(),
            wrapped,
            reasked: false,
        })
    }

    /// Tells the model the schema (system prompt) and asks for it the provider's way.
    pub(super) fn prepare(&self, request: &mut ChatRequest) {
        let how = if self.by_tool {
            format!("when you are done, call the `{REPORT_TOOL}` tool once with your answer as its arguments")
        } else {
            "your final message is only that JSON value: no prose, no code fences".to_string()
        };
        let block = format!(
            "<output_schema>\nYour final answer is data, read by a program: {how}. It must be JSON matching this JSON Schema:\n{}\n</output_schema>",
            self.schema.compact()
        );
        if request.system.trim().is_empty() {
            request.system = block;
        } else {
            request.system = format!("{}\n\n{block}", request.system);
        }
        if self.by_tool {
            let input_schema = if self.wrapped {
                json!({"type": "object", "properties": {WRAPPED: self.schema.value()}, "required": [WRAPPED]})
            } else {
                self.schema.value().clone()
            };
            request.tools.push(ToolDefinition {
                name: REPORT_TOOL.into(),
                description: "Report your final answer, as the arguments of this call. Call it once, when you are done: it ends your work.".into(),
                input_schema: Arc::new(input_schema),
            });
        } else {
            request.answer_schema = Some(self.schema.shared());
        }
    }

    /// The report call among `calls`, when the answer comes as one.
    pub(super) fn report<'a>(&self, calls: &'a [ToolCall]) -> Option<&'a ToolCall> {
        calls
            .iter()
            .find(|call| self.by_tool && call.name == REPORT_TOOL)
    }

    /// Checks the answer of a turn that made no calls but `calls`' report call (if
    /// any): its arguments, else `text`. Every call of the turn gets its result in
    /// `request` (the others are not run: a report ends the turn); an answer that
    /// does not match is sent back once with the errors. The check runs on a
    /// blocking thread (its cost is bounded by `MAX_SCHEMA_CHECK_STEPS`), so the
    /// agent's `timeout_s` and cancellation stop the wait for it.
    pub(super) async fn settle(
        &mut self,
        calls: &[ToolCall],
        text: &str,
        request: &mut ChatRequest,
    ) -> Settled {
        let report = self.report(calls);
        let raw = report.map_or(text, |call| call.arguments.as_str());
        let checked = match self.parse(raw, report.is_some()) {
            Ok(value) => {
                let schema = self.schema.clone();
                tokio::task::spawn_blocking(move || {
                    schema
                        .check(&value)
                        .map(|()| value)
                        .map_err(|errors| errors.join("\n"))
                })
                .await
                .unwrap_or_else(|error| Err(format!("checking the answer failed: {error}")))
            }
            Err(error) => Err(error),
        };
        let again = checked.is_err() && !self.reasked;
        for call in calls {
            let (content, is_error) = match (&checked, call.name == REPORT_TOOL) {
                (Ok(_), true) => ("Recorded.".to_string(), false),
                (Err(errors), true) => (Self::correction(errors, again), true),
                (_, false) => (
                    format!("Not run: `{REPORT_TOOL}` in the same reply ends your work."),
                    true,
                ),
            };
            request.messages.push(Message::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            });
        }
        match checked {
            Ok(value) => Settled::Valid(value),
            Err(errors) if again => {
                self.reasked = true;
                if report.is_none() {
                    let how = if self.by_tool {
                        format!("Call `{REPORT_TOOL}` with it as its arguments")
                    } else {
                        "Answer with only the JSON value".to_string()
                    };
                    request.messages.push(Message::User(format!(
                        "{}\n{how}.",
                        Self::correction(&errors, true)
                    )));
                }
                Settled::Reasked
            }
            Err(errors) => Settled::Invalid {
                error: format!(
                    "invalid output: the answer does not match the output schema, after one correction:\n{errors}"
                ),
                raw: raw.to_string(),
            },
        }
    }

    /// The answer as JSON: a report call's arguments (unwrapped), or the text (a
    /// single fenced code block is taken for its content).
    fn parse(&self, raw: &str, reported: bool) -> Result<Value, String> {
        let text = raw.trim();
        let text = text
            .strip_prefix("```json")
            .or_else(|| text.strip_prefix("```"))
            .and_then(|t| t.strip_suffix("```"))
            .map_or(text, str::trim);
        if text.is_empty() {
            return Err("at /: the answer is empty; it must be JSON".into());
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| format!("at /: the answer is not JSON ({e})"))?;
        match value {
            Value::Object(mut map) if reported && self.wrapped => map
                .remove(WRAPPED)
                .ok_or_else(|| format!("at /: `{WRAPPED}` is missing from the report")),
            value => Ok(value),
        }
    }

    /// What the model is told of an answer that does not match.
    fn correction(errors: &str, again: bool) -> String {
        let next = if again {
            "Give your answer again, corrected."
        } else {
            "Your work has ended."
        };
        format!("Your answer does not match the output schema:\n{errors}\n{next}")
    }
}

/// Whether `error` is a server refusing `response_format`: if so the request's
/// schema is dropped (the agent goes on with the schema in its prompt and its answer
/// still checked), logged once per model, and the turn is sent again.
pub(super) fn drop_response_format(
    request: &mut ChatRequest,
    error: &LlmError,
    model: &str,
) -> bool {
    if request.answer_schema.is_none() || !error.rejects_response_format() {
        return false;
    }
    request.answer_schema = None;
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    if WARNED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(model.to_string())
    {
        tracing::warn!(model, "the server refused `response_format`; typed answers are asked for in the prompt only, and still checked: {error}");
    }
    true
}
