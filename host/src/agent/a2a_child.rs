//! A sub-agent whose profile names a remote A2A agent (`[profiles.NAME.a2a]`): no
//! model runs it here. Its task goes to the agent as an A2A 1.0 message (JSON-RPC
//! binding, streamed when its card says it streams), each status the agent reports
//! is published as the child's text, and its answer (its artifacts' text, else its
//! last status message) is the child's result. Cancelling the child, or its
//! `timeout_s` passing, cancels the remote task (`CancelTask`). The bearer token
//! is read from the environment variable the profile names when the child starts,
//! and never logged; the child's W3C trace context goes along as `traceparent`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tracing::Instrument as _;

use crate::config::RemoteAgent;
use crate::events::Event;
use crate::jobs::Placement;
use crate::outcome::{AgentOutcome, AgentState};
use crate::scheduler::{AgentRun, Ended, Start};

/// The largest card, JSON-RPC response or stream event read, in bytes.
const MAX_READ: usize = 1 << 20;
/// How often a task that is not streamed is polled.
const POLL: Duration = Duration::from_millis(250);
/// How long a `CancelTask` sent on the way out may take.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Why a remote task did not answer: the state it ends the child in, and why.
type Stop = (AgentState, String);

/// The run of the child `start` describes, on `remote`.
pub(super) fn run(start: Start, remote: RemoteAgent) -> AgentRun {
    Box::pin(async move {
        let place = start.place;
        let name = start.role.profile.name.clone();
        let span = tracing::info_span!(
            parent: start.parent_span.as_ref().and_then(tracing::Span::id),
            "invoke_agent",
            otel.name = format!("invoke_agent {name}"),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %name,
            gen_ai.agent.id = %place.id,
            gen_ai.conversation.id = %place.tree.run_id,
            warren.depth = start.role.depth,
            warren.run.id = %place.tree.run_id,
            warren.remote = "a2a",
            server.address = %remote.card_url,
            error.type = tracing::field::Empty,
        );
        let timeout = Duration::from_secs(start.role.limits.timeout_s);
        let began = Instant::now();
        let outcome = async {
            let mut call = Call {
                http: reqwest::Client::new(),
                remote: &remote,
                place: &place,
                token: None,
                traceparent: crate::telemetry::traceparent(&tracing::Span::current()),
                endpoint: String::new(),
                task_id: None,
            };
            let ended = tokio::select! {
                ended = call.run(&start.task) => ended,
                () = place.cancel.cancelled() => Err((AgentState::Cancelled, "cancelled".into())),
                () = tokio::time::sleep(timeout) => Err((
                    AgentState::TimedOut,
                    format!("the remote A2A agent did not answer within timeout_s = {} s", timeout.as_secs()),
                )),
            };
            if ended.is_err() {
                call.cancel_remote().await;
            }
            let (state, text, error) = match ended {
                Ok(text) => (AgentState::Ok, text, None),
                Err((state, error)) => {
                    tracing::Span::current().record("error.type", state.as_str());
                    (state, String::new(), Some(error))
                }
            };
            tracing::info!(state = state.as_str(), "remote A2A agent finished");
            AgentOutcome {
                state,
                text,
                output: None,
                error,
                turns: 0,
                usage: Default::default(),
                cost_usd: 0.0,
                duration: began.elapsed(),
            }
        }
        .instrument(span)
        .await;
        Ended {
            outcome,
            wake: None,
        }
    })
}

/// One child's conversation with its remote agent.
struct Call<'a> {
    http: reqwest::Client,
    remote: &'a RemoteAgent,
    place: &'a Placement,
    /// The bearer token, once read.
    token: Option<String>,
    traceparent: Option<String>,
    /// The JSON-RPC URL the card names.
    endpoint: String,
    /// The remote task's id, once known.
    task_id: Option<String>,
}

impl Call<'_> {
    /// Sends `task` and follows the remote task to its end: its answer.
    async fn run(&mut self, task: &str) -> Result<String, Stop> {
        if let Some(variable) = &self.remote.token_env {
            self.token = Some(std::env::var(variable).map_err(|_| {
                failed(format!(
                    "the remote A2A agent's bearer token is read from {variable}, which is not set in warren's environment"
                ))
            })?);
        }
        let card = self.card().await?;
        let message = json!({
            "messageId": crate::jobs::random_id(),
            "role": "ROLE_USER",
            "parts": [{"text": task}],
        });
        let streams = card.pointer("/capabilities/streaming") == Some(&json!(true));
        let mut answer = Answer::default();
        if streams {
            self.stream(&message, &mut answer).await?;
        } else {
            let result = self.rpc("SendMessage", json!({"message": message})).await?;
            answer.take(&result, self.place);
            self.task_id = answer.task_id.clone();
        }
        while answer.state.is_none() {
            let Some(id) = answer.task_id.clone() else {
                return Err(failed(
                    "the remote A2A agent answered with neither a task nor a message".into(),
                ));
            };
            tokio::time::sleep(POLL).await;
            let task = self.rpc("GetTask", json!({"id": id})).await?;
            answer.take(&json!({"task": task}), self.place);
        }
        answer.end()
    }

    /// The agent's card, and from it the JSON-RPC endpoint.
    async fn card(&mut self) -> Result<Value, Stop> {
        let mut request = self.http.get(&self.remote.card_url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable_agent(&self.remote.card_url, &e))?;
        let status = response.status();
        let body = read_bounded(response).await?;
        if !status.is_success() {
            return Err(failed(format!(
                "the remote A2A agent's card at {} answered HTTP {status}",
                self.remote.card_url
            )));
        }
        let card: Value = serde_json::from_slice(&body).map_err(|e| {
            failed(format!(
                "the card at {} is not JSON: {e}",
                self.remote.card_url
            ))
        })?;
        let interfaces = card["supportedInterfaces"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let jsonrpc = interfaces.iter().find(|i| {
            i["protocolBinding"] == "JSONRPC"
                && i["protocolVersion"]
                    .as_str()
                    .is_none_or(|v| v.starts_with('1'))
        });
        let Some(url) = jsonrpc.and_then(|i| i["url"].as_str()) else {
            let offered: Vec<String> = interfaces
                .iter()
                .map(|i| format!("{} {}", i["protocolBinding"], i["protocolVersion"]))
                .collect();
            return Err(failed(format!(
                "the card at {} offers no A2A 1.0 JSON-RPC interface (it offers: {}); warren speaks JSON-RPC",
                self.remote.card_url,
                if offered.is_empty() { "none".into() } else { offered.join(", ") }
            )));
        };
        self.endpoint = url.to_string();
        Ok(card)
    }

    /// A POST of `method` with `params` to the endpoint, with A2A's headers.
    fn post(&self, method: &str, params: Value) -> reqwest::RequestBuilder {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self
            .http
            .post(&self.endpoint)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(body.to_string());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(traceparent) = &self.traceparent {
            request = request.header("traceparent", traceparent);
        }
        request
    }

    /// Calls `method`: its result, or the agent's error.
    async fn rpc(&self, method: &str, params: Value) -> Result<Value, Stop> {
        let response = self
            .post(method, params)
            .send()
            .await
            .map_err(|e| unreachable_agent(&self.endpoint, &e))?;
        let status = response.status();
        let body = read_bounded(response).await?;
        if !status.is_success() {
            return Err(failed(format!(
                "the remote A2A agent answered {method} with HTTP {status}: {}",
                crate::events::bounded(&String::from_utf8_lossy(&body), 300)
            )));
        }
        let response: Value = serde_json::from_slice(&body).map_err(|e| {
            failed(format!(
                "the remote A2A agent's answer to {method} is not JSON: {e}"
            ))
        })?;
        result(response, method)
    }

    /// `SendStreamingMessage`: reads the events until the task ends (or waits for
    /// input) or the stream closes.
    async fn stream(&mut self, message: &Value, answer: &mut Answer) -> Result<(), Stop> {
        let mut response = self
            .post("SendStreamingMessage", json!({"message": message}))
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| unreachable_agent(&self.endpoint, &e))?;
        if !response.status().is_success() {
            return Err(failed(format!(
                "the remote A2A agent answered SendStreamingMessage with HTTP {}",
                response.status()
            )));
        }
        let mut buffer: Vec<u8> = Vec::new();
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| failed(format!("the remote A2A agent's stream broke: {e}")))?;
            let Some(chunk) = chunk else {
                return Ok(());
            };
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buffer) {
                let event: Vec<u8> = buffer.drain(..end).collect();
                let data: String = String::from_utf8_lossy(&event)
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect::<Vec<_>>()
                    .join("\n");
                if data.trim().is_empty() {
                    continue;
                }
                let response: Value = serde_json::from_str(&data).map_err(|e| {
                    failed(format!(
                        "an event of the remote A2A agent's stream is not JSON: {e}"
                    ))
                })?;
                answer.take(&result(response, "SendStreamingMessage")?, self.place);
                if self.task_id.is_none() {
                    self.task_id = answer.task_id.clone();
                }
                if answer.state.is_some() {
                    return Ok(());
                }
            }
            if buffer.len() > MAX_READ {
                return Err(failed(format!(
                    "an event of the remote A2A agent's stream passed {MAX_READ} bytes"
                )));
            }
        }
    }

    /// Cancels the remote task, if one was made (best effort, bounded).
    async fn cancel_remote(&self) {
        let Some(id) = &self.task_id else {
            tracing::info!("the remote A2A agent had named no task yet: nothing to cancel there");
            return;
        };
        let sent = tokio::time::timeout(
            CANCEL_WAIT,
            self.post("CancelTask", json!({"id": id})).send(),
        )
        .await;
        match sent {
            Ok(Ok(_)) => tracing::info!(task = %id, "cancelled the remote A2A task"),
            _ => tracing::warn!(task = %id, "could not cancel the remote A2A task"),
        }
    }
}

/// What the remote agent said so far.
#[derive(Default)]
struct Answer {
    task_id: Option<String>,
    /// Its end, once reached: the state and the status message's text.
    state: Option<(String, String)>,
    /// Its artifacts' text.
    artifacts: Vec<String>,
    /// Its last status message's text.
    status: String,
}

impl Answer {
    /// Takes in one result (`{"task"}`, `{"statusUpdate"}`, `{"artifactUpdate"}`,
    /// `{"message"}`), publishing the status text as the child's.
    fn take(&mut self, result: &Value, place: &Placement) {
        if let Some(message) = result.get("message") {
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
        let (status, id) = match (result.get("task"), result.get("statusUpdate")) {
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
                (&task["status"], task["id"].as_str())
            }
            (None, Some(update)) => (&update["status"], update["taskId"].as_str()),
            (None, None) => return,
        };
        if self.task_id.is_none() {
            self.task_id = id.map(str::to_string);
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

    /// The child's answer, or why there is none.
    fn end(self) -> Result<String, Stop> {
        let (state, status) = self.state.unwrap_or_default();
        match state.as_str() {
            "TASK_STATE_COMPLETED" => Ok(match self.artifacts.iter().any(|a| !a.is_empty()) {
                true => self.artifacts.join("\n"),
                false => status,
            }),
            "TASK_STATE_CANCELED" => Err((AgentState::Cancelled, format!("the remote A2A agent cancelled its task: {status}"))),
            "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED" => Err(failed(format!(
                "the remote A2A agent asks for input ({state}), which warren does not relay to a remote agent: {status}"
            ))),
            _ => Err(failed(format!("the remote A2A agent's task ended {state}: {status}"))),
        }
    }
}

/// The text parts of `parts`, joined.
fn texts(parts: &Value) -> String {
    let texts: Vec<&str> = parts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|part| part["text"].as_str())
        .collect();
    texts.join("\n")
}

/// The result of JSON-RPC `response`, or its error.
fn result(mut response: Value, method: &str) -> Result<Value, Stop> {
    if let Some(error) = response.get("error") {
        return Err(failed(format!(
            "the remote A2A agent refused {method}: {} ({})",
            crate::events::bounded(error["message"].as_str().unwrap_or_default(), 500),
            error["code"]
        )));
    }
    Ok(response["result"].take())
}

/// Where the first event of `buffer` ends (after its blank line).
fn find_event_end(buffer: &[u8]) -> Option<usize> {
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
async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, Stop> {
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

fn failed(why: String) -> Stop {
    (AgentState::Error, why)
}

fn unreachable_agent(url: &str, error: &reqwest::Error) -> Stop {
    failed(format!(
        "cannot reach the remote A2A agent at {url}: {error}"
    ))
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
