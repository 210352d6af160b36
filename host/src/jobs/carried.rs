//! A conversation carried between machines, so a follow-up resumes a child that
//! finished on a worker: the worker hands back its agent's history when the job
//! asks it to keep it ([`Carried::keep`]); the parent holds it while the child
//! rests, and a follow-up sends it, with the letters that woke the child, in a new
//! job ([`Again`]), whose root opens with it instead of its task.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::mailbox::Letter;
use crate::llm::Message;
use crate::outcome::AgentOutcome;

/// An agent's conversation as it finished: the messages of its request (its whole
/// history, its task first) and the turns it took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct History {
    /// Its request's messages.
    pub(crate) messages: Vec<Message>,
    /// Model turns taken.
    pub(crate) turns: u32,
}

/// A follow-up's run of a remote child that finished: the history it rested with,
/// how its earlier runs ended (their cost and time count on against its limits),
/// and which follow-up this is (1, 2, …).
#[derive(Clone, Debug)]
pub(crate) struct Again {
    /// The conversation it rested with.
    pub(crate) history: History,
    /// Its outcome when it rested.
    pub(crate) earlier: AgentOutcome,
    /// The follow-ups it has taken, this one included.
    pub(crate) number: usize,
}

/// How a remote child's run ended: its outcome and, when a follow-up may resume it,
/// its history.
pub(crate) struct RemoteEnd {
    /// How it ended (its earlier runs' cost, usage and time included).
    pub(crate) outcome: AgentOutcome,
    /// Its conversation, kept for a follow-up (`None`: it ended for good).
    pub(crate) history: Option<History>,
}

impl From<AgentOutcome> for RemoteEnd {
    fn from(outcome: AgentOutcome) -> RemoteEnd {
        RemoteEnd {
            outcome,
            history: None,
        }
    }
}

/// What a queue job's tree carries in and out: the history and letters its root
/// opens with (a follow-up's job), and the root's history when it finished ok, kept
/// when the job asked for it.
#[derive(Debug, Default)]
pub(crate) struct Carried {
    given: Mutex<Option<(History, Vec<Letter>)>>,
    keep: std::sync::atomic::AtomicBool,
    kept: Mutex<Option<History>>,
}

impl Carried {
    /// The root opens with `history` and reads `letters` first; with `keep`, its
    /// history is kept when it finishes ok.
    pub(crate) fn hand_in(&self, given: Option<(History, Vec<Letter>)>, keep: bool) {
        *lock(&self.given) = given;
        self.keep.store(keep, std::sync::atomic::Ordering::Relaxed);
    }

    /// What the root opens with, taken once.
    pub(crate) fn take_given(&self) -> Option<(History, Vec<Letter>)> {
        lock(&self.given).take()
    }

    /// Whether the root's history is to be kept when it finishes ok.
    pub(crate) fn keeps(&self) -> bool {
        self.keep.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Keeps the root's history.
    pub(crate) fn keep(&self, history: History) {
        *lock(&self.kept) = Some(history);
    }

    /// The root's kept history, taken.
    pub(crate) fn take_kept(&self) -> Option<History> {
        lock(&self.kept).take()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
