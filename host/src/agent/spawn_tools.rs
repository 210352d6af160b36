//! The spawn tools, exactly as the parent model sees them: `spawn_agent`,
//! `await_agents`, `cancel_agent` and `list_agents`. Argument errors come back as tool
//! errors the model can correct; `await_agents` never fails itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::Agent;
use crate::config::{Config, SPAWN_TOOLS};
use crate::events::{summarize, Event};
use crate::jobs::slots::Reservation;
use crate::jobs::spawn_request::{text_arg, SpawnRequest};
use crate::jobs::{
    clamp_notes, compose_task, narrow, not_found_block, ChildAsk, ChildSpec, JobId, Phase,
    Placement,
};
use crate::llm::ToolDefinition;
use crate::outcome::AgentOutcome;
use crate::plugin::ToolAccess;

/// Whether `name` is one of the spawn tools.
pub(crate) fn is_spawn_tool(name: &str) -> bool {
    SPAWN_TOOLS.contains(&name)
}

/// The four tool definitions; `profile` is an enum of the configured profile names.
pub(crate) fn definitions(config: &Config) -> Vec<ToolDefinition> {
    let names: Vec<&String> = config.profiles.keys().collect();
    // With no profiles configured, a child runs under its parent's profile: no
    // empty enum for the model to trip over.
    let profile = if names.is_empty() {
        json!({"type": "string", "description": "Leave out: the sub-agent uses your own profile"})
    } else {
        json!({"type": "string", "enum": names, "description": "Leave out to use your own profile"})
    };
    let ids = json!({"description": "Job ids: a list, a comma-separated string, or \"*\" for all of your jobs",
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]});
    vec![
        ToolDefinition {
            name: "spawn_agent".into(),
            description: "Hand a scoped task to a sub-agent with a fresh conversation. It sees only the task, context and constraints you give. Background (default): returns a job id at once and you are notified when it finishes; background=false waits and returns its result.".into(),
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
                    "background": {"type": "boolean", "default": true}
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

/// Runs a child: waits for the slots reserved at its spawn (or a cancellation), runs
/// it here or, with a queue, on a worker, and records the outcome.
/// Boxed, because a child is an agent that may itself spawn children.
fn run_child(
    child: Agent,
    task: String,
    spec: ChildSpec,
    slots: Reservation,
    done: tokio::sync::watch::Sender<bool>,
) -> BoxedRun {
    Box::pin(async move {
        let remote = child.runtime.remote.clone();
        let permit = tokio::select! {
            biased;
            _ = child.cancel.cancelled() => None,
            permit = slots.wait() => Some(permit),
        };
        let outcome = match (permit, remote) {
            (Some(_permit), Some(backend)) => {
                let place = Placement {
                    tree: child.tree.clone(),
                    id: child.id.clone(),
                    cancel: child.cancel.clone(),
                    children_cancel: child.children_cancel.clone(),
                };
                backend.run(&place, spec).await
            }
            (Some(_permit), None) => {
                child
                    .tree
                    .set_phase(&child.id, Phase::Running(Instant::now()));
                child.run(task).await
            }
            (None, _) => AgentOutcome::cancelled_before_start(),
        };
        child.tree.set_phase(&child.id, Phase::Done(outcome));
        done.send_replace(true);
    })
}

impl Agent {
    /// Runs spawn tool `name`; an `Err` is a tool error for the model.
    pub(crate) async fn spawn_tool(&self, name: &str, arguments: &str) -> Result<String, String> {
        let args: Value = serde_json::from_str(arguments)
            .map_err(|e| format!("arguments are not valid JSON: {e}"))?;
        if !args.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        match name {
            "spawn_agent" => self.spawn_agent(&args).await,
            "await_agents" => Ok(self.await_agents(&args).await),
            "cancel_agent" => self.cancel_agent(&args),
            _ => Ok(self.list_agents()),
        }
    }

    async fn spawn_agent(&self, args: &Value) -> Result<String, String> {
        let SpawnRequest {
            task,
            description,
            profile: asked_profile,
            context,
            constraints,
            system_prompt: extra_prompt,
            tools,
            max_turns,
            max_cost_usd: max_cost,
            timeout_s,
            background,
        } = SpawnRequest::parse(args)?;
        let config = &self.runtime.config;
        // No profile: the parent's own (its prompt, tools and model; capabilities
        // already its effective ones), as other sub-agent systems spawn by default.
        let base = match &asked_profile {
            None => &self.profile,
            Some(name) => config.find_profile(name).ok_or_else(|| {
                format!(
                    "unknown profile `{name}` (available: {}; or leave `profile` out to use your own)",
                    config.profile_names().join(", ")
                )
            })?,
        };
        let profile_name = base.name.clone();
        let ask = ChildAsk {
            tools: tools.as_deref(),
            max_turns,
            timeout_s,
            max_cost_usd: max_cost,
            ceiling: Some(&self.profile.capabilities),
            parent_model: self.profile.model.as_deref(),
        };
        let (profile, limits) = narrow(base, &ask, || self.runtime.registry.names_for(base))?;
        let granted_note: String = clamp_notes(base, &ask, &limits)
            .iter()
            .map(|note| format!(" {note}"))
            .collect();
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
        let message = compose_task(&task, context.as_ref(), &constraints);
        // A child under its parent's own profile gets the parent's tools, which a spawn
        // may have cut down: a worker only knows the profile by name, so the tools go
        // with the job, and the child gets on a worker exactly what it would get here.
        let tools = match (&asked_profile, tools) {
            (None, None) => Some(
                self.runtime
                    .registry
                    .names_for(&profile)
                    .into_iter()
                    .map(String::from)
                    .collect(),
            ),
            (_, tools) => tools,
        };
        // What it needs to run anywhere, should it go to another machine.
        let spec = ChildSpec {
            profile: profile_name.clone(),
            task: task.clone(),
            context,
            constraints,
            system_prompt: extra_prompt.clone(),
            tools,
            limits,
            model: profile.inherited_model().map(String::from),
            budget_usd: self
                .tree
                .limits
                .budget_usd
                .map(|budget| (budget - self.tree.spent()).max(0.0)),
            ceiling: self.profile.capabilities.clone(),
            parent: self.id.clone(),
            depth: self.depth + 1,
            traceparent: crate::telemetry::traceparent(&tracing::Span::current()),
        };

        // Its scratch directory first: a child that cannot be prepared is never
        // registered, so it cannot stay queued forever.
        let access = ToolAccess::new(profile.clone())
            .map_err(|e| format!("cannot prepare the sub-agent: {e:#}"))?;
        let cancel = self.children_cancel.child_token();
        let (id, done) = self
            .tree
            .add(Some(&self.id), &profile_name, &task, cancel.clone());
        if let Some(label) = &description {
            self.tree.set_label(&id, label);
        }
        self.tree.events.publish(Event::AgentQueued {
            agent: id.0.clone(),
            parent: Some(self.id.0.clone()),
            profile: profile_name.clone(),
            task: summarize(&task),
            label: description.clone(),
        });
        // The slots are asked for now, in spawn order: what the model is told below
        // (started or queued) is what happens.
        let slots = self
            .runtime
            .slots
            .reserve(&self.tree.slots, self.runtime.remote.is_none());
        let queued = slots.is_queued();
        let child = Agent {
            runtime: self.runtime.clone(),
            tree: Arc::clone(&self.tree),
            id: id.clone(),
            profile,
            extra_prompt,
            depth: self.depth + 1,
            limits,
            children_cancel: cancel.child_token(),
            cancel,
            access,
            parent_span: Some(tracing::Span::current()),
            traceparent: None,
        };
        tokio::spawn(run_child(child, message, spec, slots, done));
        if !background {
            let block = self
                .await_jobs(std::slice::from_ref(&id), None, false)
                .await;
            return Ok(match granted_note.trim() {
                "" => block,
                note => format!("{note}\n\n{block}"),
            });
        }
        let mut answer = if queued {
            format!(
                "Queued job {id} ({profile_name}) in the background. It is queued: as many sub-agents as allowed are running (max_concurrent = {} per run, max_concurrent_total = {} per host); it starts when a slot frees, after the jobs queued before it. You will be notified when it finishes.",
                self.tree.limits.max_concurrent, self.tree.limits.max_concurrent_total
            )
        } else {
            format!("Started job {id} ({profile_name}) in the background; you will be notified when it finishes.")
        };
        answer.push_str(&granted_note);
        Ok(answer)
    }

    async fn await_agents(&self, args: &Value) -> String {
        let mine: Vec<JobId> = self
            .tree
            .children(&self.id)
            .into_iter()
            .map(|j| j.id)
            .collect();
        let ids: Vec<JobId> = match &args["job_ids"] {
            Value::String(s) if s.trim() == "*" => mine,
            Value::String(s) => s
                .split(',')
                .map(|p| JobId(p.trim().to_string()))
                .filter(|id| !id.0.is_empty())
                .collect(),
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .map(|s| JobId(s.trim().to_string()))
                .collect(),
            _ => Vec::new(),
        };
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
        let Some(job) = self
            .tree
            .job(&JobId(id.trim().to_string()))
            .filter(|j| j.parent.as_ref() == Some(&self.id))
        else {
            return Ok(not_found_block(id.trim()));
        };
        if let Phase::Done(outcome) = &job.phase {
            return Ok(format!(
                "Job {} already finished ({}); nothing to cancel.",
                job.id,
                outcome.state.as_str()
            ));
        }
        job.cancel.cancel();
        Ok(format!(
            "Cancelled job {} ({}) and its descendants.",
            job.id, job.profile
        ))
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
