//! A spawn, from the request to the child's end: narrowed, checked, registered, its
//! slots reserved, then run here or on a worker; and a run's root, started the same
//! way.

use std::borrow::Cow;
use std::sync::Arc;

use super::parts::{Parent, Role, Scheduler, Start, Wake};
use crate::config::{AgentLimits, Profile};
use crate::events::SpawnMode;
use crate::jobs::slots::Reservation;
use crate::jobs::spawn_request::SpawnRequest;
use crate::jobs::{
    compose_task, narrow, Again, Backend, ChildAsk, ChildSpec, History, JobHandle, JobId, Tree,
};
use crate::outcome::AgentOutcome;
use crate::plugin::ToolAccess;

/// What a spawn got: the child's id and profile, whether it started or waits for a
/// slot, and each thing asked for and not granted.
#[derive(Clone, Debug)]
pub(crate) struct Grant {
    /// The child's job id.
    pub(crate) id: JobId,
    /// Its profile's name.
    pub(crate) profile: String,
    /// Whether it waits for a slot (otherwise it started).
    pub(crate) queued: bool,
    /// Each limit asked for and not granted, in a sentence.
    pub(crate) notes: Vec<String>,
}

/// A run's root, ready to start: who it is, its tools' view and its first message.
pub(crate) struct RootStart {
    /// Its profile and limits.
    pub(crate) role: Role,
    /// Its first message.
    pub(crate) task: String,
    /// Its tools' view of the sandbox.
    pub(crate) access: ToolAccess,
}

impl Scheduler {
    /// Spawns the child `request` asks for, in the background: narrowed from its
    /// profile and `parent`'s capabilities, registered as `parent`'s child, its slots
    /// reserved in spawn order, then run. An `Err` says why not, for the parent.
    pub(crate) fn spawn(
        &self,
        parent: &Parent<'_>,
        request: SpawnRequest,
    ) -> Result<Grant, String> {
        let base = self.base_profile(parent.profile, request.profile.as_deref())?;
        let base = base.as_ref();
        let ask = ChildAsk {
            tools: request.tools.as_deref(),
            max_turns: request.max_turns,
            timeout_s: request.timeout_s,
            max_cost_usd: request.max_cost_usd,
            ceiling: Some(&parent.profile.capabilities),
            parent_model: parent.profile.model.as_deref(),
            output_schema: request.output_schema.as_ref(),
            approval: Some(&parent.profile.approval.rule),
        };
        let (mut profile, mut limits) = narrow(base, &ask, || self.registry.names_for(base))?;
        self.admits(parent, &profile, &limits)?;
        let notes = crate::jobs::clamp_notes(base, &ask, &limits);
        let spec = self.child_spec(parent, &request, &profile, limits);
        // Its scratch directory first: a child that cannot be prepared is never
        // registered, so it cannot stay queued forever.
        let mut access = ToolAccess::new(profile.clone())
            .map_err(|e| format!("cannot prepare the sub-agent: {e:#}"))?;
        parent.place.tree.take_agent_place()?;
        let job = parent.place.child(
            &base.name,
            &request.task,
            request.description.as_deref(),
            SpawnMode::of(request.background),
        );
        let tree = &parent.place.tree;
        // A fork's agent runs changed as the fork asks (its parent sees what it asked).
        let forked = tree.mode.forked(job.id(), base, &self.config, |base| {
            narrow(base, &ask, || self.registry.names_for(base))
        });
        if let Some(changed) = forked {
            (profile, limits) = changed?;
            access = ToolAccess::new(profile.clone())
                .map_err(|e| format!("cannot prepare the forked sub-agent: {e:#}"))?;
        }
        // The slots are asked for now, in spawn order: what the caller is told (started
        // or queued) is what happens.
        let slots = self.slots.reserve(&tree.slots, self.remote.is_none());
        let grant = Grant {
            id: job.id().clone(),
            profile: base.name.clone(),
            queued: slots.is_queued(),
            notes,
        };
        let start = Start {
            place: job.place().clone(),
            role: Role {
                profile,
                limits,
                extra_prompt: request.system_prompt,
                depth: parent.depth + 1,
                traceparent: None,
            },
            access,
            task: compose_task(
                &request.task,
                request.context.as_ref(),
                &request.constraints,
            ),
            parent_span: Some(tracing::Span::current()),
        };
        tokio::spawn(self.run_child(job, start, spec, slots));
        Ok(grant)
    }

    /// Starts `root` as the root job of `tree`; its task ends with the root's outcome
    /// (at once, with the recorded one, for a root that had finished before a resume).
    pub(crate) fn start_root(
        &self,
        tree: &Arc<Tree>,
        root: RootStart,
    ) -> (JobId, tokio::task::JoinHandle<AgentOutcome>) {
        let handle = JobHandle::root(tree, &root.role.profile.name, &root.task);
        let id = handle.id().clone();
        if let Some(outcome) = tree.mode.earlier_outcome(&id) {
            return (id, tokio::spawn(async move { handle.finish(outcome) }));
        }
        let run = self.launch_later()(Start {
            place: handle.place().clone(),
            role: root.role,
            access: root.access,
            task: root.task,
            parent_span: None,
        });
        handle.start();
        // A root ends for good: its run ends with it.
        (
            id,
            tokio::spawn(async move { handle.finish(run.await.outcome) }),
        )
    }

    /// Runs a child as `job`: waits for the slots reserved at its spawn (or a
    /// cancellation), runs it here or, with a queue, on a worker, and finishes the job
    /// with its outcome. A child that may take follow-ups rests after it finished,
    /// holding no slot, until one wakes it (then it waits for slots again and runs on
    /// with its history) or its parent ends.
    fn run_child(
        &self,
        mut job: JobHandle,
        start: Start,
        spec: ChildSpec,
        mut slots: Reservation,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let tree = job.place().tree.clone();
        // A replay runs every agent here: nothing goes to a queue.
        let remote = self
            .remote
            .clone()
            .filter(|_| tree.mode.may_run_elsewhere());
        let earlier = tree.mode.earlier_outcome(job.id());
        let cancel = job.place().cancel.clone();
        let launch = self.launch_later();
        let queue = self.slots.clone();
        async move {
            // A resumed run's child that had finished delivers its recorded outcome.
            if let Some(outcome) = earlier {
                job.finish(outcome);
                return;
            }
            let mut next = Some(match remote {
                Some(backend) => Next::There(backend, None),
                None => Next::Here(Box::new(move || launch(start))),
            });
            while let Some(step) = next.take() {
                let permit = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => None,
                    permit = slots.wait() => Some(permit),
                };
                let Some(permit) = permit else {
                    job.finish(AgentOutcome::cancelled_before_start());
                    return;
                };
                // The job gives its slots back once its end is published.
                job.hold(permit);
                let (outcome, again) = step.run(&job, &spec).await;
                let Some(again) = again else {
                    job.finish(outcome);
                    return;
                };
                let earlier = outcome.clone();
                job.rest(outcome);
                let woken = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => false,
                    () = job.place().mailbox.woken() => true,
                };
                tree.give_back_rest();
                if !woken {
                    job.retire();
                    return;
                }
                slots = queue.reserve(&tree.slots, true);
                next = Some(again.woken(&job, earlier));
            }
        }
    }

    /// The profile a child is narrowed from: `asked`, or with none the parent's own
    /// (its prompt, tools and model; capabilities already its effective ones), as
    /// other sub-agent systems spawn by default, with the output schema its
    /// definition has: a schema given to the root alone (`warren run
    /// --output-schema`) is not passed down.
    fn base_profile<'a>(
        &'a self,
        parent: &Profile,
        asked: Option<&str>,
    ) -> Result<Cow<'a, Profile>, String> {
        match asked {
            // A child that runs as its parent runs on its model too, here and on a
            // worker alike (whose profile of that name may name another).
            None => {
                let mut profile = parent.clone();
                profile.inherit_model = profile.model.is_some();
                if profile.output_schema.is_some() {
                    profile.output_schema = self
                        .config
                        .find_profile(&profile.name)
                        .and_then(|p| p.output_schema.clone());
                }
                Ok(Cow::Owned(profile))
            }
            Some(name) => self.config.find_profile(name).map(Cow::Borrowed).ok_or_else(|| {
                format!(
                    "unknown profile `{name}` (available: {}; or leave `profile` out to use your own)",
                    self.config.profile_names().join(", ")
                )
            }),
        }
    }

    /// Whether a child of `profile` under `limits` may start: its model's key is set
    /// (children on a queue run on workers, with the workers' keys), and the run's
    /// budget has room for it.
    fn admits(
        &self,
        parent: &Parent<'_>,
        profile: &Profile,
        limits: &AgentLimits,
    ) -> Result<(), String> {
        if self.remote.is_none() {
            if let Some((model, variable)) = profile
                .model
                .as_deref()
                .and_then(|model| self.missing_keys.get_key_value(model))
            {
                return Err(format!(
                    "spawn refused: model `{model}` needs its API key in {variable}, which is not set in warren's environment: add {variable} to the `env` of this server in the MCP client's configuration (or to warren's environment), then restart it"
                ));
            }
        }
        parent.place.tree.budget.admits(limits.max_cost_usd)
    }

    /// What the child of `request`, narrowed to `profile` and `limits`, needs to run
    /// anywhere, should it go to another machine.
    fn child_spec(
        &self,
        parent: &Parent<'_>,
        request: &SpawnRequest,
        profile: &Profile,
        limits: AgentLimits,
    ) -> ChildSpec {
        // A child under its parent's own profile gets the parent's tools, which a spawn
        // may have cut down: a worker only knows the profile by name, so the tools go
        // with the job, and the child gets on a worker exactly what it would get here.
        let tools = match (&request.profile, request.tools.clone()) {
            (None, None) => Some(
                self.registry
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
            budget_usd: parent.place.tree.budget.left(),
            ceiling: parent.profile.capabilities.clone(),
            approval: parent.profile.approval.rule.clone(),
            parent: parent.place.id.clone(),
            depth: parent.depth + 1,
            traceparent: crate::telemetry::traceparent(&tracing::Span::current()),
            again: None,
            kept: Default::default(),
        }
    }
}

/// A child's next run: here (its first, or the wake of its resting conversation), or
/// on a worker (a follow-up's with the history it rested with).
enum Next {
    Here(Wake),
    There(Arc<dyn Backend>, Option<Again>),
}

/// How a child that finished ok may be resumed.
enum Rested {
    Here(Wake),
    There(Arc<dyn Backend>, History),
}

impl Next {
    /// Runs the child as `job` to its end: its outcome, and how it may be resumed.
    async fn run(self, job: &JobHandle, spec: &ChildSpec) -> (AgentOutcome, Option<Rested>) {
        match self {
            Next::There(backend, again) => {
                let spec = ChildSpec {
                    again,
                    ..spec.clone()
                };
                let kept = spec.kept.clone();
                let outcome = backend.run(job, spec).await;
                // Its history is held here while it rests, as a local agent's
                // conversation is.
                let history = lock(&kept).take();
                let rests = history.filter(|_| job.place().tree.take_rest());
                (
                    outcome,
                    rests.map(|history| Rested::There(backend, history)),
                )
            }
            Next::Here(run) => {
                job.start();
                let ended = run().await;
                (ended.outcome, ended.wake.map(Rested::Here))
            }
        }
    }
}

impl Rested {
    /// The run a follow-up woke `job` for, after it ended `earlier`.
    fn woken(self, job: &JobHandle, earlier: AgentOutcome) -> Next {
        match self {
            Rested::Here(wake) => Next::Here(wake),
            Rested::There(backend, history) => {
                let number = job.place().mailbox.follow_ups();
                let again = Again {
                    history,
                    earlier,
                    number,
                };
                Next::There(backend, Some(again))
            }
        }
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
