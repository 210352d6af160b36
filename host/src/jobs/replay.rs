//! A replay of a recorded run (`warren replay`): how its tools are served, and the
//! first place where the new run differs from the recording, which ends it.

use std::sync::Mutex;

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
    first: Mutex<Option<Divergence>>,
}

impl Replay {
    /// A replay whose tool results come from `tools`.
    pub fn new(tools: ReplayTools) -> Replay {
        Replay {
            tools,
            first: Mutex::default(),
        }
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
