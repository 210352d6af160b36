//! Capability policy as plain data: what a profile's tool calls may touch and use,
//! how a child's is narrowed under its parent's, and the portable form a queue job
//! carries. No engine here: the configuration reads into these types, the sandbox
//! enforces them, the narrowing rule and the queue pass them on.
//!
//! Layout: [`call_limits`] (the numeric per-call limits, declared once in one table),
//! [`net`] (host patterns and their matching), [`capabilities`] (the grants, the whole
//! [`CapabilitySet`] and its intersection), [`ceiling`] (the queue's wire form).

pub(crate) mod call_limits;
pub(crate) mod capabilities;
pub(crate) mod ceiling;
pub(crate) mod net;

pub(crate) use self::call_limits::MAX_MEMORY_MB;
pub(crate) use self::call_limits::{CallLimits, PartialCallLimits};
pub(crate) use self::capabilities::{CapabilitySet, EnvGrant, FsGrant, FsMode, SCRATCH_GUEST_PATH};
pub(crate) use self::ceiling::Ceiling;
pub(crate) use self::net::{NetPattern, NetPolicy};
