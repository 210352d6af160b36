//! The library API: load a configuration once ([`Host`]), then start runs of a root
//! agent ([`Run`]), cancel them, and collect their [`RunReport`].
//!
//! An outside caller that drives the tools itself (an MCP client) gets a [`Session`]
//! instead: see `host/session.rs`. `host/bench.rs` holds what a bench times that no
//! public call isolates.
//!
//! ```no_run
//! # async fn example() -> Result<(), warren::Error> {
//! let config = warren::Config::load("warren.toml".as_ref())?;
//! let host = warren::Host::load(config).await?;
//! let report = host.start("main", "Summarise the docs", None)?.wait().await;
//! println!("{}", report.root.text);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;

use crate::agent::{Delivery, Runtime};
use crate::config::{Config, Profile, RunLimits};
use crate::jobs::{Backend, Tree};
use crate::llm;
use crate::plugin::{ToolAccess, ToolRegistry};
use crate::queue::client::RemoteQueue;
use crate::sandbox::Sandbox;
use crate::scheduler::{Role, RootStart, Scheduler};

#[cfg(feature = "internals")]
pub(crate) mod bench;
pub(crate) mod builder;
pub(crate) mod control;
pub(crate) mod error;
mod job_start;
mod journaled;
pub(crate) mod run;
pub(crate) mod session;
pub(crate) use self::builder::HostBuilder;
use self::builder::Supplied;
pub(crate) use self::error::Error;
pub(crate) use self::job_start::JobStart;
pub(crate) use self::run::{AgentReport, Run, RunReport};
pub(crate) use self::session::Answer;
pub(crate) use self::session::Session;

/// A loaded configuration with its plugins and models, ready to run agents.
#[derive(Clone)]
pub struct Host {
    parts: Arc<Runtime>,
    /// The queue sub-agents go through, when `[queue] redis` is set.
    queue: Option<Arc<RemoteQueue>>,
}

impl Host {
    /// Loads the plugins (through the compile cache) and connects every model.
    pub async fn load(config: Config) -> Result<Host, Error> {
        Host::load_with(config, Keys::Required, Supplied::default()).await
    }

    /// A host with parts supplied in code: a model provider, a backend for
    /// sub-agents ([`HostBuilder`]).
    pub fn builder(config: Config) -> HostBuilder {
        HostBuilder::new(config)
    }

    /// As [`Host::load`], for a replay (`warren replay`), which sends nothing to
    /// any model: a model whose API key is not set is connected without one.
    pub(crate) async fn load_offline(config: Config) -> Result<Host, Error> {
        Host::load_with(config, Keys::NotNeeded, Supplied::default()).await
    }

    /// As [`Host::load`], for a server whose client starts it, often with a minimal
    /// environment, and wants its tools listed at once: the built-in plugins are
    /// listed from the binary and compiled in the background
    /// ([`ToolRegistry::for_serving`]), and a model whose `api_key_env` variable is not set is left out
    /// ([`Host::missing_keys`]) instead of failing the load, so the tools that need
    /// no model are served; a spawn on that model is a tool error naming the variable.
    pub(crate) async fn load_for_serving(config: Config) -> Result<Host, Error> {
        Host::load_with(config, Keys::LeaveOutMissing, Supplied::default()).await
    }

    async fn load_with(config: Config, keys: Keys, supplied: Supplied) -> Result<Host, Error> {
        let sandbox = Arc::new(
            Sandbox::new()
                .context("creating the sandbox")
                .map_err(Error::Run)?,
        );
        // A server (`load_for_serving`, the one to leave out missing keys) lists its
        // tools at once: the built-ins compile in the background.
        let registry = match keys == Keys::LeaveOutMissing {
            true => ToolRegistry::for_serving(sandbox, &config).await,
            false => ToolRegistry::for_config(sandbox, &config).await,
        }
        .map_err(Error::Plugin)?;
        for profile in config.all_profiles() {
            registry
                .check_profile(&profile, &config.plugin_limits)
                .map_err(Error::Plugin)?;
        }
        let mut providers = supplied.providers;
        let mut missing_keys = BTreeMap::new();
        let secrets = config.secrets();
        for (name, model) in &config.models {
            if providers.contains_key(name) {
                continue;
            }
            let unset = model
                .api_key_env
                .as_deref()
                .filter(|variable| std::env::var_os(variable).is_none_or(|value| value.is_empty()));
            let provider = match (keys, unset) {
                (Keys::LeaveOutMissing, Some(variable)) => {
                    missing_keys.insert(name.clone(), variable.to_string());
                    continue;
                }
                (Keys::NotNeeded, Some(_)) => {
                    // Nothing is sent, so nothing needs the key: connected as a model
                    // with no key variable named.
                    let model = llm::ModelConfig {
                        api_key_env: None,
                        ..model.clone()
                    };
                    llm::connect(name, &model, &secrets).map_err(Error::model)?
                }
                _ => llm::connect(name, model, &secrets).map_err(Error::model)?,
            };
            providers.insert(name.clone(), provider);
        }
        let slots = crate::jobs::slots::SlotQueue::new(config.run_limits.max_concurrent_total);
        // A replay (no keys needed) runs every agent here, so it needs no queue.
        let queue = match &config.queue.redis {
            Some(_) if keys != Keys::NotNeeded => Some(
                RemoteQueue::connect(&config.queue)
                    .await
                    .map_err(Error::Queue)?,
            ),
            _ => None,
        };
        let remote = match supplied.backend {
            Some(backend) => Some(backend),
            None => queue.clone().map(|q| q as Arc<dyn Backend>),
        };
        let config = Arc::new(config);
        let registry = Arc::new(registry);
        let parts = Arc::new_cyclic(|runtime: &std::sync::Weak<Runtime>| Runtime {
            spawn_tools: crate::agent::spawn_tool_definitions(&config, Delivery::Notified),
            scheduler: Scheduler::new(
                config.clone(),
                registry.clone(),
                missing_keys,
                slots,
                remote,
                runtime.clone(),
            ),
            config,
            registry,
            providers,
        });
        Ok(Host { parts, queue })
    }

    /// The configuration in use.
    pub(crate) fn config(&self) -> &Config {
        &self.parts.config
    }

    /// The models left out by [`Host::load_for_serving`] for want of their API key,
    /// by name, with the variable that should hold it.
    pub(crate) fn missing_keys(&self) -> &BTreeMap<String, String> {
        self.parts.scheduler.missing_keys()
    }

    /// The queue sub-agents go through, when `[queue] redis` is set.
    pub(crate) fn remote_queue(&self) -> Option<&Arc<RemoteQueue>> {
        self.queue.as_ref()
    }

    /// How many roots of this host's runs only wait for their sub-agents, as it
    /// changes.
    pub(crate) fn roots_waiting(&self) -> tokio::sync::watch::Receiver<usize> {
        self.parts.scheduler.slots().roots_waiting()
    }

    /// The tool registry.
    pub(crate) fn registry(&self) -> &ToolRegistry {
        &self.parts.registry
    }

    /// Starts a root agent with `profile` on `task`; `model` overrides the profile's.
    pub fn start(&self, profile: &str, task: &str, model: Option<&str>) -> Result<Run, Error> {
        self.start_named(profile, task, model, None, None)
    }

    /// As [`Host::start`], with the run's id chosen (`warren run --run-id`), for the
    /// suite and the benches: see [`Host::start_named`].
    #[cfg(feature = "internals")]
    pub fn start_with_run_id(&self, profile: &str, task: &str, id: &str) -> Result<Run, Error> {
        self.start_named(profile, task, None, Some(id), None)
    }

    /// As [`Host::start`], with the run's id chosen by the caller (`None`: random). Job
    /// ids derive from it: a run given an id hands out the ids every run of that id
    /// does, so the id must not be reused for unrelated runs. With `output_schema`,
    /// the root's answer is typed (`warren run --output-schema`): the profile's own
    /// schema, if it has one, is replaced for the root only.
    pub(crate) fn start_named(
        &self,
        profile: &str,
        task: &str,
        model: Option<&str>,
        run_id: Option<&str>,
        output_schema: Option<crate::config::OutputSchema>,
    ) -> Result<Run, Error> {
        let config = &self.parts.config;
        let mut profile = config.profile(profile)?;
        if output_schema.is_some() {
            profile.output_schema = output_schema;
        }
        if let Some(model) = model {
            if !config.models.contains_key(model) {
                return Err(crate::config::ConfigError::UnknownModel {
                    path: config.path.clone(),
                    name: model.to_string(),
                    available: config.models.keys().cloned().collect(),
                }
                .into());
            }
            profile.model = Some(model.to_string());
        }
        let job = self.root_job(profile, task, run_id)?;
        self.launch(job).map_err(Error::Run)
    }

    /// Starts a root agent with `profile` on `task` for a client of a server (`warren
    /// a2a`): its requests for a person wait for the client's answer, and its spans
    /// join the client's trace when `traceparent` is given.
    pub(crate) fn start_served(
        &self,
        profile: &str,
        task: &str,
        traceparent: Option<String>,
    ) -> Result<Run, Error> {
        let profile = self.parts.config.profile(profile)?;
        let job = JobStart {
            traceparent,
            answers: Some(crate::config::AnswerPolicy::Ask),
            ..self.root_job(profile, task, None)?
        };
        self.launch(job).map_err(Error::Run)
    }

    /// The root job of a run of `profile` on `task`, or why it cannot start.
    fn root_job(
        &self,
        profile: Profile,
        task: &str,
        run_id: Option<&str>,
    ) -> Result<JobStart, Error> {
        let config = &self.parts.config;
        if profile.model.is_none() {
            return Err(Error::Run(anyhow::anyhow!(
                "profile `{}` has no model: add a [models.NAME] table to {} (and `model = \"NAME\"` if there are several)",
                profile.name,
                config.path.display()
            )));
        }
        Ok(JobStart::root(
            profile,
            task.to_string(),
            config.run_limits.budget_usd,
            run_id.map(str::to_string),
        ))
    }

    /// Leaves `text` from a person (`from`) for agent `to` of `tree`, delivered as
    /// `mode` says: what `warren send` does, for a server's client.
    pub(crate) async fn message(
        &self,
        tree: &Arc<Tree>,
        from: &str,
        to: &crate::jobs::JobId,
        text: String,
        mode: crate::events::MessageMode,
    ) -> crate::scheduler::Receipt {
        let from = crate::scheduler::Sender::Person(from);
        self.parts
            .scheduler
            .message_from(tree, from, to, text, mode)
            .await
    }

    /// Opens a session under `profile` (default `main`): a new job tree whose root is
    /// the caller, who calls the profile's tools and the spawn tools through it; no
    /// model is called for the root. See [`Session`].
    pub fn session(&self, profile: Option<&str>) -> Result<Session, Error> {
        let profile = profile.unwrap_or(crate::config::DEFAULT_PROFILE);
        self.parts.config.profile(profile)?;
        Session::new(self.parts.clone(), profile).map_err(Error::Run)
    }

    /// Leaves `letter`, sent in the run that queued this worker's job, for agent `to`
    /// of `tree` (the job's agent, its root, or one of its sub-agents): delivered as a
    /// message from that run is.
    pub(crate) async fn relay(
        &self,
        tree: &Arc<Tree>,
        to: &crate::jobs::JobId,
        letter: crate::queue::wire::WireLetter,
    ) -> crate::scheduler::Receipt {
        let from = crate::scheduler::Sender::Relayed {
            from: &letter.from,
            seq: letter.seq,
        };
        self.parts
            .scheduler
            .message_from(tree, from, to, letter.text, letter.mode)
            .await
    }

    /// Starts a job taken from the queue as the root of a new tree.
    pub(crate) fn start_job(&self, job: JobStart) -> anyhow::Result<Run> {
        anyhow::ensure!(
            job.profile.model.is_some(),
            "profile `{}` has no model on this worker: add a [models.NAME] table to {}",
            job.profile.name,
            self.parts.config.path.display()
        );
        self.launch(job)
    }

    fn launch(&self, mut job: JobStart) -> anyhow::Result<Run> {
        let run_id = job.run_id.clone().unwrap_or_else(crate::jobs::random_id);
        let limits = RunLimits {
            budget_usd: job.budget_usd,
            answers: job.answers.unwrap_or(self.parts.config.run_limits.answers),
            ..self.parts.config.run_limits
        };
        let journal = crate::journal::open(
            &self.parts.config,
            self.parts.registry.digests(),
            &limits,
            &run_id,
            &job.profile.name,
            &job.task,
            None,
        )?;
        let tree = Tree::for_queue_job(limits, job.queue_job.clone(), Some(run_id), journal);
        tree.carried.hand_in(job.carried.take(), job.keep_history);
        self.launch_in(tree, job)
    }

    /// Starts `job` as the root of `tree` (one that finished before a resume ends at
    /// once with its recorded outcome).
    fn launch_in(&self, tree: Arc<Tree>, job: JobStart) -> anyhow::Result<Run> {
        // Its scratch directory before the job exists, as for every agent.
        let access = ToolAccess::new(job.profile.clone())?;
        let role = Role {
            profile: job.profile,
            limits: job.limits,
            extra_prompt: job.extra_prompt,
            depth: job.depth,
            traceparent: job.traceparent,
        };
        // Subscribed before the root starts: the first caller of `Run::events` sees
        // its `agent_started`.
        let first_events = std::sync::Mutex::new(Some(tree.events.subscribe()));
        let root = RootStart {
            role,
            task: job.task,
            access,
        };
        let (root, handle) = self.parts.scheduler.start_root(&tree, root);
        // A queue job's messages and answers come through its parent's run (Redis):
        // its own run, on a worker, opens no control socket.
        if tree.queue_job.is_none() {
            self::control::serve(self.parts.clone(), tree.clone(), root.clone());
        }
        Ok(Run {
            tree,
            root,
            handle,
            first_events,
        })
    }
}

impl HostBuilder {
    /// Loads the plugins and connects the models, as [`Host::load`], with the
    /// supplied parts.
    pub async fn load(self) -> Result<Host, Error> {
        let (config, supplied) = self.checked()?;
        Host::load_with(config, Keys::Required, supplied).await
    }
}

/// How a host treats a model whose API key variable is not set.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// Loading fails, naming the variable.
    Required,
    /// The model is left out ([`Host::missing_keys`]).
    LeaveOutMissing,
    /// The model is connected without a key (nothing will be sent).
    NotNeeded,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunLimits;
    use crate::outcome::AgentState;

    #[tokio::test]
    async fn a_root_that_panics_is_an_error_not_a_cancellation() {
        let tree = Tree::new(RunLimits::default());
        let root = tree.add_for_tests();
        let run = Run {
            tree,
            root,
            handle: tokio::spawn(async { panic!("a bug") }),
            first_events: std::sync::Mutex::new(None),
        };
        let report = run.wait().await;
        assert_eq!(report.root.state, AgentState::Error);
        assert!(report.root.error.unwrap().contains("crashed"));
    }
}
