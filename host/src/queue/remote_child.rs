//! The parent's side of one remote child: its job enqueued, its agents' events
//! mirrored into the run, its budget watched, and its outcome returned once.

use std::time::Instant;

use tokio::sync::mpsc;

use super::client::{failed_outcome, Notice, RemoteQueue};
use super::mirror::Mirror;
use super::wire::{job_id, JobData, WireLetter, CANCEL_GRACE, PARENT_POLL};
use crate::events::{Answered, PersonAnswer, Verdict};
use crate::jobs::{Backend, ChildSpec, JobHandle, JobId, Opened, Placement};
use crate::outcome::{AgentOutcome, AgentState};

/// Children run on workers: the job is enqueued, the remote agents' events are
/// mirrored into the parent's tree, and the job's outcome is returned once.
#[async_trait::async_trait]
impl Backend for RemoteQueue {
    async fn run(&self, job: &JobHandle, spec: ChildSpec) -> AgentOutcome {
        run_remote(job, self, JobData::from_spec(spec)).await
    }
}

async fn run_remote(job: &JobHandle, queue: &RemoteQueue, mut data: JobData) -> AgentOutcome {
    data.heartbeat = Some(queue.heartbeat.clone());
    let started = Instant::now();
    let child = job.place();
    let id = job_id(&child.tree.run_id, &child.id.0);
    if child.tree.mode.continues() {
        queue.adopt(&id).await;
    }
    let mut notices = queue.watch(&id);
    let mut mirror = Mirror::new(job);
    let mut relay = Relay::new();
    let mut outcome = wait_remote(
        child,
        queue,
        &id,
        &data,
        &mut notices,
        &mut mirror,
        &mut relay,
    )
    .await;
    queue.unwatch(&id);
    // Events that arrived with the result reach the view before the end.
    while let Ok(Notice::Events(events)) = notices.try_recv() {
        mirror.apply(events);
    }
    if outcome.duration.is_zero() {
        outcome.duration = started.elapsed();
    }
    // The subtree's cost was charged turn by turn as its events came; charge what
    // they missed (events lost to a Redis restart, or sent after the result).
    child
        .tree
        .budget
        .charge((outcome.cost_usd - mirror.charged).max(0.0));
    mirror.settle_earlier_attempts(queue, &id).await;
    mirror.finish_descendants();
    outcome
}

async fn wait_remote(
    child: &Placement,
    queue: &RemoteQueue,
    id: &str,
    data: &JobData,
    notices: &mut mpsc::UnboundedReceiver<Notice>,
    mirror: &mut Mirror<'_>,
    relay: &mut Relay,
) -> AgentOutcome {
    if let Err(error) = queue
        .enqueue(id, data, child.tree.queue_job.as_deref())
        .await
    {
        return failed_outcome(format!("{error:#}"));
    }
    queue.added(id);
    tracing::info!(job = %id, profile = %data.profile, "queued on redis");
    // Wakes the loop to look at the run's budget, which other children spend too
    // (no Redis involved: the job's own end comes as a notice).
    let mut budget_check = tokio::time::interval(PARENT_POLL);
    let mut cancel_deadline: Option<tokio::time::Instant> = None;
    // Set when the run's budget ran out while the job ran: it is cancelled and ends
    // `budget_exceeded`, as an in-process agent would at its next turn.
    let mut over_budget: Option<String> = None;
    loop {
        let used_up = (over_budget.is_none() && cancel_deadline.is_none())
            .then(|| child.tree.budget.used_up())
            .flatten();
        if let Some(reason) = used_up {
            tracing::info!(job = %id, "{reason}: cancelling the remote job");
            over_budget = Some(reason);
            cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
            match queue.cancel(id).await {
                Ok(true) => {
                    return budget_outcome(AgentOutcome::cancelled_before_start(), over_budget)
                }
                Ok(false) => {}
                Err(error) => tracing::warn!(job = %id, "cancel: {error:#}"),
            }
        }
        let outcome = tokio::select! {
            _ = child.cancel.cancelled(), if cancel_deadline.is_none() => {
                cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                cancel(queue, id).await
            }
            _ = async { tokio::time::sleep_until(cancel_deadline.expect("set")).await }, if cancel_deadline.is_some() => {
                Some(AgentOutcome {
                    error: Some(format!("cancelled; its worker did not confirm within {} s", CANCEL_GRACE.as_secs())),
                    ..AgentOutcome::cancelled_before_start()
                })
            }
            Some(notice) = notices.recv() => match notice {
                Notice::Events(events) => {
                    mirror.apply(events);
                    relay.ask(child, mirror);
                    None
                }
                Notice::Finished => match queue.finished(id).await {
                    Ok(outcome) => outcome,
                    Err(error) => {
                        tracing::debug!(job = %id, "checking the job: {error:#}");
                        None
                    }
                },
            },
            () = child.mailbox.posted() => {
                forward(child, queue, id, mirror).await;
                None
            }
            Some(answered) = relay.answers.recv() => {
                relay.post(queue, id, answered).await;
                None
            }
            _ = budget_check.tick() => None,
        };
        if let Some(outcome) = outcome {
            return budget_outcome(outcome, over_budget);
        }
    }
}

/// Asks for job `id` to be cancelled: the outcome of a job removed before any worker
/// took it; `None` while its worker cancels it (or Redis did not answer).
async fn cancel(queue: &RemoteQueue, id: &str) -> Option<AgentOutcome> {
    match queue.cancel(id).await {
        Ok(true) => Some(AgentOutcome::cancelled_before_start()),
        Ok(false) => None,
        Err(error) => {
            tracing::warn!(job = %id, "cancel: {error:#}");
            None
        }
    }
}

/// Forwards the messages left for the remote child to its worker, through Redis; one
/// that cannot be is reported to its sender.
async fn forward(child: &Placement, queue: &RemoteQueue, id: &str, mirror: &mut Mirror<'_>) {
    for letter in child.mailbox.take(u32::MAX) {
        let wire = WireLetter {
            seq: letter.seq,
            from: letter.from.clone(),
            mode: letter.mode,
            text: letter.text.clone(),
        };
        match queue.post_mail(id, &wire).await {
            Ok(()) => {
                mirror.forwarded.insert(letter.seq, letter);
            }
            Err(error) => {
                tracing::warn!(job = %id, seq = letter.seq, "forwarding a message: {error:#}");
                let sender = letter
                    .sender
                    .as_ref()
                    .and_then(|s| child.tree.job(&JobId(s.clone())));
                if let Some(sender) = sender {
                    sender.mailbox.receipt(letter.seq, format!(
                        "Your message #{} to {} could not reach its worker ({error:#}): it was not delivered.",
                        letter.seq, child.id
                    ));
                }
            }
        }
    }
}

/// The requests for a person that the remote child's agents wait on, asked in this
/// run (its terminal, `warren approve`, the web view, its MCP client, or its
/// `--approve` policy), and the answers given here, posted to the child's worker.
struct Relay {
    sender: mpsc::UnboundedSender<Answered>,
    answers: mpsc::UnboundedReceiver<Answered>,
}

impl Relay {
    fn new() -> Relay {
        let (sender, answers) = mpsc::unbounded_channel();
        Relay { sender, answers }
    }

    /// Asks here each request the mirror saw the remote agents open, until its
    /// deadline; closes those they stopped waiting on.
    fn ask(&self, child: &Placement, mirror: &mut Mirror<'_>) {
        let requests = &child.tree.requests;
        for id in mirror.closed.drain(..) {
            requests.close(&id);
        }
        for request in mirror.asked.drain(..) {
            let (agent, id) = (request.agent.clone(), request.id.clone());
            let answered = move |answer| Answered {
                agent,
                request: id,
                answer,
            };
            let waiting = match requests.open(request.clone()) {
                Opened::Answered(answer) => {
                    let _ = self.sender.send(answered(answer));
                    continue;
                }
                Opened::Full(why) => {
                    let deny = PersonAnswer {
                        verdict: Verdict::Deny,
                        text: why,
                        by: "limit".into(),
                    };
                    let _ = self.sender.send(answered(deny));
                    continue;
                }
                Opened::Waiting(waiting) => waiting,
            };
            let (tree, sender) = (child.tree.clone(), self.sender.clone());
            let left = request.deadline_ms.saturating_sub(crate::events::now_ms());
            tokio::spawn(async move {
                let deadline = tokio::time::sleep(std::time::Duration::from_millis(left));
                tokio::select! {
                    Ok(answer) = waiting => drop(sender.send(answered(answer))),
                    () = deadline => {}
                }
                tree.requests.close(&request.id);
            });
        }
    }

    /// Leaves `answered` for the child's worker.
    async fn post(&self, queue: &RemoteQueue, id: &str, answered: Answered) {
        match queue.post_answer(id, &answered).await {
            Ok(()) => {
                tracing::info!(job = %id, request = %answered.request, "a person's answer sent to the worker")
            }
            Err(error) => {
                tracing::warn!(job = %id, request = %answered.request, "sending an answer: {error:#}")
            }
        }
    }
}

/// A job cancelled because the run's budget ran out ends `budget_exceeded`, saying so.
fn budget_outcome(outcome: AgentOutcome, over_budget: Option<String>) -> AgentOutcome {
    match over_budget {
        Some(reason) if outcome.state == AgentState::Cancelled => AgentOutcome {
            state: AgentState::BudgetExceeded,
            error: Some(reason),
            ..outcome
        },
        _ => outcome,
    }
}
