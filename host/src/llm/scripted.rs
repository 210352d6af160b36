//! The scripted provider (`provider = "scripted"`): replays assistant turns from a
//! TOML script, so demos and tests run offline and deterministically.
//!
//! ```toml
//! [[turns]]
//! profile = "researcher"        # optional: only answer this profile's agents
//! when = "solar"                # optional: only when the latest user/tool message contains this
//! text = "Reading the notes."
//! tool_calls = [{ name = "read_file", arguments = { path = "/docs/solar.md" } }]
//! usage = { input_tokens = 120, output_tokens = 30 }   # optional; else estimated
//! delay_ms = 300                # optional: simulated model latency
//! ```
//!
//! Each request takes the first unused turn that matches its profile and `when`;
//! with none left, the call fails with [`LlmError::ScriptExhausted`].

use std::path::PathBuf;
use std::sync::Mutex;

use serde::Deserialize;

use super::chat::{
    emit_whole, AssistantMessage, ChatRequest, ChatResponse, EventSink, FinishReason, Message,
    Price, ToolCall, Usage,
};
use super::error::LlmError;
use super::model::ModelConfig;

/// A model that replays a script.
pub(crate) struct Scripted {
    /// The model's name in the config.
    name: String,
    /// The script file, for messages.
    script: PathBuf,
    /// The turns and whether each was used.
    turns: Mutex<Vec<(Turn, bool)>>,
    /// For cost.
    price: Price,
    /// Numbers tool-call ids.
    next_call: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    turns: Vec<Turn>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    profile: Option<String>,
    when: Option<String>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
    usage: Option<ScriptedUsage>,
    #[serde(default)]
    delay_ms: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    name: String,
    #[serde(default)]
    arguments: serde_json::Map<String, serde_json::Value>,
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedUsage {
    input_tokens: u64,
    output_tokens: u64,
}

impl Scripted {
    /// Loads the script named by `config.script`.
    pub(crate) fn new(name: &str, config: &ModelConfig) -> Result<Self, LlmError> {
        let invalid = |message: String| LlmError::Config {
            model: name.to_string(),
            message,
        };
        let script = config
            .script
            .clone()
            .ok_or_else(|| invalid("a scripted model needs `script = \"file.toml\"`".into()))?;
        let text = std::fs::read_to_string(&script)
            .map_err(|e| invalid(format!("cannot read script {}: {e}", script.display())))?;
        let parsed: Script = toml::from_str(&text).map_err(|e| {
            invalid(format!(
                "{}: {}",
                script.display(),
                e.to_string().trim_end()
            ))
        })?;
        Ok(Scripted {
            name: name.to_string(),
            script,
            turns: Mutex::new(parsed.turns.into_iter().map(|t| (t, false)).collect()),
            price: config.price,
            next_call: Default::default(),
        })
    }

    /// The first unused turn of the script for this request (its profile, and its
    /// `when` text in the newest input), marked used; an error when none is left.
    fn next_turn(&self, request: &ChatRequest) -> Result<Turn, LlmError> {
        let input = latest_input(request);
        let mut turns = self.turns.lock().expect("script lock poisoned");
        let found = turns.iter_mut().find(|(turn, used)| {
            !*used
                && turn
                    .profile
                    .as_ref()
                    .is_none_or(|p| *p == request.requester.profile)
                && turn
                    .when
                    .as_ref()
                    .is_none_or(|w| input.contains(w.as_str()))
        });
        match found {
            Some((turn, used)) => {
                *used = true;
                Ok(turn.clone())
            }
            None => Err(LlmError::ScriptExhausted {
                model: self.name.clone(),
                script: self.script.display().to_string(),
                profile: request.requester.profile.clone(),
            }),
        }
    }
}

/// The text a `when` matcher looks at: the newest user or tool message.
fn latest_input(request: &ChatRequest) -> &str {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User(text) => Some(text.as_str()),
            Message::ToolResult { content, .. } => Some(content.as_str()),
            Message::Assistant(_) => None,
        })
        .unwrap_or_default()
}

#[async_trait::async_trait]
impl super::chat::Provider for Scripted {
    fn model(&self) -> &str {
        &self.name
    }

    fn provider_name(&self) -> &str {
        "warren.scripted"
    }

    /// A script sends nothing, so the digest is of the request as it stands (its
    /// system prompt, messages, tools and answer schema): a replay still sees a
    /// changed request.
    fn request_digest(&self, request: &ChatRequest) -> Option<String> {
        let text = format!(
            "{:?}\n{:?}\n{:?}\n{:?}",
            request.system, request.messages, request.tools, request.answer_schema
        );
        Some(super::transport::body_digest(text.as_bytes()))
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        events: &EventSink,
    ) -> Result<ChatResponse, LlmError> {
        let turn = self.next_turn(request)?;
        if turn.delay_ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(turn.delay_ms)).await;
        }
        let tool_calls: Vec<ToolCall> = turn
            .tool_calls
            .iter()
            .map(|call| ToolCall {
                id: format!(
                    "call_{}",
                    self.next_call
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                ),
                name: call.name.clone(),
                arguments: serde_json::Value::Object(call.arguments.clone()).to_string(),
            })
            .collect();
        // Without given figures, estimate about four characters per token.
        let usage = match turn.usage {
            Some(u) => Usage {
                input_tokens: u.input_tokens,
                cached_input_tokens: 0,
                output_tokens: u.output_tokens,
            },
            None => estimated_usage(request, &turn.text, &tool_calls),
        };
        let finish = if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        let message = AssistantMessage {
            text: turn.text,
            tool_calls,
            ..AssistantMessage::default()
        };
        emit_whole(events, &message, usage, &finish);
        let mut response = ChatResponse::priced(message, finish, usage, &self.price);
        response.request_digest = self.request_digest(request);
        Ok(response)
    }
}

/// Usage estimated at about four characters per token, of the request (system prompt
/// and messages) and of the answer (its text and calls' arguments).
fn estimated_usage(request: &ChatRequest, text: &str, tool_calls: &[ToolCall]) -> Usage {
    let prompt: usize = request.system.len()
        + request
            .messages
            .iter()
            .map(|m| match m {
                Message::User(t) => t.len(),
                Message::Assistant(a) => {
                    a.text.len()
                        + a.tool_calls
                            .iter()
                            .map(|c| c.arguments.len())
                            .sum::<usize>()
                }
                Message::ToolResult { content, .. } => content.len(),
            })
            .sum::<usize>();
    let output = text.len() + tool_calls.iter().map(|c| c.arguments.len()).sum::<usize>();
    Usage {
        input_tokens: prompt.div_ceil(4) as u64,
        cached_input_tokens: 0,
        output_tokens: output.div_ceil(4) as u64,
    }
}
