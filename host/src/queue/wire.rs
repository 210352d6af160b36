//! The wire protocol between a parent and its workers, both sides of it: what warren
//! keeps in Redis beside BullMQ's own keys (cancel flags, heartbeats, sub-agent sets),
//! the payloads (job data, return value, event batches in job progress) and the
//! timings each side keeps. `queue::client` (the parent) and `crate::worker` use
//! only this to speak to each other.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::QueueConfig;
use crate::events::Event;
use crate::jobs::{ChildSpec, History};
use crate::llm::Usage;
use crate::outcome::{AgentOutcome, AgentState};
use crate::policy::Ceiling;

/// How often a waiting parent checks its job's state in Redis (events may be lost; the
/// job's hash is the truth).
pub(crate) const PARENT_POLL: Duration = Duration::from_secs(1);
/// How long a parent that cancelled a job waits for its worker to confirm.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_secs(15);
/// How often a worker sends a running job's events to its parent.
pub(crate) const EVENT_BATCH: Duration = Duration::from_millis(100);
/// How often a worker checks a running job's cancel key.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(250);
/// How often a worker checks a running job's parent heartbeat.
pub(crate) const HEARTBEAT_POLL: Duration = Duration::from_secs(1);

/// Most bytes of one job's data (as JSON) a worker takes: a job over it fails at
/// once, unrecoverably, naming the limit, before the worker reads it as a job or
/// sends any of it to a model (a 300 MB job was sent as a 300 MB prompt, and the busy
/// worker let its lock lapse so the job was taken again and again).
pub(crate) const MAX_JOB_DATA_BYTES: usize = 4 * 1024 * 1024;

/// Most bytes of JSON of the history a worker hands back for a follow-up: the
/// follow-up's job carries it, and must stay under [`MAX_JOB_DATA_BYTES`].
pub(crate) const MAX_HISTORY_BYTES: usize = 3 * 1024 * 1024;

/// Whether the history a job's agent left for a follow-up may be handed back: one
/// over [`MAX_HISTORY_BYTES`] is not (the agent ends for good, and a follow-up to it
/// is refused).
pub(crate) fn fits(id: &str, history: &History) -> bool {
    let bytes = serde_json::to_vec(history).map_or(usize::MAX, |json| json.len());
    if bytes > MAX_HISTORY_BYTES {
        tracing::warn!(job = %id, bytes, "the agent's history is over {MAX_HISTORY_BYTES} bytes of JSON: it is not kept, and a follow-up cannot resume it");
    }
    bytes <= MAX_HISTORY_BYTES
}

/// Why `data` may not be taken, when its JSON passes [`MAX_JOB_DATA_BYTES`]. Counted by
/// writing it out to a counter that stops at the limit, so nothing is allocated and
/// no more than the limit is walked.
pub(crate) fn data_too_large(data: &Value) -> Option<String> {
    /// Counts bytes written and refuses the write that passes the limit.
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            if self.0 > MAX_JOB_DATA_BYTES {
                return Err(std::io::ErrorKind::FileTooLarge.into());
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Counter(0), data).is_err().then(|| {
        format!(
            "the job's data is more than {MAX_JOB_DATA_BYTES} bytes of JSON (MAX_JOB_DATA_BYTES); a worker takes no job that large"
        )
    })
}

/// How often a parent renews its heartbeat: six times per `parent_timeout_s`, so a
/// few lost renewals do not orphan its jobs.
pub(crate) fn heartbeat_every(parent_timeout_s: u64) -> Duration {
    Duration::from_millis(parent_timeout_s * 1000 / 6)
}

/// The field of a job's progress object that carries its agents' events.
const EVENTS_FIELD: &str = "warren_events";
/// The field of a job's progress object that names the worker's run of this attempt:
/// the sub-agent jobs its agent enqueues have ids `RUN-AGENT`.
const RUN_FIELD: &str = "warren_run";

/// A batch of the events of run `run` as a job progress update (BullMQ publishes it
/// on the queue's event stream, where the parent reads it).
pub(crate) fn events_progress(run: &str, events: &[Event]) -> Value {
    serde_json::json!({ EVENTS_FIELD: events, RUN_FIELD: run })
}

/// A batch of events a job progress update carries, with the run they come from.
pub(crate) struct Progress {
    /// The worker's run of this attempt (`None` from a worker that did not say).
    pub(crate) run: Option<String>,
    pub(crate) events: Vec<Event>,
}

/// The events a job progress update carries: `None` when it carries none (progress
/// from another producer), an error when they do not parse.
pub(crate) fn progress_events(progress: &Value) -> Option<Result<Progress, serde_json::Error>> {
    let batch = progress.get(EVENTS_FIELD)?;
    let run = progress
        .get(RUN_FIELD)
        .and_then(Value::as_str)
        .map(str::to_string);
    Some(Vec::<Event>::deserialize(batch).map(|events| Progress { run, events }))
}

/// The id of the sub-agent job that agent `agent` of run `run` runs as.
pub(crate) fn job_id(run: &str, agent: &str) -> String {
    format!("{run}-{agent}")
}

/// This process's name in the queue (`HOST-PID`): a worker's default name, and the
/// start of a parent's heartbeat key.
pub(crate) fn process_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    format!("{host}-{}", std::process::id())
}

/// The BullMQ job name warren's jobs carry (Node producers may use any name).
pub(crate) const JOB_NAME: &str = "agent";

/// What starts the log line in which a worker leaves a cancelled job's outcome
/// ([`JobOutcome`] as JSON): BullMQ keeps no return value for a failed job, and a
/// cancelled job fails (unrecoverably, so it is not retried), as BullMQ's consumers
/// expect; warren's parent reads the agent's turns, usage and cost from this line.
pub(crate) const OUTCOME_LOG_PREFIX: &str = "warren outcome: ";

fn keep_for(seconds: u64) -> Option<bullmq::types::RemoveOnFinish> {
    Some(bullmq::types::RemoveOnFinish::Options(
        bullmq::types::KeepJobs {
            age: Some(seconds),
            count: None,
            limit: None,
        },
    ))
}

impl QueueConfig {
    /// The BullMQ connection options.
    pub(crate) fn connection(&self) -> bullmq::options::RedisConnectionOptions {
        bullmq::options::RedisConnectionOptions {
            url: self.redis.clone().unwrap_or_default(),
            ..Default::default()
        }
    }

    /// BullMQ's retention policy for finished jobs: older than `keep_results_s`, they
    /// are dropped (lazily, when a later job finishes). Producers set it on each job;
    /// workers set it too, for jobs from producers that did not.
    pub(crate) fn retention(&self) -> Option<bullmq::types::RemoveOnFinish> {
        keep_for(self.keep_results_s)
    }

    /// How long failed jobs stay (`None`: BullMQ keeps them).
    pub(crate) fn failed_retention(&self) -> Option<bullmq::types::RemoveOnFinish> {
        self.keep_failed_s.and_then(keep_for)
    }

    /// The set of the sub-agent jobs that job `id`'s agents enqueued.
    pub(crate) fn children_key(&self, id: &str) -> String {
        format!("bull:{}:warren:children:{id}", self.name)
    }

    /// The set of the sub-agent jobs that earlier attempts of job `id` enqueued (and a
    /// later attempt cancelled): the parent accounts for each in its tree.
    pub(crate) fn abandoned_key(&self, id: &str) -> String {
        format!("bull:{}:warren:abandoned:{id}", self.name)
    }

    /// The heartbeat key of parent process `id`.
    pub(crate) fn alive_key(&self, id: &str) -> String {
        format!("bull:{}:warren:alive:{id}", self.name)
    }

    /// How long warren's own keys for a job (cancel flag, sub-agent set) live: as long
    /// as its result, and at least an hour.
    pub(crate) fn marker_ttl_s(&self) -> u64 {
        self.keep_results_s.max(3600)
    }

    /// The hash of job `id` (BullMQ's layout).
    pub(crate) fn job_key(&self, id: &str) -> String {
        format!("bull:{}:{id}", self.name)
    }

    /// The key a parent sets to cancel job `id`.
    pub(crate) fn cancel_key(&self, id: &str) -> String {
        format!("bull:{}:warren:cancel:{id}", self.name)
    }

    /// The list of messages sent to the agent of running job `id`, oldest first.
    pub(crate) fn mail_key(&self, id: &str) -> String {
        format!("bull:{}:warren:mail:{id}", self.name)
    }

    /// The answers to the requests for a person of job `id`'s agents, for its worker.
    pub(crate) fn answers_key(&self, id: &str) -> String {
        format!("bull:{}:warren:answers:{id}", self.name)
    }
}

/// What a sub-agent job carries (the BullMQ job's `data`). Only `task` and `profile`
/// are required, so a Node producer can send `{task, profile}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobData {
    /// What to do.
    pub task: String,
    /// The profile, by name; the worker uses its own profile of that name. Empty (a
    /// producer that sends none): the worker's `[queue] default_profile`.
    #[serde(default)]
    pub profile: String,
    /// Only what the sub-agent needs (string or object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Rules the sub-agent must follow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    /// Added to the profile's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// A subset of the profile's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The parent's model (a `[models]` name), sent when the child takes it: its
    /// profile says `model: inherit`, or the spawn named no profile and the child runs
    /// as its parent. With `inherit_model` the worker runs the child on its model of
    /// that name, as a child in the parent's process would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether the child runs on `model` whatever the worker's profile names (a warren
    /// parent sets it with `model`; without it, `model` is used only when the worker's
    /// own profile says `model: inherit`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inherit_model: bool,
    /// The JSON Schema the sub-agent's answer must match (its return value's
    /// `output` is then that JSON); checked by the worker as a spawn's argument is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Limits; each only tightens the worker's profile.
    #[serde(default)]
    pub limits: JobLimits,
    /// What the parent's tools may touch: the child gets at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<Ceiling>,
    /// The parent's approval rule (`write_file`, `@network`, …): the child's calls
    /// need a person's yes wherever it or the worker's profile says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approval: Vec<String>,
    /// The spawning agent's job id (for the record and the worker's logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// How deep the agent is in its tree (0: a root). A job from another producer,
    /// which sends none, is a sub-agent handed work: depth 1, so it gets the sub-agent
    /// prompt and spawns only where `max_depth` allows a child to.
    #[serde(default = "handed_work_depth")]
    pub depth: u32,
    /// W3C trace context of the parent's `execute_tool spawn_agent` span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The parent process's heartbeat (the `ID` of `bull:NAME:warren:alive:ID`):
    /// while it runs it keeps that key alive; once the key expires, the worker
    /// cancels the job, as nobody is left to read its result. Absent (a Node
    /// producer): no such check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<String>,
    /// Whether the worker hands back the agent's history when it finishes ok (in
    /// its return value's `history`), so a follow-up can resume it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_history: bool,
    /// A follow-up's job: the agent opens with this history (its task is already
    /// in it) instead of its task ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<History>,
    /// ... and reads these messages first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub letters: Vec<WireLetter>,
    /// Fields warren does not know (other producers add their own): ignored, and
    /// logged once per field name by the worker.
    #[serde(flatten, skip_serializing)]
    pub unknown: std::collections::BTreeMap<String, Value>,
}

/// A job's limits, each absent unless set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct JobLimits {
    /// Model turns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Wall time of the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// Cost cap of the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// What is left of the parent run's budget, for the job's whole subtree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

/// A finished job's return value: the sub-agent's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobOutcome {
    /// How it ended: an [`AgentState`] name (`ok`, `invalid_output`, …).
    pub state: String,
    /// The final answer (or the last text); a typed answer's compact JSON.
    pub text: String,
    /// A typed answer (the job had an output schema), as JSON: a producer reads its
    /// fields from the return value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why it did not end well.
    #[serde(default)]
    pub error: Option<String>,
    /// Model turns.
    pub turns: u32,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Of those, cached.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Dollars spent by the agent and its descendants.
    pub cost_usd: f64,
    /// Wall time on the worker.
    pub duration_ms: u64,
    /// The worker that ran it.
    #[serde(default)]
    pub worker: String,
    /// The agent's history, when the job asked to keep it and it finished ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<History>,
}

/// A message to the agent of a job on a worker, as it goes through Redis: sent in
/// the parent's run, numbered there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct WireLetter {
    /// To which of the job's agents, by the worker's id for it (`None`: its root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent: Option<String>,
    /// Its number in the parent's run.
    pub(crate) seq: u64,
    /// Who sent it (an agent's path, or a person).
    pub(crate) from: String,
    /// How it is delivered.
    pub(crate) mode: crate::events::MessageMode,
    /// Its text.
    pub(crate) text: String,
}

impl WireLetter {
    /// The letter as the worker's agent reads it: sent now, by `from`.
    pub(crate) fn to_letter(&self) -> crate::jobs::mailbox::Letter {
        crate::jobs::mailbox::Letter {
            seq: self.seq,
            from: self.from.clone(),
            sender: None,
            sent: std::time::SystemTime::now(),
            text: self.text.clone(),
            mode: self.mode,
            due: 0,
        }
    }

    /// The letters of a job's mail as Redis held them (`job` names it in the warning
    /// for one that is not a letter, which is dropped).
    pub(crate) fn read_all(lines: Vec<String>, job: &str) -> Vec<WireLetter> {
        lines
            .iter()
            .filter_map(|line| match serde_json::from_str(line) {
                Ok(letter) => Some(letter),
                Err(error) => {
                    tracing::warn!(%job, %error, "a message in Redis that is not one: dropped");
                    None
                }
            })
            .collect()
    }
}

/// A look at a running job as Redis answers it: its cancel key is set, its hash
/// exists, its `finishedOn` and `failedReason`, the messages taken from its mail and
/// the answers taken from its answers.
pub(crate) type JobLook = (
    bool,
    bool,
    (Option<String>, Option<String>),
    Option<Vec<String>>,
    Option<Vec<String>>,
);

/// Messages a worker takes from a job's mail at each look.
pub(crate) const MAIL_PER_POLL: usize = 32;

/// What a worker finds when it looks at a running job: why it must stop, if it
/// must, and the messages sent to its agent since the last look.
#[derive(Debug, Default)]
pub(crate) struct JobPoll {
    /// Why it must stop.
    pub(crate) stop: Option<StopRequest>,
    /// Messages for its agent, oldest first.
    pub(crate) mail: Vec<WireLetter>,
    /// A person's answers to requests its agents wait on, given in the parent's run.
    pub(crate) answers: Vec<crate::events::Answered>,
}

/// Why a worker stops a running job (`RemoteQueue::poll_job`).
#[derive(Debug, PartialEq)]
pub(crate) enum StopRequest {
    /// The parent asked (its cancel key is set).
    Parent,
    /// Another client ended or removed the job; why, in words.
    EndedElsewhere(String),
}

impl StopRequest {
    /// What a worker reads of a running job: whether its cancel key is set, whether
    /// its hash still exists, whether it has a `finishedOn`, and its `failedReason`.
    /// The parent's cancel key, or another client that finished or removed the job
    /// (a producer's BullMQ `job.moveToFailed(error, "0")`: a job some other client
    /// ended is not the worker's to finish), stops it.
    pub(crate) fn of(
        cancel: bool,
        exists: bool,
        finished: bool,
        failed_reason: Option<String>,
    ) -> Option<StopRequest> {
        if cancel {
            return Some(StopRequest::Parent);
        }
        if !exists {
            let why = "the job was removed from the queue";
            return Some(StopRequest::EndedElsewhere(why.into()));
        }
        finished.then(|| {
            StopRequest::EndedElsewhere(match failed_reason {
                Some(reason) => format!("another client moved the job to failed: {reason}"),
                None => "another client finished the job".into(),
            })
        })
    }
}

impl JobOutcome {
    /// The outcome a worker left in a job's log (`OUTCOME_LOG_PREFIX`), if a line of
    /// `lines` is one.
    pub(crate) fn from_log(lines: &[String]) -> Option<JobOutcome> {
        lines
            .iter()
            .find_map(|line| serde_json::from_str(line.strip_prefix(OUTCOME_LOG_PREFIX)?).ok())
    }

    /// The return value for `outcome`; `cost_usd` is the whole subtree's.
    pub(crate) fn new(outcome: &AgentOutcome, cost_usd: f64, worker: &str) -> JobOutcome {
        JobOutcome {
            state: outcome.state.as_str().into(),
            text: outcome.text.clone(),
            output: outcome.output.clone(),
            error: outcome.error.clone(),
            turns: outcome.turns,
            input_tokens: outcome.usage.input_tokens,
            cached_input_tokens: outcome.usage.cached_input_tokens,
            output_tokens: outcome.usage.output_tokens,
            cost_usd,
            duration_ms: outcome.duration.as_millis() as u64,
            worker: worker.into(),
            history: None,
        }
    }

    /// Back to an agent outcome.
    pub(crate) fn into_outcome(self) -> AgentOutcome {
        let state = AgentState::from_name(&self.state).unwrap_or(AgentState::Error);
        AgentOutcome {
            state,
            text: self.text,
            output: self.output,
            error: self.error,
            turns: self.turns,
            usage: Usage {
                input_tokens: self.input_tokens,
                cached_input_tokens: self.cached_input_tokens,
                output_tokens: self.output_tokens,
            },
            cost_usd: self.cost_usd,
            duration: Duration::from_millis(self.duration_ms),
        }
    }
}

/// The depth of a job that names none: a sub-agent's (see [`JobData::depth`]).
fn handed_work_depth() -> u32 {
    1
}

impl JobData {
    /// The job that runs `spec` on a worker.
    pub(crate) fn from_spec(spec: ChildSpec) -> JobData {
        JobData {
            task: spec.task,
            profile: spec.profile,
            context: spec.context,
            constraints: spec.constraints,
            system_prompt: spec.system_prompt,
            tools: spec.tools,
            inherit_model: spec.model.is_some(),
            model: spec.model,
            output_schema: spec.output_schema.map(|schema| schema.value().clone()),
            limits: JobLimits {
                max_turns: Some(spec.limits.max_turns),
                timeout_s: Some(spec.limits.timeout_s),
                max_cost_usd: spec.limits.max_cost_usd,
                budget_usd: spec.budget_usd,
            },
            ceiling: Some(Ceiling::of(&spec.ceiling)),
            approval: spec.approval.written(),
            parent: Some(spec.parent.0),
            depth: spec.depth,
            traceparent: spec.traceparent,
            heartbeat: None,
            keep_history: false,
            history: None,
            letters: Vec::new(),
            unknown: Default::default(),
        }
    }
}

/// A child's spec as a backend ships it: the job data that runs it on a worker.
impl Serialize for ChildSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        JobData::from_spec(self.clone()).serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_batches_go_through_job_progress_and_back() {
        let events = vec![
            Event::TurnStarted {
                agent: "a1".into(),
                turn: 2,
            },
            // Its figures are flattened into it, and come back whole.
            Event::ToolCallFinished {
                agent: "a1".into(),
                call_id: "c1".into(),
                tool: "read".into(),
                outcome: crate::sandbox::ToolOutcome::Ok,
                summary: "ok".into(),
                duration_ms: 3,
                figures: crate::sandbox::CallFigures {
                    fuel_used: Some(7),
                    output_bytes: 2,
                    memory_peak_bytes: Some(65536),
                },
            },
            Event::agent_finished("a1", &AgentOutcome::cancelled_before_start()),
        ];
        let progress = events_progress("run1", &events);
        let back = progress_events(&progress).unwrap().unwrap();
        assert_eq!((back.run.as_deref(), back.events), (Some("run1"), events));
        assert!(
            progress_events(&serde_json::json!({"percent": 40})).is_none(),
            "progress from other producers carries no events"
        );
        assert!(
            progress_events(&serde_json::json!({ EVENTS_FIELD: [{"type": "nope"}] }))
                .unwrap()
                .is_err()
        );
    }
}
