//! The spawn tools, exactly as the parent model sees them: `spawn_agent`,
//! `await_agents`, `cancel_agent`, `message_agent` and `list_agents`, each read from the model's
//! arguments, done by the scheduler, and its typed answer put in words. Argument
//! errors come back as tool errors the model can correct; `await_agents` never fails
//! itself.

use std::time::Duration;

use serde_json::{json, Value};

use super::runtime::Agent;
use crate::config::{Config, RunLimits, SPAWN_TOOLS};
use crate::events::MessageMode;
use crate::jobs::spawn_request::{text_arg, SpawnRequest};
use crate::jobs::{not_found_block, CancelJob, JobId, JobSelection, Phase};
use crate::llm::ToolDefinition;
use crate::scheduler::{Grant, Receipt, Until};

/// How whoever spawned a background child learns that it finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Its result is pushed into the parent model's next turn.
    Notified,
    /// The caller gets it with `await_agents` (a session's caller has no turns to
    /// push into).
    Awaited,
}

impl Delivery {
    /// What the spawn tool's description promises.
    fn promise(self) -> &'static str {
        match self {
            Delivery::Notified => "you are notified when it finishes",
            Delivery::Awaited => "you get its result with await_agents",
        }
    }

    /// What a background spawn's answer ends with, as a clause.
    fn next_step(self) -> &'static str {
        match self {
            Delivery::Notified => "you will be notified when it finishes.",
            Delivery::Awaited => {
                "get its result with await_agents (list_agents shows where it is)."
            }
        }
    }
}

/// The answer to a background spawn of `grant`, for a caller told of its end as
/// `delivery` says.
pub(crate) fn background_answer(grant: &Grant, delivery: Delivery, limits: &RunLimits) -> String {
    let (id, profile) = (&grant.id, &grant.profile);
    let next = delivery.next_step();
    let mut answer = if grant.queued {
        let (first, rest) = next.split_at(1);
        format!(
            "{QUEUED_ANSWER_START}{id} ({profile}) in the background. It is queued: as many sub-agents as allowed are running (max_concurrent = {} per run, max_concurrent_total = {} per host); it starts when a slot frees, after the jobs queued before it. {}{rest}",
            limits.max_concurrent,
            limits.max_concurrent_total,
            first.to_uppercase()
        )
    } else {
        format!("Started job {id} ({profile}) in the background; {next}")
    };
    for note in &grant.notes {
        answer.push(' ');
        answer.push_str(note);
    }
    answer
}

/// The answer to a foreground spawn of `grant`: what was not granted, then the
/// child's result block.
pub(crate) fn foreground_answer(grant: &Grant, block: String) -> String {
    match grant.notes.join(" ") {
        notes if notes.is_empty() => block,
        notes => format!("{notes}\n\n{block}"),
    }
}

/// What `await_agents` and `list_agents` answer when there is no job to report.
pub(crate) const NO_JOBS: &str = "No jobs found.";

/// The arguments of an `await_agents` call, read (it never fails: what cannot be read
/// is left at its default).
pub(crate) struct AwaitAsk {
    /// The jobs to wait for.
    pub(crate) jobs: JobSelection,
    /// How long to wait at most (`None`: until they end).
    pub(crate) timeout: Option<Duration>,
    /// Every job, or the first.
    pub(crate) until: Until,
}

impl AwaitAsk {
    /// `args` (a JSON object) read.
    pub(crate) fn parse(args: &Value) -> AwaitAsk {
        AwaitAsk {
            jobs: JobSelection::parse(&args["job_ids"]),
            timeout: args["timeout_s"]
                .as_f64()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .map(Duration::from_secs_f64),
            until: match args["until"].as_str() {
                Some("any") => Until::Any,
                _ => Until::All,
            },
        }
    }
}

/// How a background spawn's answer begins when the child had to queue for a slot.
pub(crate) const QUEUED_ANSWER_START: &str = "Queued job ";

/// The arguments of a `spawn_agent` call, read and checked; an `Err` is a tool error.
pub(crate) fn spawn_request(arguments: &str) -> Result<SpawnRequest, String> {
    SpawnRequest::parse(&arguments_object(arguments)?)
}

/// `arguments` as a JSON object; an `Err` is a tool error.
fn arguments_object(arguments: &str) -> Result<Value, String> {
    let args: Value = serde_json::from_str(arguments)
        .map_err(|e| format!("arguments are not valid JSON: {e}"))?;
    if !args.is_object() {
        return Err("arguments must be a JSON object".into());
    }
    Ok(args)
}

/// Whether `name` is `message_agent`, whose effect (a message accepted) is
/// journaled in its own right: a resumed run serves its recorded receipt rather than
/// sending the message again.
pub(crate) fn is_message_tool(name: &str) -> bool {
    name == "message_agent"
}

/// Whether a resumed run calls tool `name` again rather than serve its recorded
/// result: the spawn tools that re-register, await, cancel or list jobs, whose
/// recorded children say what they still have to do.
pub(crate) fn runs_again_on_resume(name: &str) -> bool {
    is_spawn_tool(name) && !is_message_tool(name)
}

/// Whether `name` is one of the spawn tools.
pub(crate) fn is_spawn_tool(name: &str) -> bool {
    SPAWN_TOOLS.contains(&name)
}

/// The four tool definitions; `profile` is an enum of every profile a spawn may
/// name: the configured ones and the implicit `main` beside them.
pub(crate) fn definitions(config: &Config, delivery: Delivery) -> Vec<ToolDefinition> {
    // With no profiles configured, a child runs under its parent's profile: no
    // enum of the lone implicit `main` for the model to trip over.
    let names = config.profile_names();
    let profile = if config.profiles.is_empty() {
        json!({"type": "string", "description": "Leave out: the sub-agent uses your own profile"})
    } else {
        json!({"type": "string", "enum": names, "description": "Leave out to use your own profile"})
    };
    let ids = json!({"description": "Job ids: a list, a comma-separated string, or \"*\" for all of your jobs",
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]});
    vec![
        ToolDefinition {
            name: "spawn_agent".into(),
            description: format!("Hand a scoped task to a sub-agent with a fresh conversation. It sees only the task, context and constraints you give. Background (default): returns a job id at once and {}; background=false waits and returns its result.", delivery.promise()),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What to do, self-contained"},
                    "description": {"type": "string", "description": "A short label (3-8 words) shown in progress and results"},
                    "profile": profile,
                    "context": {"description": "Only what the sub-agent needs (string or object)", "anyOf": [{"type": "string"}, {"type": "object"}]},
                    "constraints": {"type": "array", "items": {"type": "string"}},
                    "system_prompt": {"type": "string", "description": "Added to the profile's system prompt"},
                    "tools": {"description": "A subset of the profile's tools: a list, or a comma-separated string", "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]},
                    "max_turns": {"type": "integer", "minimum": 1, "description": "Up to the profile's max_turns_ceiling"},
                    "max_cost_usd": {"type": "number", "minimum": 0},
                    "timeout_s": {"type": "integer", "minimum": 1},
                    "background": {"type": "boolean", "default": true},
                    "output_schema": {"type": "object", "description": "A JSON Schema its final answer must match: its result is then that JSON. Not for a profile that fixes its own"}
                },
                "required": ["task"],
                "additionalProperties": false
            }).into(),
        },
        ToolDefinition {
            name: "await_agents".into(),
            description: "Wait for sub-agents and get one result block per job.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "job_ids": ids,
                    "timeout_s": {"type": "number", "minimum": 0},
                    "until": {"type": "string", "enum": ["all", "any"], "default": "all"}
                },
                "required": ["job_ids"],
                "additionalProperties": false
            }).into(),
        },
        ToolDefinition {
            name: "cancel_agent".into(),
            description: "Cancel one of your sub-agents and all of its descendants.".into(),
            input_schema: json!({"type": "object", "properties": {"job_id": {"type": "string"}}, "required": ["job_id"], "additionalProperties": false}).into(),
        },
        ToolDefinition {
            name: "message_agent".into(),
            description: "Send a message to one of your sub-agents (or theirs). mode \"queue\" (default): a running agent reads it at its next turn boundary; \"interrupt\": its current model request or tool wait is cut and the message is its next input; \"follow_up\": read at its next turn boundary, and it keeps the agent going: one that finished ok resumes with its whole history and the same model and tools, and you get its new result as you got its first. The answer is a receipt (queued, resumed, or rejected with the reason); you are told when it is delivered, and a message it never read is named in its result.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string"},
                    "message": {"type": "string", "maxLength": config.run_limits.max_message_kb * 1024},
                    "mode": {"type": "string", "enum": ["queue", "interrupt", "follow_up"], "default": "queue"}
                },
                "required": ["job_id", "message"],
                "additionalProperties": false
            }).into(),
        },
        ToolDefinition {
            name: "list_agents".into(),
            description: "List your sub-agents: id, profile, state, turns, cost, elapsed time.".into(),
            input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}).into(),
        },
    ]
}

impl Agent {
    /// Runs spawn tool `name`; an `Err` is a tool error for the model.
    pub(crate) async fn spawn_tool(&self, name: &str, arguments: &str) -> Result<String, String> {
        self.spawn_tool_placed(name, arguments, None).await
    }

    /// [`Agent::spawn_tool`], with a background spawn's answer saying it was queued
    /// (or started) as `queued_as` says, when given: a replay tells the model the place
    /// in the queue that the recorded run observed, whatever the timing is now.
    pub(crate) async fn spawn_tool_placed(
        &self,
        name: &str,
        arguments: &str,
        queued_as: Option<bool>,
    ) -> Result<String, String> {
        let args = arguments_object(arguments)?;
        match name {
            "spawn_agent" => {
                let request = SpawnRequest::parse(&args)?;
                let background = request.background;
                let mut grant = self.runtime.scheduler.spawn(&self.parent(), request)?;
                grant.queued = queued_as.unwrap_or(grant.queued);
                if background {
                    let limits = &self.place.tree.limits;
                    return Ok(background_answer(&grant, Delivery::Notified, limits));
                }
                let block = self
                    .await_jobs(std::slice::from_ref(&grant.id), None, Until::All)
                    .await;
                Ok(foreground_answer(&grant, block))
            }
            "await_agents" => Ok(self.await_agents(&args).await),
            "cancel_agent" => self.cancel_agent(&args),
            "message_agent" => self.message_agent(&args).await,
            _ => Ok(self.list_agents()),
        }
    }

    async fn await_agents(&self, args: &Value) -> String {
        let ask = AwaitAsk::parse(args);
        let ids = self.runtime.scheduler.select(&self.place, &ask.jobs);
        if ids.is_empty() {
            return NO_JOBS.into();
        }
        self.await_jobs(&ids, ask.timeout, ask.until).await
    }

    fn cancel_agent(&self, args: &Value) -> Result<String, String> {
        let id = text_arg(args, "job_id")?.ok_or("`job_id` is required")?;
        let id = id.trim();
        Ok(
            match self
                .runtime
                .scheduler
                .cancel(&self.place, &JobId(id.to_string()))
            {
                CancelJob::NotFound => not_found_block(id),
                CancelJob::Finished(job) => format!(
                    "Job {} already finished ({}); nothing to cancel.",
                    job.id,
                    job.phase.name()
                ),
                CancelJob::Cancelled(job) => format!(
                    "Cancelled job {} ({}) and its descendants.",
                    job.id, job.profile
                ),
            },
        )
    }

    async fn message_agent(&self, args: &Value) -> Result<String, String> {
        let id = text_arg(args, "job_id")?.ok_or("`job_id` is required")?;
        let id = JobId(id.trim().to_string());
        let text = text_arg(args, "message")?.ok_or("`message` is required")?;
        let mode = MessageMode::parse(text_arg(args, "mode")?.as_deref())
            .map_err(|why| format!("`mode`: {why}"))?;
        match self
            .runtime
            .scheduler
            .message(&self.parent(), &id, text.to_string(), mode)
            .await
        {
            Receipt::Queued { seq, behind } => Ok(format!(
                "Message #{seq} to job {id} is queued{}: {} You will be told when it is delivered.",
                match behind {
                    0 => String::new(),
                    1 => " behind 1 earlier message".to_string(),
                    n => format!(" behind {n} earlier messages"),
                },
                match mode {
                    MessageMode::Queue => "it reads it at its next turn boundary.",
                    MessageMode::Interrupt =>
                        "its current step is being cut, and the message is its next input.",
                    MessageMode::FollowUp =>
                        "it reads it at its next turn boundary and does not finish before.",
                }
            )),
            Receipt::Resumed { seq } => Ok(format!(
                "Message #{seq} resumed job {id}, which had finished: it runs again with its whole history to answer it. Its new result comes to you as its first did (await_agents, or a notification)."
            )),
            Receipt::Rejected(why) => Err(format!("message rejected: {why}")),
        }
    }

    fn list_agents(&self) -> String {
        let jobs = self.runtime.scheduler.children(&self.place);
        if jobs.is_empty() {
            return NO_JOBS.into();
        }
        jobs.iter()
            .map(|job| match &job.phase {
                Phase::Done(o) => format!(
                    "{} · {} · {} · {} turns · ${:.4} · {:.1} s",
                    job.id,
                    job.title(),
                    job.phase.name(),
                    o.turns,
                    o.cost_usd,
                    o.duration.as_secs_f64()
                ),
                phase => {
                    let since = match phase {
                        Phase::Running(started) => *started,
                        _ => job.created,
                    };
                    format!(
                        "{} · {} · {} · {:.1} s",
                        job.id,
                        job.title(),
                        phase.name(),
                        since.elapsed().as_secs_f64()
                    )
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
