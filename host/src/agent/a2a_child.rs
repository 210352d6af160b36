//! A sub-agent whose profile names a remote A2A agent (`[profiles.NAME.a2a]`): no
//! model runs it here. Its task goes to the agent as an A2A 1.0 message (JSON-RPC
//! binding, streamed when its card says it streams), each status the agent reports
//! is published as the child's text, and its answer (its artifacts' text, else its
//! last status message) is the child's result. The bearer token is read from the
//! environment variable the profile names when the child starts, and never logged;
//! the child's W3C trace context goes along as `traceparent`.
//!
//! Talking to it is A2A's own:
//! - a queued message or a follow-up sent while its task works is sent to that task
//!   (`SendMessage` with its `taskId`); the sender's receipt says so, or that the
//!   agent refused it;
//! - an interrupt cancels the remote task (`CancelTask`: A2A has no other way to
//!   cut an agent short) and sends the message as a new task in the same context;
//! - a follow-up to a child that finished wakes it: a new task in the same
//!   context (`contextId`), as A2A continues a conversation;
//! - a task that waits for input (`INPUT_REQUIRED`) becomes a question for a
//!   person, asked, journaled and answered as `ask_person`'s are (`warren
//!   approve`, the web view, an MCP or A2A client); the answer goes to the task,
//!   and with none the child fails saying so.
//!
//! Cancelling the child, or its `timeout_s` passing, cancels the remote task.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tracing::Instrument as _;

use super::a2a_talk::{delivered, letter_text, refused, Asker};
use super::a2a_wire::{
    cancelled, failed, find_event_end, lock, read_bounded, result, timed_out, unreachable_agent,
    Answer, Stop, MAX_READ,
};
use crate::config::RemoteAgent;
use crate::events::MessageMode;
use crate::jobs::mailbox::{Letter, Room};
use crate::jobs::Placement;
use crate::outcome::{AgentOutcome, AgentState};
use crate::scheduler::{AgentRun, Ended, Scheduler, Start};

/// How often a task that is not streamed is polled.
const POLL: Duration = Duration::from_millis(250);
/// How long a `CancelTask` sent on the way out may take.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// How long a message forwarded to the running remote task may wait for the
/// agent to take it (an agent may hold it until its current step ends).
const FORWARD_WAIT: Duration = Duration::from_secs(30);

/// What a remote child runs with besides its job: the scheduler (that lends its
/// slot out while a person is asked).
pub(super) type Host = Arc<dyn AsRef<Scheduler> + Send + Sync>;

/// The run of the child `start` describes, on `remote`.
pub(super) fn run(host: Host, start: Start, remote: RemoteAgent) -> AgentRun {
    let link = Link {
        http: reqwest::Client::new(),
        remote,
        token: None,
        endpoint: String::new(),
        streams: false,
        traceparent: None,
        current: Mutex::default(),
        context: Mutex::default(),
        tasks: Mutex::new(0),
        interrupted: Mutex::default(),
        pending: Mutex::default(),
        in_flight: Mutex::default(),
        naming: Mutex::default(),
    };
    let task = start.task.clone();
    episode(host, start, link, Some(task))
}

/// What a remote child keeps between its runs (a follow-up wakes it): where the
/// agent is, its token, and the A2A context its tasks share.
struct Link {
    http: reqwest::Client,
    remote: RemoteAgent,
    /// The bearer token, once read.
    token: Option<String>,
    /// The JSON-RPC URL the card names (empty until the card is read).
    endpoint: String,
    /// Whether the card says the agent streams.
    streams: bool,
    traceparent: Option<String>,
    /// The remote task now running, once known.
    current: Mutex<Option<String>>,
    /// The remote context, once known: later tasks continue it.
    context: Mutex<Option<String>>,
    /// Remote tasks sent so far (a message is "read in" the task it went with).
    tasks: Mutex<u32>,
    /// The interrupt that cancelled the current task, to send next.
    interrupted: Mutex<Option<Letter>>,
    /// Letters taken from the mailbox, not yet passed on.
    pending: Mutex<VecDeque<Letter>>,
    /// The letter being passed on now.
    in_flight: Mutex<Option<Letter>>,
    /// Whether a task was sent that the agent has not named yet.
    naming: Mutex<bool>,
}

/// One run of the child: `text` (with `None`, the follow-ups that woke it) sent to
/// the agent as a new task, followed to its end; it may be woken again after an
/// answer.
fn episode(host: Host, start: Start, mut link: Link, text: Option<String>) -> AgentRun {
    Box::pin(async move {
        let place = start.place.clone();
        let name = start.role.profile.name.clone();
        let span = tracing::info_span!(
            parent: start.parent_span.as_ref().and_then(tracing::Span::id),
            "invoke_agent",
            otel.name = format!("invoke_agent {name}"),
            otel.kind = "client",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %name,
            gen_ai.agent.id = %place.id,
            gen_ai.conversation.id = %place.tree.run_id,
            warren.depth = start.role.depth,
            warren.run.id = %place.tree.run_id,
            warren.remote = "a2a",
            server.address = %link.remote.card_url,
            error.type = tracing::field::Empty,
        );
        let timeout = Duration::from_secs(start.role.limits.timeout_s);
        let began = Instant::now();
        let outcome = async {
            link.traceparent = crate::telemetry::traceparent(&tracing::Span::current());
            let asker = Asker {
                scheduler: (*host).as_ref(),
                place: &place,
                timeout_s: start.role.profile.approval.timeout_s,
                profile: &name,
            };
            let deadline = tokio::time::Instant::now() + timeout;
            let connected = tokio::select! {
                connected = link.connect() => connected,
                () = place.cancel.cancelled() => Err(cancelled()),
                () = tokio::time::sleep_until(deadline) => Err(timed_out(timeout)),
            };
            let ended = match connected {
                Err(stop) => Err(stop),
                Ok(()) => {
                    let text = match text {
                        Some(text) => text,
                        None => link.woken_by(&place),
                    };
                    link.exchange_until(&asker, text, deadline, timeout).await
                }
            };
            if ended.is_err() {
                link.cancel_remote().await;
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
        // An answer may be followed up (a new task in the same context); any other
        // end is final.
        let wake: Option<crate::scheduler::Wake> =
            (outcome.state == AgentState::Ok).then(|| -> crate::scheduler::Wake {
                Box::new(move || episode(host, start, link, None))
            });
        Ended { outcome, wake }
    })
}

impl Link {
    /// Reads the token and the card (once): the JSON-RPC endpoint, and whether the
    /// agent streams.
    async fn connect(&mut self) -> Result<(), Stop> {
        if !self.endpoint.is_empty() {
            return Ok(());
        }
        if let Some(variable) = &self.remote.token_env {
            self.token = Some(std::env::var(variable).map_err(|_| {
                failed(format!(
                    "the remote A2A agent's bearer token is read from {variable}, which is not set in warren's environment"
                ))
            })?);
        }
        let card = self.card().await?;
        self.streams = card.pointer("/capabilities/streaming") == Some(&json!(true));
        Ok(())
    }

    /// The agent's card, and from it the JSON-RPC endpoint.
    async fn card(&mut self) -> Result<Value, Stop> {
        let url = &self.remote.card_url;
        let mut request = self.http.get(url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable_agent(url, &e))?;
        let status = response.status();
        let body = read_bounded(response).await?;
        if !status.is_success() {
            return Err(failed(format!(
                "the remote A2A agent's card at {url} answered HTTP {status}"
            )));
        }
        let card: Value = serde_json::from_slice(&body)
            .map_err(|e| failed(format!("the card at {url} is not JSON: {e}")))?;
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
        let Some(endpoint) = jsonrpc.and_then(|i| i["url"].as_str()) else {
            let offered: Vec<String> = interfaces
                .iter()
                .map(|i| format!("{} {}", i["protocolBinding"], i["protocolVersion"]))
                .collect();
            return Err(failed(format!(
                "the card at {url} offers no A2A 1.0 JSON-RPC interface (it offers: {}); warren speaks JSON-RPC",
                if offered.is_empty() { "none".into() } else { offered.join(", ") }
            )));
        };
        self.endpoint = endpoint.to_string();
        Ok(card)
    }

    /// The text of the follow-ups (and any message left since) that woke the
    /// child, each delivered with the task they go with.
    fn woken_by(&self, place: &Placement) -> String {
        let letters = place.mailbox.take(u32::MAX);
        let number = *lock(&self.tasks) + 1;
        let texts: Vec<String> = letters.iter().map(letter_text).collect();
        for letter in &letters {
            delivered(
                place,
                letter,
                number,
                "it is the agent's next task, in the same context",
            );
        }
        texts.join("\n\n")
    }

    /// Sends `text` as a new task and follows it to its answer, forwarding the
    /// messages left for the child meanwhile. An interrupt's message is the next
    /// task, and so are the letters a follow-up among those left when the task
    /// answered (the child does not finish before it reads a follow-up); other
    /// letters left go back to the mailbox, undelivered when the child rests.
    async fn exchange(&self, asker: &Asker<'_>, mut text: String) -> Result<String, Stop> {
        let place = asker.place;
        loop {
            let message = self.message(&text, None);
            let followed = tokio::select! {
                followed = self.follow(asker, message) => followed,
                never = self.forward(place) => match never {},
            };
            if let Some(letter) = lock(&self.in_flight).take() {
                refused(place, &letter, "the remote task ended while this message was being sent to it: it may or may not have read it");
            }
            let mut left: Vec<Letter> = lock(&self.pending).drain(..).collect();
            left.extend(place.mailbox.take(u32::MAX));
            let interrupt = lock(&self.interrupted).take();
            let next = match (&followed, interrupt) {
                (Err((AgentState::Cancelled, _)) | Ok(_), Some(letter)) => {
                    std::iter::once(letter).chain(left).collect()
                }
                (Ok(_), None) if left.iter().any(|l| l.mode == MessageMode::FollowUp) => left,
                _ => {
                    for letter in left {
                        if let Err(why) = place.mailbox.post(letter, Room::UNBOUNDED, || {}) {
                            tracing::warn!(
                                why,
                                "a letter the remote child did not pass on could not be kept"
                            );
                        }
                    }
                    return followed;
                }
            };
            let number = *lock(&self.tasks) + 1;
            for letter in &next {
                delivered(
                    place,
                    letter,
                    number,
                    "it is the agent's next task, in the same context",
                );
            }
            let texts: Vec<String> = next.iter().map(letter_text).collect();
            text = texts.join("\n\n");
        }
    }

    /// [`Link::exchange`], cut when the child is cancelled or at `deadline`. A task
    /// sent but not yet named by the agent when it is cut is followed a little longer
    /// (up to [`CANCEL_WAIT`]) to learn its id, so that it is cancelled too.
    async fn exchange_until(
        &self,
        asker: &Asker<'_>,
        text: String,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Result<String, Stop> {
        let exchange = self.exchange(asker, text);
        tokio::pin!(exchange);
        let stop = tokio::select! {
            ended = &mut exchange => return ended,
            () = asker.place.cancel.cancelled() => cancelled(),
            () = tokio::time::sleep_until(deadline) => timed_out(timeout),
        };
        let named = async {
            while *lock(&self.naming) {
                tokio::select! {
                    _ = &mut exchange => break,
                    () = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
            }
        };
        let _ = tokio::time::timeout(CANCEL_WAIT, named).await;
        Err(stop)
    }

    /// A message of ours: `text`, to task `task` (else a new task), in the context.
    fn message(&self, text: &str, task: Option<&str>) -> Value {
        let mut message = json!({
            "messageId": crate::jobs::random_id(),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        });
        if let Some(context) = lock(&self.context).clone() {
            message["contextId"] = json!(context);
        }
        if let Some(task) = task {
            message["taskId"] = json!(task);
        }
        message
    }

    /// Sends `message` (a new task) and follows the task to its end: its answer.
    /// Each time it waits for input, a person is asked and the answer sent to it.
    async fn follow(&self, asker: &Asker<'_>, message: Value) -> Result<String, Stop> {
        *lock(&self.tasks) += 1;
        *lock(&self.current) = None;
        let mut answer = Answer::default();
        let mut message = message;
        // Until the agent names the task, a cancel waits to learn its id.
        *lock(&self.naming) = true;
        loop {
            self.send(&message, &mut answer, asker.place).await?;
            let Some(asked) = answer.asks() else {
                return answer.end();
            };
            let task = answer.task_id.clone().unwrap_or_default();
            let number = *lock(&self.tasks);
            let reply = asker
                .ask(&self.remote.card_url, number, &task, &asked)
                .await?;
            message = self.message(&reply, Some(&task));
            answer.go_on();
        }
    }

    /// Sends `message` and reads what comes back until the task settles (ends, or
    /// waits for input).
    async fn send(
        &self,
        message: &Value,
        answer: &mut Answer,
        place: &Placement,
    ) -> Result<(), Stop> {
        if self.streams {
            self.stream(message, answer, place).await?;
        } else {
            let result = self.rpc("SendMessage", json!({"message": message})).await?;
            self.take(answer, &result, place);
        }
        while answer.state.is_none() {
            let Some(id) = answer.task_id.clone() else {
                return Err(failed(
                    "the remote A2A agent answered with neither a task nor a message".into(),
                ));
            };
            tokio::time::sleep(POLL).await;
            // Its state, not its history: a long task's history is large.
            let task = self
                .rpc("GetTask", json!({"id": id, "historyLength": 0}))
                .await?;
            self.take(answer, &json!({"task": task}), place);
        }
        Ok(())
    }

    /// Takes `result` into `answer`, noting the task and context it names.
    fn take(&self, answer: &mut Answer, result: &Value, place: &Placement) {
        answer.take(result, place);
        if let Some(task) = &answer.task_id {
            lock(&self.current).get_or_insert_with(|| task.clone());
            *lock(&self.naming) = false;
        }
        if let Some(context) = &answer.context_id {
            lock(&self.context).get_or_insert_with(|| context.clone());
        }
    }

    /// Forwards the messages left for the child to its remote task as they come
    /// (once the task is known); an interrupt cancels the task instead, its message
    /// kept to be the next one. Never returns.
    async fn forward(&self, place: &Placement) -> Infallible {
        loop {
            place.mailbox.posted().await;
            let task = loop {
                if let Some(task) = lock(&self.current).clone() {
                    break task;
                }
                tokio::time::sleep(POLL).await;
            };
            let number = *lock(&self.tasks);
            lock(&self.pending).extend(place.mailbox.take(u32::MAX));
            loop {
                let Some(letter) = lock(&self.pending).pop_front() else {
                    break;
                };
                if letter.mode == MessageMode::Interrupt {
                    tracing::info!(task = %task, "an interrupt cancels the remote A2A task");
                    *lock(&self.interrupted) = Some(letter);
                    self.cancel_task(&task).await;
                    continue;
                }
                let params = json!({
                    "message": self.message(&letter_text(&letter), Some(&task)),
                    "configuration": {"returnImmediately": true},
                });
                *lock(&self.in_flight) = Some(letter);
                let sent =
                    tokio::time::timeout(FORWARD_WAIT, self.rpc("SendMessage", params)).await;
                let Some(letter) = lock(&self.in_flight).take() else {
                    continue;
                };
                match sent {
                    Ok(Ok(_)) => delivered(place, &letter, number, &format!("sent to the remote A2A agent's task {task}")),
                    Ok(Err((_, why))) => refused(place, &letter, &why),
                    Err(_) => refused(place, &letter, &format!(
                        "sent to the remote A2A agent's task {task}, which did not take it within {} s (it may still read it once its current step ends)",
                        FORWARD_WAIT.as_secs()
                    )),
                }
            }
        }
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
                crate::term::bounded(&String::from_utf8_lossy(&body), 300)
            )));
        }
        let response: Value = serde_json::from_slice(&body).map_err(|e| {
            failed(format!(
                "the remote A2A agent's answer to {method} is not JSON: {e}"
            ))
        })?;
        result(response, method)
    }

    /// `SendStreamingMessage`: reads the events until the task settles or the
    /// stream closes.
    async fn stream(
        &self,
        message: &Value,
        answer: &mut Answer,
        place: &Placement,
    ) -> Result<(), Stop> {
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
                self.take(answer, &result(response, "SendStreamingMessage")?, place);
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

    /// Cancels the remote task now running, if one was made (best effort, bounded).
    async fn cancel_remote(&self) {
        let current = lock(&self.current).clone();
        match current {
            Some(task) => self.cancel_task(&task).await,
            None => tracing::info!(
                "the remote A2A agent had named no task yet: nothing to cancel there"
            ),
        }
    }

    /// Cancels remote task `task` (best effort, bounded).
    async fn cancel_task(&self, task: &str) {
        let sent = tokio::time::timeout(
            CANCEL_WAIT,
            self.post("CancelTask", json!({"id": task})).send(),
        )
        .await;
        match sent {
            Ok(Ok(_)) => tracing::info!(task = %task, "cancelled the remote A2A task"),
            _ => tracing::warn!(task = %task, "could not cancel the remote A2A task"),
        }
    }
}
