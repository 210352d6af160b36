//! What a remote A2A agent says, read: its answers (tasks, status and artifact
//! updates, messages) folded into what the child knows of its task, JSON-RPC
//! results and errors, Server-Sent Events, and bounded bodies.

use serde_json::Value;

use crate::events::Event;
use crate::jobs::Placement;
use crate::outcome::AgentState;

/// The largest card, JSON-RPC response or stream event read, in bytes.
pub(super) const MAX_READ: usize = 1 << 20;

/// Why a remote task did not answer: the state it ends the child in, and why.
pub(super) type Stop = (AgentState, String);

/// What the remote agent said so far.
#[derive(Default)]
pub(super) struct Answer {
    pub(super) task_id: Option<String>,
    /// Its context's id, once known.
    pub(super) context_id: Option<String>,
    /// Its end, once reached: the state and the status message's text.
    pub(super) state: Option<(String, String)>,
    /// Its artifacts' text.
    artifacts: Vec<String>,
    /// Its last status message's text.
    status: String,
}

impl Answer {
    /// Takes in one result (`{"task"}`, `{"statusUpdate"}`, `{"artifactUpdate"}`,
    /// `{"message"}`), publishing the status text as the child's.
    pub(super) fn take(&mut self, result: &Value, place: &Placement) {
        if let Some(message) = result.get("message") {
            self.context_id = message["contextId"].as_str().map(str::to_string);
            self.status = texts(&message["parts"]);
            self.state = Some(("TASK_STATE_COMPLETED".into(), self.status.clone()));
            return;
        }
        if let Some(update) = result.get("artifactUpdate") {
            let text = texts(&update["artifact"]["parts"]);
            match (update["append"].as_bool(), self.artifacts.last_mut()) {
                (Some(true), Some(last)) => last.push_str(&text),
                _ => self.artifacts.push(text),
            }
            return;
        }
        let (status, id, context) = match (result.get("task"), result.get("statusUpdate")) {
            (Some(task), _) => {
                let artifacts: Vec<String> = task["artifacts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| texts(&a["parts"]))
                    .collect();
                if !artifacts.is_empty() {
                    self.artifacts = artifacts;
                }
                (
                    &task["status"],
                    task["id"].as_str(),
                    task["contextId"].as_str(),
                )
            }
            (None, Some(update)) => (
                &update["status"],
                update["taskId"].as_str(),
                update["contextId"].as_str(),
            ),
            (None, None) => return,
        };
        if self.task_id.is_none() {
            self.task_id = id.map(str::to_string);
        }
        if self.context_id.is_none() {
            self.context_id = context.map(str::to_string);
        }
        let text = texts(&status["message"]["parts"]);
        if !text.is_empty() && text != self.status {
            place.tree.events.publish(Event::TextDelta {
                agent: place.id.to_string(),
                text: format!("{text}\n"),
            });
            self.status = text;
        }
        let state = status["state"].as_str().unwrap_or_default();
        let settled = [
            "TASK_STATE_COMPLETED",
            "TASK_STATE_FAILED",
            "TASK_STATE_CANCELED",
            "TASK_STATE_REJECTED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_AUTH_REQUIRED",
        ];
        if settled.contains(&state) {
            self.state = Some((state.to_string(), self.status.clone()));
        }
    }

    /// What the remote agent asks, when its task waits for input.
    pub(super) fn asks(&self) -> Option<String> {
        match &self.state {
            Some((state, status)) if state == "TASK_STATE_INPUT_REQUIRED" => Some(status.clone()),
            _ => None,
        }
    }

    /// The task goes on (its input was sent): it has not settled.
    pub(super) fn go_on(&mut self) {
        self.state = None;
    }

    /// The child's answer, or why there is none.
    pub(super) fn end(self) -> Result<String, Stop> {
        let (state, status) = self.state.unwrap_or_default();
        match state.as_str() {
            "TASK_STATE_COMPLETED" => Ok(match self.artifacts.iter().any(|a| !a.is_empty()) {
                true => self.artifacts.join("\n"),
                false => status,
            }),
            "TASK_STATE_CANCELED" => Err((
                AgentState::Cancelled,
                format!("the remote A2A agent cancelled its task: {status}"),
            )),
            "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED" => Err(failed(format!(
                "the remote A2A agent asks for input ({state}), and none was given: {status}"
            ))),
            _ => Err(failed(format!(
                "the remote A2A agent's task ended {state}: {status}"
            ))),
        }
    }
}

/// The text parts of `parts`, joined.
pub(super) fn texts(parts: &Value) -> String {
    let texts: Vec<&str> = parts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|part| part["text"].as_str())
        .collect();
    texts.join("\n")
}

/// The result of JSON-RPC `response`, or its error.
pub(super) fn result(mut response: Value, method: &str) -> Result<Value, Stop> {
    if let Some(error) = response.get("error") {
        return Err(failed(format!(
            "the remote A2A agent refused {method}: {} ({})",
            crate::term::bounded(error["message"].as_str().unwrap_or_default(), 500),
            error["code"]
        )));
    }
    Ok(response["result"].take())
}

/// Where the first event of `buffer` ends (after its blank line).
pub(super) fn find_event_end(buffer: &[u8]) -> Option<usize> {
    let lf = buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|at| at + 2);
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A response's body, at most [`MAX_READ`] bytes.
pub(super) async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, Stop> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| failed(format!("reading the remote A2A agent's answer failed: {e}")))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_READ {
            return Err(failed(format!(
                "the remote A2A agent's answer passed {MAX_READ} bytes"
            )));
        }
    }
    Ok(body)
}

pub(super) fn failed(why: String) -> Stop {
    (AgentState::Error, why)
}

pub(super) fn unreachable_agent(url: &str, error: &reqwest::Error) -> Stop {
    failed(format!(
        "cannot reach the remote A2A agent at {url}: {error}"
    ))
}

/// How a remote child ends when it is cancelled.
pub(super) fn cancelled() -> Stop {
    (AgentState::Cancelled, "cancelled".into())
}

/// How a remote child ends when its agent does not answer within `timeout`.
pub(super) fn timed_out(timeout: std::time::Duration) -> Stop {
    (
        AgentState::TimedOut,
        format!(
            "the remote A2A agent did not answer within timeout_s = {} s",
            timeout.as_secs()
        ),
    )
}

/// `mutex`'s guard, whether or not a holder panicked.
pub(super) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_end_at_a_blank_line_of_either_kind() {
        assert_eq!(find_event_end(b"data: {}\n\ndata: x"), Some(10));
        assert_eq!(find_event_end(b"data: {}\r\n\r\n"), Some(12));
        assert_eq!(find_event_end(b"data: {}\n"), None);
    }

    #[test]
    fn an_answer_is_the_artifacts_else_the_status() {
        let mut answer = Answer {
            state: Some(("TASK_STATE_COMPLETED".into(), "done".into())),
            ..Answer::default()
        };
        assert_eq!(answer.end().unwrap(), "done");
        answer = Answer {
            state: Some(("TASK_STATE_COMPLETED".into(), "done".into())),
            artifacts: vec!["ECHO: hi".into()],
            ..Answer::default()
        };
        assert_eq!(answer.end().unwrap(), "ECHO: hi");
        let failed = Answer {
            state: Some(("TASK_STATE_INPUT_REQUIRED".into(), "which one?".into())),
            ..Answer::default()
        };
        let (state, why) = failed.end().unwrap_err();
        assert_eq!(state, AgentState::Error);
        assert!(why.contains("which one?"), "{why}");
    }
}
