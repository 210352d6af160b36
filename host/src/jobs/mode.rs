//! How a run runs, as one value ([`Mode`]): live, resumed from its journal
//! (`warren resume`), replayed from a recording (`warren replay`) or forked from one
//! (`warren replay --from`); and what that means for each of its agents
//! ([`AgentMode`]), asked once per decision. Here too is the replay and fork
//! machinery the loop does not need to see: how a replay's tools are served, the
//! first place where the new run differs from the recording (which ends a replay),
//! which agents of a fork run live, and how the forked agent is changed.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::job::JobId;
use crate::config::{AgentLimits, Config, Profile};
use crate::journal::resume::RecordedAgent;
use crate::journal::{Record, Resume};
use crate::outcome::AgentOutcome;

/// How a run runs.
#[derive(Clone, Default)]
pub(crate) enum Mode {
    /// A new run: every model is asked, every tool runs.
    #[default]
    Live,
    /// A run continued after its process died: what its journal holds is reused
    /// (ids, responses, results, spending, agents that finished).
    Resumed(Arc<Resume>),
    /// A recorded run run again, its models answered from the recording while each
    /// request is the recorded one; nothing is journaled.
    Replayed(Arc<Recording>),
    /// A replay in which one agent (and, later, whoever leaves the recording) runs
    /// live: a new, journaled run.
    Forked(Arc<Recording>),
}

/// A recording and how it is replayed.
pub(crate) struct Recording {
    /// What the recorded run did.
    pub(crate) resume: Arc<Resume>,
    /// The replay's settings and where it left the recording.
    pub(crate) replay: Replay,
}

/// What a run's mode means for one of its agents.
pub(crate) enum AgentMode<'a> {
    /// It asks its model and runs its tools.
    Live,
    /// It reuses what an earlier process recorded of it (if anything).
    Resumed(Option<&'a RecordedAgent>),
    /// It is served from the recording, checked against it (`None`: not recorded).
    Replayed(&'a Replay, Option<&'a RecordedAgent>),
    /// In a fork, it runs live: the forked agent, one of its new descendants, or an
    /// agent that left the recording.
    ForkLive,
}

impl Mode {
    /// A replay of `resume` with `replay`'s settings: a fork when it names one.
    pub(crate) fn replaying(resume: Arc<Resume>, replay: Replay) -> Mode {
        let fork = replay.fork.is_some();
        let recording = Arc::new(Recording { resume, replay });
        match fork {
            true => Mode::Forked(recording),
            false => Mode::Replayed(recording),
        }
    }

    /// What an earlier process recorded (resumed), or the recording (replayed).
    fn recording(&self) -> Option<&Resume> {
        match self {
            Mode::Live => None,
            Mode::Resumed(resume) => Some(resume),
            Mode::Replayed(recording) | Mode::Forked(recording) => Some(&recording.resume),
        }
    }

    /// Request `id` for a person as the recording holds it, with its answer if one
    /// was recorded (a resumed run asks it again; a replay serves the answer).
    pub(crate) fn recorded_request(
        &self,
        id: &str,
    ) -> Option<(
        crate::events::PersonRequest,
        Option<crate::events::PersonAnswer>,
    )> {
        self.recording()?.request(id).cloned()
    }

    /// The replay, in a replay or a fork.
    pub(crate) fn replay(&self) -> Option<&Replay> {
        match self {
            Mode::Replayed(recording) | Mode::Forked(recording) => Some(&recording.replay),
            _ => None,
        }
    }

    /// What the mode means for agent `id`.
    pub(crate) fn agent(&self, id: &JobId) -> AgentMode<'_> {
        match self {
            Mode::Live => AgentMode::Live,
            Mode::Resumed(resume) => AgentMode::Resumed(resume.agent(&id.0)),
            Mode::Forked(recording) if recording.replay.is_live(&id.0) => AgentMode::ForkLive,
            Mode::Replayed(recording) | Mode::Forked(recording) => {
                AgentMode::Replayed(&recording.replay, recording.resume.agent(&id.0))
            }
        }
    }

    /// What the recording (or an earlier process) holds of agent `id`.
    pub(crate) fn recorded(&self, id: &JobId) -> Option<&RecordedAgent> {
        self.recording()?.agent(&id.0)
    }

    /// How job `id` ended in an earlier process, when the run continues one (a replay
    /// runs every job again).
    pub(crate) fn earlier_outcome(&self, id: &JobId) -> Option<AgentOutcome> {
        match self {
            Mode::Resumed(resume) => resume.agent(&id.0)?.finished.clone(),
            _ => None,
        }
    }

    /// Wall time job `id` ran in earlier processes (none in a replay).
    pub(crate) fn earlier_time(&self, id: &JobId) -> Duration {
        match self {
            Mode::Resumed(resume) => resume
                .agent(&id.0)
                .map_or(Duration::ZERO, RecordedAgent::time_spent),
            _ => Duration::ZERO,
        }
    }

    /// Whether a child may run on a worker: not in a replay, which runs every agent
    /// here.
    pub(crate) fn may_run_elsewhere(&self) -> bool {
        matches!(self, Mode::Live | Mode::Resumed(_))
    }

    /// Whether each recorded response counts as spent again: in a replay or a fork,
    /// so budgets end it where they ended the run (a resumed run's earlier spending
    /// was counted when it resumed).
    pub(crate) fn charges_recorded(&self) -> bool {
        matches!(self, Mode::Replayed(_) | Mode::Forked(_))
    }

    /// Whether a continued run's queue jobs may exist already (an earlier process
    /// enqueued them): they are adopted, not enqueued again.
    pub(crate) fn continues(&self) -> bool {
        matches!(self, Mode::Resumed(_))
    }

    /// The recorded id a new job of `parent` (of `profile`, given `task`) takes, when
    /// the recording has one: a fork's live agent spawns live children, which take
    /// none.
    pub(crate) fn claim(
        &self,
        parent: Option<&JobId>,
        profile: &str,
        task: &str,
    ) -> Option<String> {
        if let (Mode::Forked(recording), Some(parent)) = (self, parent) {
            if recording.replay.is_live(&parent.0) {
                return None;
            }
        }
        self.recording()?
            .claim(parent.map(|p| p.0.as_str()), profile, task)
    }

    /// Whether `id` belongs to a recorded job (a new job must not take it).
    pub(crate) fn is_recorded(&self, id: &JobId) -> bool {
        self.recording().is_some_and(|r| r.is_recorded(&id.0))
    }

    /// Whether `record` is in the journal already: a resumed run's journal has its
    /// earlier records (a fork's journal is new).
    pub(crate) fn journaled(&self, record: &Record) -> bool {
        matches!(self, Mode::Resumed(resume) if resume.has(record))
    }

    /// In a fork, where `id` is the forked agent: its profile and limits as the fork
    /// changes `base` (another profile's settings, model or prompt), then narrowed by
    /// `narrow` as any child is; `None` otherwise.
    pub(crate) fn forked(
        &self,
        id: &JobId,
        base: &Profile,
        config: &Config,
        narrow: impl FnOnce(&Profile) -> Result<(Profile, AgentLimits), String>,
    ) -> Option<Result<(Profile, AgentLimits), String>> {
        let fork = self.replay()?.fork.as_ref().filter(|f| f.from == id.0)?;
        let mut base = base.clone();
        let changed = (|| {
            // The model after narrowing, which would otherwise take the parent's.
            let without_model = Fork {
                model: None,
                ..fork.clone()
            };
            fork_profile(config, &mut base, &without_model)?;
            let (mut profile, limits) = narrow(&base)?;
            if let Some(model) = &fork.model {
                profile.model = Some(model.clone());
            }
            Ok((profile, limits))
        })();
        Some(changed)
    }
}

/// Changes `profile` as `fork` asks: another profile's settings (its name kept, so
/// the agent keeps its place), another model, another system prompt.
pub(crate) fn fork_profile(
    config: &Config,
    profile: &mut Profile,
    fork: &Fork,
) -> Result<(), String> {
    if let Some(name) = &fork.profile {
        let mut other = config
            .find_profile(name)
            .cloned()
            .ok_or_else(|| format!("no profile `{name}`"))?;
        other.name = profile.name.clone();
        *profile = other;
    }
    if let Some(model) = &fork.model {
        profile.model = Some(model.clone());
    }
    if let Some(prompt) = &fork.prompt {
        profile.system_prompt = prompt.clone();
    }
    Ok(())
}

/// A fork (`warren replay --from`): the agent whose subtree runs live, and how it is
/// changed.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fork {
    /// The recorded agent's id.
    pub from: String,
    /// The profile it runs under instead (its parent still sees the one it asked for).
    pub profile: Option<String>,
    /// The model it runs on instead (a `[models]` name).
    pub model: Option<String>,
    /// Its system prompt instead.
    pub prompt: Option<String>,
}

/// Where a replayed agent's tool results come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ReplayTools {
    /// Run again in their sandboxes and compared with the recorded results (the
    /// default: a changed plugin or capability shows).
    #[default]
    Rerun,
    /// Served from the journal (spawn tools still run: they re-create the children).
    Recorded,
}

/// Why a replay stopped before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopKind {
    /// The new run asked something the recording did not: a different request, tool
    /// result, or agent.
    Differs,
    /// The recording ends here: the recorded run had not finished.
    RecordingEnds,
}

/// The first point where a replay left the recording.
#[derive(Clone, Debug)]
pub(crate) struct Divergence {
    /// What stopped it.
    pub kind: StopKind,
    /// Its path in the tree (profiles and ids from the root).
    pub path: String,
    /// Its turn (1-based).
    pub turn: u32,
    /// What differs, in a sentence.
    pub what: String,
    /// A readable diff (recorded `-`, now `+`), or detail.
    pub detail: String,
}

/// A replay's settings and its outcome so far.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// Where tool results come from.
    pub tools: ReplayTools,
    /// When this is a fork: where, and what changes.
    pub fork: Option<Fork>,
    first: Mutex<Option<Divergence>>,
    /// In a fork, the replayed agents that left the recording and run live from
    /// there (the forked agent and its new descendants are live from the start).
    live: Mutex<HashSet<String>>,
}

impl Replay {
    /// A replay whose tool results come from `tools`; a fork when `fork` is given.
    pub(crate) fn new(tools: ReplayTools, fork: Option<Fork>) -> Replay {
        Replay {
            tools,
            fork,
            first: Mutex::default(),
            live: Mutex::default(),
        }
    }

    /// Whether agent `id` runs live: the forked agent, an agent of a fork that left
    /// the recording, or (not recorded) a new one.
    pub(crate) fn is_live(&self, id: &str) -> bool {
        self.fork.as_ref().is_some_and(|f| f.from == id)
            || self
                .live
                .lock()
                .expect("replay state poisoned")
                .contains(id)
    }

    /// In a fork, agent `id` runs live from now on.
    pub(crate) fn go_live(&self, id: &str) {
        self.live
            .lock()
            .expect("replay state poisoned")
            .insert(id.to_string());
    }

    /// Notes a point where the run left the recording; only the first counts (what
    /// follows it is its consequence). Returns whether it was the first.
    pub(crate) fn stop(&self, divergence: Divergence) -> bool {
        let mut first = self.first.lock().expect("replay state poisoned");
        if first.is_some() {
            return false;
        }
        *first = Some(divergence);
        true
    }

    /// The first point where the run left the recording, if it did.
    pub(crate) fn divergence(&self) -> Option<Divergence> {
        self.first.lock().expect("replay state poisoned").clone()
    }
}
