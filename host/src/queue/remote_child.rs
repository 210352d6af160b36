//! The parent's side of one remote child: its job enqueued, its agents' events
//! mirrored into the run, its budget watched, and its outcome returned once.

use std::time::Instant;

use tokio::sync::mpsc;

use super::client::{failed_outcome, Notice, RemoteQueue};
use super::mirror::Mirror;
use super::wire::{job_id, JobData, WireLetter, CANCEL_GRACE, PARENT_POLL};
use crate::events::MessageMode;
use crate::events::{Answered, PersonAnswer, Verdict};
use crate::jobs::mailbox::{Letter, Room};
use crate::jobs::{Again, Backend, ChildSpec, JobHandle, JobId, Opened, Placement, RemoteEnd};
use crate::outcome::{AgentOutcome, AgentState};

/// Children run on workers: the job is enqueued, the remote agents' events are
/// mirrored into the parent's tree, and the job's outcome is returned once. A child
/// that finished ok comes back with its history (when it may take a follow-up), and
/// a follow-up runs it again, in a job of its own, from that history.
#[async_trait::async_trait]
impl Backend for RemoteQueue {
    async fn run(&self, job: &JobHandle, mut spec: ChildSpec) -> AgentOutcome {
        let again = spec.again.take();
        let kept = spec.kept.clone();
        let end = match again {
            None if job.place().tree.mode.continues() => self.run_again(job, spec).await,
            again => self.run_once(job, spec, again).await,
        };
        *kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = end.history;
        end.outcome
    }
}

impl RemoteQueue {
    /// A remote child of a resumed run: its job, then one job per follow-up its
    /// journal records, each re-attached to if an earlier process enqueued it, else
    /// enqueued now from the history the one before handed back. A follow-up that can
    /// no longer run (a result expired from Redis) is left unread, so the child's
    /// result names it as not delivered.
    async fn run_again(&self, job: &JobHandle, spec: ChildSpec) -> RemoteEnd {
        let place = job.place();
        let follow_ups: Vec<Letter> = place
            .tree
            .mode
            .recorded(&place.id)
            .map(|agent| agent.letters.iter())
            .into_iter()
            .flatten()
            .filter(|letter| letter.mode == MessageMode::FollowUp)
            .map(|letter| Letter::recorded(letter, 0))
            .collect();
        let mut end = self.run_once(job, spec.clone(), None).await;
        let mut follow_ups = follow_ups.into_iter();
        for (number, letter) in (1..).zip(follow_ups.by_ref()) {
            let _ = place.mailbox.post(letter, Room::UNBOUNDED, || {});
            let Some(history) = end.history.take() else {
                break;
            };
            let again = Again {
                history,
                earlier: end.outcome,
                number,
            };
            end = self.run_once(job, spec.clone(), Some(again)).await;
        }
        for letter in follow_ups {
            let _ = place.mailbox.post(letter, Room::UNBOUNDED, || {});
        }
        end
    }

    async fn run_once(&self, job: &JobHandle, spec: ChildSpec, again: Option<Again>) -> RemoteEnd {
        let max_turns = spec.limits.max_turns;
        let mut data = JobData::from_spec(spec);
        let place = job.place();
        data.keep_history = place.mailbox.follow_ups() < place.tree.limits.max_follow_ups;
        let earlier = again.as_ref().map(|again| again.earlier.clone());
        let suffix = again.as_ref().map(|again| format!("-f{}", again.number));
        if let Some(again) = again {
            resume_from(&mut data, again);
        }
        let mut end = run_remote(job, self, data, suffix.as_deref()).await;
        if let Some(earlier) = earlier {
            let outcome = &mut end.outcome;
            outcome.cost_usd += earlier.cost_usd;
            outcome.usage = outcome.usage + earlier.usage;
            outcome.duration += earlier.duration;
        }
        // One more follow-up needs a turn left.
        if end.outcome.state != AgentState::Ok || end.outcome.turns >= max_turns {
            end.history = None;
        }
        end
    }
}

/// A follow-up's job: the child opens with `again`'s history and reads the letters
/// waiting for it first; what its earlier runs spent and took counts against its
/// limits.
fn resume_from(data: &mut JobData, again: Again) {
    let earlier = &again.earlier;
    if let Some(max) = data.limits.max_cost_usd.as_mut() {
        *max = (*max - earlier.cost_usd).max(0.0);
    }
    if let Some(timeout) = data.limits.timeout_s.as_mut() {
        *timeout = timeout.saturating_sub(earlier.duration.as_secs()).max(1);
    }
    data.history = Some(again.history);
}

async fn run_remote(
    job: &JobHandle,
    queue: &RemoteQueue,
    mut data: JobData,
    follow_up: Option<&str>,
) -> RemoteEnd {
    data.heartbeat = Some(queue.heartbeat.clone());
    let started = Instant::now();
    let child = job.place();
    let mut id = job_id(&child.tree.run_id, &child.id.0);
    id.push_str(follow_up.unwrap_or_default());
    if child.tree.mode.continues() {
        queue.adopt(&id).await;
    }
    let mut notices = queue.watch(&id);
    let mut mirror = Mirror::new(job);
    if follow_up.is_some() {
        // The letters that woke it go with the job: its first turn reads them.
        for letter in child.mailbox.take(u32::MAX) {
            data.letters.push(wire_letter(&letter));
            mirror.forwarded.insert(letter.seq, letter);
        }
    }
    let mut relay = Relay::new();
    let mut end = wait_remote(
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
    let outcome = &mut end.outcome;
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
    end
}

async fn wait_remote(
    child: &Placement,
    queue: &RemoteQueue,
    id: &str,
    data: &JobData,
    notices: &mut mpsc::UnboundedReceiver<Notice>,
    mirror: &mut Mirror<'_>,
    relay: &mut Relay,
) -> RemoteEnd {
    if let Err(error) = queue
        .enqueue(id, data, child.tree.queue_job.as_deref())
        .await
    {
        return failed_outcome(format!("{error:#}")).into();
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
    let letters = mirror.letters.clone();
    loop {
        let watch = (&mut over_budget, &mut cancel_deadline);
        if let Some(end) = cancel_over_budget(child, queue, id, watch).await {
            return end;
        }
        let outcome = tokio::select! {
            _ = child.cancel.cancelled(), if cancel_deadline.is_none() => {
                cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                cancel(queue, id).await.map(RemoteEnd::from)
            }
            _ = async { tokio::time::sleep_until(cancel_deadline.expect("set")).await }, if cancel_deadline.is_some() => {
                Some(AgentOutcome {
                    error: Some(format!("cancelled; its worker did not confirm within {} s", CANCEL_GRACE.as_secs())),
                    ..AgentOutcome::cancelled_before_start()
                }.into())
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
                forward(child, queue, id, mirror, false).await;
                None
            }
            () = letters.notified() => {
                forward(child, queue, id, mirror, true).await;
                None
            }
            Some(answered) = relay.answers.recv() => {
                relay.post(queue, id, answered).await;
                None
            }
            _ = budget_check.tick() => None,
        };
        if let Some(mut end) = outcome {
            end.outcome = budget_outcome(end.outcome, over_budget);
            return end;
        }
    }
}

/// Once the run's budget is used up, cancels job `id` (once: `over_budget` says why,
/// and the cancel's deadline is set); the end of a job removed before any worker took
/// it.
async fn cancel_over_budget(
    child: &Placement,
    queue: &RemoteQueue,
    id: &str,
    (over_budget, cancel_deadline): (&mut Option<String>, &mut Option<tokio::time::Instant>),
) -> Option<RemoteEnd> {
    if over_budget.is_some() || cancel_deadline.is_some() {
        return None;
    }
    let reason = child.tree.budget.used_up()?;
    tracing::info!(job = %id, "{reason}: cancelling the remote job");
    *over_budget = Some(reason);
    *cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
    match queue.cancel(id).await {
        Ok(true) => {
            let outcome = AgentOutcome::cancelled_before_start();
            Some(budget_outcome(outcome, over_budget.clone()).into())
        }
        Ok(false) => None,
        Err(error) => {
            tracing::warn!(job = %id, "cancel: {error:#}");
            None
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

/// Forwards the messages left for the remote child (or, with `descendants`, for its
/// mirrored sub-agents) to its worker, through Redis; one that cannot be is reported
/// to its sender.
async fn forward(
    child: &Placement,
    queue: &RemoteQueue,
    id: &str,
    mirror: &mut Mirror<'_>,
    descendants: bool,
) {
    let letters = match descendants {
        true => mirror.letters_for_descendants(),
        false => {
            let letters = child.mailbox.take(u32::MAX);
            letters.into_iter().map(|l| (String::new(), l)).collect()
        }
    };
    for (agent, letter) in letters {
        let wire = WireLetter {
            agent: Some(agent).filter(|a| !a.is_empty()),
            ..wire_letter(&letter)
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

/// `letter` as it goes through Redis.
fn wire_letter(letter: &Letter) -> WireLetter {
    WireLetter {
        agent: None,
        seq: letter.seq,
        from: letter.from.clone(),
        mode: letter.mode,
        text: letter.text.clone(),
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
