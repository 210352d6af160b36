//! Runs that continue a journal: `warren resume` (with or without a follow-up to
//! one of the run's agents) and `warren replay` (a replay or a fork).

use std::sync::Arc;

use super::job_start::JobStart;
use super::run::Run;
use super::{Error, Host};
use crate::jobs::Tree;

impl Host {
    /// Continues run `name` (its id, a unique prefix, or `last`) from its journal,
    /// after the process that ran it died: agents that finished are not run again,
    /// recorded model responses and tool results are reused, a call in doubt is run
    /// again only where that cannot repeat an effect, and what was spent counts
    /// against every limit. Refused for a finished run, a run another process holds,
    /// a run whose configuration or plugins changed (unless `force`), and an MCP
    /// session (its caller drove it).
    pub fn resume(&self, name: &str, force: bool) -> Result<Run, Error> {
        self.resume_journaled(name, force, None)
            .map_err(Error::Journal)
    }

    /// Continues run `name` (finished or not) with `follow_up` sent to one of its
    /// agents, recorded first: the agent is brought back from its record, each of its
    /// ancestors that had finished replayed from theirs, and it reads the follow-up at
    /// its recorded end and answers live (`warren resume RUN --follow-up AGENT TEXT`).
    pub(crate) fn follow_up(
        &self,
        name: &str,
        force: bool,
        follow_up: &crate::journal::follow_up::FollowUp,
    ) -> Result<Run, Error> {
        self.resume_journaled(name, force, Some(follow_up))
            .map_err(Error::Journal)
    }

    fn resume_journaled(
        &self,
        name: &str,
        force: bool,
        follow_up: Option<&crate::journal::follow_up::FollowUp>,
    ) -> anyhow::Result<Run> {
        let config = &self.parts.config;
        let digests = self.parts.registry.digests();
        let (journal, resume) =
            crate::journal::take_over(config, &digests, name, force, follow_up)?;
        anyhow::ensure!(
            resume.task != super::session::SESSION_TASK,
            "run {} is an MCP session: its client drove it, so there is nothing to continue",
            resume.run
        );
        let mut profile = config.profile(&resume.profile)?;
        // The model it ran on (`warren run --model`), when that is still configured.
        if let Some(model) = resume
            .agent(&resume.root)
            .and_then(|root| root.model.clone())
            .filter(|model| config.models.contains_key(model))
        {
            profile.model = Some(model);
        }
        let task = resume.task.clone();
        let tree = Tree::resumed(config.run_limits, journal, Arc::new(resume));
        let start = JobStart::root(profile, task, config.run_limits.budget_usd, None);
        self.launch_in(tree, start)
    }

    /// Replays the run recorded at `journal` ([`crate::journal::locate`]) with this
    /// host's configuration and plugins: every agent runs again, its model answered
    /// from the recording while each request is the recorded one, its tools run
    /// again or served as recorded (`tools`). Nothing is journaled and no model is
    /// called; the first difference stops the replay.
    ///
    /// With `fork`, a fork instead: a new, journaled run in which the agent
    /// `fork.from` (changed as `fork` says) and everything it spawns run live, and
    /// every other agent is replayed until its requests leave the recording (when the
    /// forked agent's new result reaches it), then runs live from there.
    /// Returns the run and the recording.
    pub(crate) fn replay(
        &self,
        journal: &std::path::Path,
        tools: crate::jobs::ReplayTools,
        fork: Option<crate::jobs::Fork>,
    ) -> Result<(Run, Arc<crate::journal::Resume>), Error> {
        self.replay_journaled(journal, tools, fork)
            .map_err(Error::Journal)
    }

    fn replay_journaled(
        &self,
        journal: &std::path::Path,
        tools: crate::jobs::ReplayTools,
        fork: Option<crate::jobs::Fork>,
    ) -> anyhow::Result<(Run, Arc<crate::journal::Resume>)> {
        let config = &self.parts.config;
        let recording = Arc::new(crate::journal::recording(journal)?);
        if let Some(fork) = &fork {
            self.check_fork(&recording, fork)?;
        }
        Self::check_replayable(&recording)?;
        let mut profile = config.profile(&recording.profile)?;
        if let Some(model) = recording
            .agent(&recording.root)
            .and_then(|r| r.model.clone())
        {
            anyhow::ensure!(
                config.models.contains_key(&model),
                "run {} ran on model `{model}`, which {} does not define",
                recording.run,
                config.path.display()
            );
            profile.model = Some(model);
        }
        let (run_id, journal) = match &fork {
            Some(fork) => {
                let run_id = crate::jobs::random_id();
                let journal = crate::journal::open(
                    config,
                    self.parts.registry.digests(),
                    &config.run_limits,
                    &run_id,
                    &recording.profile,
                    &recording.task,
                    Some(crate::journal::ForkedFrom {
                        run: recording.run.clone(),
                        agent: fork.from.clone(),
                    }),
                )?;
                (Some(run_id), journal)
            }
            None => (None, None),
        };
        if fork.as_ref().is_some_and(|f| f.from == recording.root) {
            crate::jobs::mode::fork_profile(config, &mut profile, fork.as_ref().expect("a fork"))
                .map_err(|e| anyhow::anyhow!(e))?;
        }
        let tree = Tree::replaying(
            config.run_limits,
            recording.clone(),
            crate::jobs::Replay::new(tools, fork),
            run_id,
            journal,
        );
        let run = self.launch_in(
            tree,
            JobStart::root(
                profile,
                recording.task.clone(),
                config.run_limits.budget_usd,
                None,
            ),
        )?;
        Ok((run, recording))
    }

    /// Refuses to replay an MCP session (its client drove it) or a run whose journal
    /// reached its size bound (the rest was not recorded).
    fn check_replayable(recording: &crate::journal::Resume) -> anyhow::Result<()> {
        anyhow::ensure!(
            recording.task != super::session::SESSION_TASK,
            "run {} is an MCP session: its client drove it, so there is nothing to replay",
            recording.run
        );
        anyhow::ensure!(
            recording.full.is_none(),
            "run {}'s journal reached its size bound ([journal] max_run_mib): what the run did after it was not recorded, so it cannot be replayed",
            recording.run
        );
        Ok(())
    }

    /// Refuses a fork from an agent the recording does not have (listing those it
    /// has) or to a profile or model the configuration does not define.
    fn check_fork(
        &self,
        recording: &crate::journal::Resume,
        fork: &crate::jobs::Fork,
    ) -> anyhow::Result<()> {
        let config = &self.parts.config;
        if recording.agent(&fork.from).is_none() {
            let agents: Vec<String> = recording
                .agents_in_order()
                .map(|a| {
                    let task: String = a.intro.task.chars().take(50).collect();
                    format!(
                        "  {} ({}): {}",
                        a.intro.agent,
                        a.intro.profile,
                        task.replace('\n', " ")
                    )
                })
                .collect();
            anyhow::bail!(
                "run {} has no agent `{}`; its agents are:\n{}",
                recording.run,
                fork.from,
                agents.join("\n")
            );
        }
        if let Some(name) = &fork.profile {
            config.profile(name)?;
        }
        if let Some(model) = &fork.model {
            anyhow::ensure!(
                config.models.contains_key(model),
                "no model `{model}` in {} (models: {})",
                config.path.display(),
                config.models.keys().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        Ok(())
    }
}
