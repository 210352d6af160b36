//! The task table's entries: where each task stands, and what `tasks/get` of the
//! 2026-07-28 tasks extension is shown of one.

use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime};

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::host::Session;
use crate::listener::auth::Owner;

/// Where a task stands.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum State {
    /// Its call is under way.
    Working,
    /// Its call ended; the `CallToolResult` (an error result: `failed`).
    Done { result: Value, failed: bool },
    /// Cancelled by `tasks/cancel`; its agents were cancelled.
    Cancelled,
}

/// One task.
pub(super) struct Task {
    pub(super) owner: Owner,
    pub(super) created: SystemTime,
    pub(super) updated: SystemTime,
    pub(super) state: State,
    /// The latest progress of its agents (turns, tools, tokens, cost).
    pub(super) message: Option<String>,
    /// When it ended, for its retention.
    pub(super) ended: Option<Instant>,
    /// Cancels its call and its agents.
    pub(super) cancel: CancellationToken,
    /// True once it ended (for `tasks/result`, which waits).
    pub(super) done: watch::Receiver<bool>,
    /// Its tree while it runs, whose requests for a person it waits on.
    pub(super) tree: Weak<Session>,
}

/// A task as `tasks/get` of the 2026-07-28 tasks extension shows it.
pub(crate) struct Snapshot {
    pub(crate) created: SystemTime,
    pub(crate) updated: SystemTime,
    pub(crate) state: State,
    pub(crate) message: Option<String>,
    /// Its tree, while it runs.
    pub(crate) tree: Option<Arc<Session>>,
}
