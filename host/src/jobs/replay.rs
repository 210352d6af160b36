//! A replay of a recorded run (`warren replay`): how its tools are served, the first
//! place where the new run differs from the recording (which ends a replay), and for
//! a fork, which agents run live.

use std::collections::HashSet;
use std::sync::Mutex;

/// A fork (`warren replay --from`): the agent whose subtree runs live, and how it is
/// changed.
#[derive(Clone, Debug, Default)]
pub struct Fork {
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
pub enum ReplayTools {
    /// Run again in their sandboxes and compared with the recorded results (the
    /// default: a changed plugin or capability shows).
    #[default]
    Rerun,
    /// Served from the journal (spawn tools still run: they re-create the children).
    Recorded,
}

/// Why a replay stopped before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopKind {
    /// The new run asked something the recording did not: a different request, tool
    /// result, or agent.
    Differs,
    /// The recording ends here: the recorded run had not finished.
    RecordingEnds,
}

/// The first point where a replay left the recording.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// What stopped it.
    pub kind: StopKind,
    /// The agent's id.
    pub agent: String,
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
pub struct Replay {
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
    pub fn new(tools: ReplayTools, fork: Option<Fork>) -> Replay {
        Replay {
            tools,
            fork,
            first: Mutex::default(),
            live: Mutex::default(),
        }
    }

    /// Whether agent `id` runs live: the forked agent, an agent of a fork that left
    /// the recording, or (not recorded) a new one.
    pub fn is_live(&self, id: &str) -> bool {
        self.fork.as_ref().is_some_and(|f| f.from == id)
            || self
                .live
                .lock()
                .expect("replay state poisoned")
                .contains(id)
    }

    /// In a fork, agent `id` runs live from now on.
    pub fn go_live(&self, id: &str) {
        self.live
            .lock()
            .expect("replay state poisoned")
            .insert(id.to_string());
    }

    /// Notes a point where the run left the recording; only the first counts (what
    /// follows it is its consequence). Returns whether it was the first.
    pub fn stop(&self, divergence: Divergence) -> bool {
        let mut first = self.first.lock().expect("replay state poisoned");
        if first.is_some() {
            return false;
        }
        *first = Some(divergence);
        true
    }

    /// The first point where the run left the recording, if it did.
    pub fn divergence(&self) -> Option<Divergence> {
        self.first.lock().expect("replay state poisoned").clone()
    }
}
