//! The scheduler: the one owner of the spawn protocol. Every caller that starts,
//! awaits, lists or cancels sub-agents — the spawn tools of an agent's model, an MCP
//! session, the library's runs, a worker's jobs — speaks to one [`Scheduler`], which
//! returns typed values: a spawn's [`Grant`] (the child's id, whether it started or
//! queued, what was asked and not granted), a wait's [`Report`]s (each child as it
//! stands, or not found), the children still to deliver. Callers put those in words
//! (the agent loop for its model, the session for its client); nobody parses text.
//!
//! A spawn, in order (see `spawn.rs`): the base profile (the one asked for, or the
//! parent's own), the one narrowing rule ([`crate::jobs::narrow`]), the checks (its
//! model's key, the run's [`Budget`](crate::jobs::budget::Budget)), the child's scratch
//! directory, its registration as a job ([`crate::jobs::JobHandle`]), a fork's change
//! (the run's [`Mode`](crate::jobs::Mode)), its concurrency slots reserved in spawn
//! order, then its run: here through the [`Launch`] the agent layer gives the
//! scheduler, or on a worker through the host's [`Backend`]. Delivery (`wait.rs`): a
//! waiting parent lends its slots out and takes them back ahead of queued spawns;
//! results are marked delivered as they are handed over, so each reaches its parent
//! once.
//!
//! Layout: `parts` (the [`Scheduler`] and what its calls take), `spawn` (a spawn and
//! a run's root), `wait` (awaiting, delivering, the slot a waiting parent lends out),
//! `messages` (a message left for a running descendant, answered by a receipt).

mod messages;
mod parts;
mod spawn;
mod wait;

pub(crate) use self::messages::{Receipt, Sender};
pub(crate) use self::parts::{AgentRun, Ended, Launch, Parent, Role, Scheduler, Start, Wake};
pub(crate) use self::spawn::{Grant, RootStart};
pub(crate) use self::wait::{Report, Until};
