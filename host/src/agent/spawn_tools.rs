//! The spawn tools, exactly as the parent model sees them: `spawn_agent`,
//! `await_agents`, `cancel_agent` and `list_agents`. Argument errors come back as tool
//! errors the model can correct; `await_agents` never fails itself.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{json, Value};

use super::runtime::{Agent, Role};
use crate::config::{AgentLimits, Config, Profile, RunLimits, SPAWN_TOOLS};
use crate::events::SpawnMode;
use crate::jobs::slots::Reservation;
use crate::jobs::spawn_request::{text_arg, SpawnRequest};
use crate::jobs::{
    clamp_notes, compose_task, narrow, not_found_block, CancelJob, ChildAsk, ChildSpec, JobHandle,
    JobId, JobSelection, Phase,
};
use crate::llm::ToolDefinition;
use crate::outcome::AgentOutcome;
use crate::plugin::ToolAccess;

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

/// What a `spawn_agent` call did, before it is put in words for whoever asked.
#[derive(Clone, Debug)]
pub(crate) struct Spawned {
    /// The child's job id.
    pub(crate) id: JobId,
    /// Its profile's name.
    pub(crate) profile: String,
    /// Whether it waits for a slot (otherwise it started).
    pub(crate) queued: bool,
    /// Each limit asked for and not granted, in a sentence.
    pub(crate) notes: Vec<String>,
}

impl Spawned {
    /// The answer to a background spawn.
    pub(crate) fn background_answer(&self, delivery: Delivery, limits: &RunLimits) -> String {
        let (id, profile) = (&self.id, &self.profile);
        let next = delivery.next_step();
        let mut answer = if self.queued {
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
        for note in &self.notes {
            answer.push(' ');
            answer.push_str(note);
        }
        answer
    }

    /// The answer to a foreground spawn: what was not granted, then the result block.
    pub(crate) fn foreground_answer(&self, block: String) -> String {
        match self.notes.join(" ") {
            notes if notes.is_empty() => block,
            notes => format!("{notes}\n\n{block}"),
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
            name: "list_agents".into(),
            description: "List your sub-agents: id, profile, state, turns, cost, elapsed time.".into(),
            input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}).into(),
        },
    ]
}

type BoxedRun = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs a child as `job`: waits for the slots reserved at its spawn (or a
/// cancellation), runs it here or, with a queue, on a worker, and finishes the job
/// with its outcome. Boxed, because a child is an agent that may itself spawn children.
fn run_child(
    child: Agent,
    mut job: JobHandle,
    task: String,
    spec: ChildSpec,
    slots: Reservation,
) -> BoxedRun {
    Box::pin(async move {
        // A resumed run's child that had finished delivers its recorded outcome.
        if let Some(outcome) = child.tree.earlier_outcome(job.id()) {
            job.finish(outcome);
            return;
        }
        // A replay runs every agent here: nothing goes to a queue.
        let remote = child
            .runtime
            .remote
            .clone()
            .filter(|_| child.tree.replay.is_none());
        let permit = tokio::select! {
            biased;
            _ = child.cancel.cancelled() => None,
            permit = slots.wait() => Some(permit),
        };
        let Some(permit) = permit else {
            job.finish(AgentOutcome::cancelled_before_start());
            return;
        };
        // The job gives its slots back once its end is published.
        job.hold(permit);
        let outcome = match remote {
            Some(backend) => backend.run(&job, spec).await,
            None => {
                job.start();
                child.run(task).await
            }
        };
        job.finish(outcome);
    })
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
                let mut spawned = self.spawn(request)?;
                spawned.queued = queued_as.unwrap_or(spawned.queued);
                if background {
                    return Ok(spawned.background_answer(Delivery::Notified, &self.tree.limits));
                }
                let block = self
                    .await_jobs(std::slice::from_ref(&spawned.id), None, false)
                    .await;
                Ok(spawned.foreground_answer(block))
            }
            "await_agents" => Ok(self.await_agents(&args).await),
            "cancel_agent" => self.cancel_agent(&args),
            _ => Ok(self.list_agents()),
        }
    }

    /// Spawns the child `request` asks for, in the background: narrowed from its
    /// profile and this agent's own capabilities, registered as a child job, its slots
    /// reserved in spawn order. An `Err` is a tool error for the model.
    pub(crate) fn spawn(&self, request: SpawnRequest) -> Result<Spawned, String> {
        let base = self.base_profile(request.profile.as_deref())?;
        let base = base.as_ref();
        let profile_name = base.name.clone();
        let ask = ChildAsk {
            tools: request.tools.as_deref(),
            max_turns: request.max_turns,
            timeout_s: request.timeout_s,
            max_cost_usd: request.max_cost_usd,
            ceiling: Some(&self.profile.capabilities),
            parent_model: self.profile.model.as_deref(),
            output_schema: request.output_schema.as_ref(),
        };
        let (mut profile, mut limits) =
            narrow(base, &ask, || self.runtime.registry.names_for(base))?;
        self.check_spawn(&profile, &limits)?;
        let notes = clamp_notes(base, &ask, &limits);
        let message = compose_task(
            &request.task,
            request.context.as_ref(),
            &request.constraints,
        );
        let spec = self.child_spec(&request, &profile, limits);

        // Its scratch directory first: a child that cannot be prepared is never
        // registered, so it cannot stay queued forever.
        let mut access = ToolAccess::new(profile.clone())
            .map_err(|e| format!("cannot prepare the sub-agent: {e:#}"))?;
        let job = self.place().child(
            &profile_name,
            &request.task,
            request.description.as_deref(),
            SpawnMode::of(request.background),
        );
        // A fork's agent runs changed as the fork asks (its parent sees what it asked).
        if let Some(changed) = self.forked_child(job.id(), base, &ask) {
            (profile, limits) = changed?;
            access = ToolAccess::new(profile.clone())
                .map_err(|e| format!("cannot prepare the forked sub-agent: {e:#}"))?;
        }
        // The slots are asked for now, in spawn order: what the caller is told (started
        // or queued) is what happens.
        let slots = self
            .runtime
            .slots
            .reserve(&self.tree.slots, self.runtime.remote.is_none());
        let spawned = Spawned {
            id: job.id().clone(),
            profile: profile_name,
            queued: slots.is_queued(),
            notes,
        };
        let role = Role {
            profile,
            limits,
            extra_prompt: request.system_prompt,
            depth: self.depth + 1,
            traceparent: None,
        };
        let child = Agent::new(
            self.runtime.clone(),
            job.place(),
            role,
            access,
            Some(tracing::Span::current()),
        );
        tokio::spawn(run_child(child, job, message, spec, slots));
        Ok(spawned)
    }

    /// The profile a child is narrowed from: `asked`, or with none the parent's own
    /// (its prompt, tools and model; capabilities already its effective ones), as
    /// other sub-agent systems spawn by default, with the output schema its
    /// definition has: a schema given to the root alone (`warren run
    /// --output-schema`) is not passed down.
    fn base_profile(&self, asked: Option<&str>) -> Result<Cow<'_, Profile>, String> {
        let config = &self.runtime.config;
        match asked {
            // A child that runs as its parent runs on its model too, here and on a
            // worker alike (whose profile of that name may name another).
            None => {
                let mut profile = self.profile.clone();
                profile.inherit_model = profile.model.is_some();
                if profile.output_schema.is_some() {
                    profile.output_schema = config
                        .find_profile(&profile.name)
                        .and_then(|p| p.output_schema.clone());
                }
                Ok(Cow::Owned(profile))
            }
            Some(name) => config.find_profile(name).map(Cow::Borrowed).ok_or_else(|| {
                format!(
                    "unknown profile `{name}` (available: {}; or leave `profile` out to use your own)",
                    config.profile_names().join(", ")
                )
            }),
        }
    }

    /// Whether a child of `profile` under `limits` may start: its model's key is set
    /// (children on a queue run on workers, with the workers' keys), and the run's
    /// budget has room for it.
    fn check_spawn(&self, profile: &Profile, limits: &AgentLimits) -> Result<(), String> {
        if self.runtime.remote.is_none() {
            if let Some((model, variable)) = profile
                .model
                .as_deref()
                .and_then(|model| self.runtime.missing_keys.get_key_value(model))
            {
                return Err(format!(
                    "spawn refused: model `{model}` needs its API key in {variable}, which is not set in warren's environment: add {variable} to the `env` of this server in the MCP client's configuration (or to warren's environment), then restart it"
                ));
            }
        }
        if let Some(budget) = self.tree.limits.budget_usd {
            let spent = self.tree.spent();
            if spent >= budget {
                return Err(format!("spawn refused: the run's budget of ${budget:.4} is used up (spent ${spent:.4})"));
            }
            if let Some(cap) = limits.max_cost_usd.filter(|cap| spent + cap > budget) {
                return Err(format!(
                    "spawn refused: it may cost up to ${cap:.4} but only ${:.4} of the run's ${budget:.4} budget is left (spent ${spent:.4})",
                    budget - spent
                ));
            }
        }
        Ok(())
    }

    /// What the child of `request`, narrowed to `profile` and `limits`, needs to run
    /// anywhere, should it go to another machine.
    fn child_spec(
        &self,
        request: &SpawnRequest,
        profile: &Profile,
        limits: AgentLimits,
    ) -> ChildSpec {
        // A child under its parent's own profile gets the parent's tools, which a spawn
        // may have cut down: a worker only knows the profile by name, so the tools go
        // with the job, and the child gets on a worker exactly what it would get here.
        let tools = match (&request.profile, request.tools.clone()) {
            (None, None) => Some(
                self.runtime
                    .registry
                    .names_for(profile)
                    .into_iter()
                    .map(String::from)
                    .collect(),
            ),
            (_, tools) => tools,
        };
        ChildSpec {
            profile: profile.name.clone(),
            task: request.task.clone(),
            context: request.context.clone(),
            constraints: request.constraints.clone(),
            system_prompt: request.system_prompt.clone(),
            tools,
            limits,
            model: profile.inherited_model().map(String::from),
            output_schema: profile.output_schema.clone(),
            budget_usd: self
                .tree
                .limits
                .budget_usd
                .map(|budget| (budget - self.tree.spent()).max(0.0)),
            ceiling: self.profile.capabilities.clone(),
            parent: self.id.clone(),
            depth: self.depth + 1,
            traceparent: crate::telemetry::traceparent(&tracing::Span::current()),
        }
    }

    async fn await_agents(&self, args: &Value) -> String {
        let ids = self
            .tree
            .select(&self.id, &JobSelection::parse(&args["job_ids"]));
        if ids.is_empty() {
            return "No jobs found.".into();
        }
        let timeout = args["timeout_s"]
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(Duration::from_secs_f64);
        let any = args["until"].as_str() == Some("any");
        self.await_jobs(&ids, timeout, any).await
    }

    fn cancel_agent(&self, args: &Value) -> Result<String, String> {
        let id = text_arg(args, "job_id")?.ok_or("`job_id` is required")?;
        let id = id.trim();
        Ok(
            match self.tree.cancel_job(&JobId(id.to_string()), Some(&self.id)) {
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

    fn list_agents(&self) -> String {
        let jobs = self.tree.children(&self.id);
        if jobs.is_empty() {
            return "No jobs found.".into();
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
