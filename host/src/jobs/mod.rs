//! The jobs of a run: the tree (ids, phases, results, the shared budget), the one
//! owner of a job's life, what a parent hands a child, and how results read.
//!
//! Layout: [`job`] (one job: its id, phase and title), [`tree`] (the job table of one run), [`handle`] ([`JobHandle`]: every job
//! is registered, started and finished through one, so each transition and its event
//! happen in one place), [`spawn_request`] (the shape of a `spawn_agent` call), [`child`] (the one narrowing rule, a child's first message, and
//! the [`Backend`] seam through which a child runs on another machine), `slots` (who
//! runs and who waits), [`budget`] (what the run may spend, and every check against it), [`mode`] (how a run runs: live, resumed, replayed or forked, and the replay and fork machinery) and [`blocks`] (result blocks). Every sub-agent is a job; its
//! cancellation token is a child of its parent's, so cancelling a job cancels every
//! descendant, and results stay in the tree until the run ends so repeated awaits see
//! them.

pub(crate) mod blocks;
pub(crate) mod budget;
pub(crate) mod carried;
pub(crate) mod child;
pub(crate) mod handle;
mod happened;
pub(crate) mod job;
pub(crate) mod mailbox;
pub(crate) mod mode;
pub(crate) mod progress;
pub(crate) mod requests;
pub(crate) mod run_state;
pub(crate) mod slots;
pub(crate) mod spawn_request;
pub(crate) mod tree;

pub(crate) use self::blocks::{not_found_block, result_block, thousands};
pub(crate) use self::carried::{Again, History, RemoteEnd};
pub(crate) use self::child::{clamp_notes, compose_task, narrow, Backend, ChildAsk, ChildSpec};
pub(crate) use self::handle::{JobHandle, Placement};
pub(crate) use self::mode::{Divergence, Fork, Replay, ReplayTools, StopKind};
pub(crate) use self::requests::Opened;
pub(crate) use self::tree::random_id;
pub(crate) use self::tree::{title, CancelJob, Job, JobId, JobSelection, Phase, Tree};
