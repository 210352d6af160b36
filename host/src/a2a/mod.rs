//! `warren a2a`: chosen profiles served as agents of the Agent2Agent protocol (A2A
//! 1.0, JSON-RPC binding) over HTTP, for clients such as the A2A SDKs, ADK and the
//! Microsoft Agent Framework.
//!
//! Each profile is an agent at `/a2a/PROFILE`, described by its card at
//! `/a2a/PROFILE/.well-known/agent-card.json` (the first profile's also at
//! `/.well-known/agent-card.json`). A message starts a task, and a task is a run
//! (`Host::start`): its id is the run's, so `warren show TASK` prints it and `warren
//! send` and `warren approve` reach it; its status follows the run's events (the
//! progress of every agent of the tree), its artifact is the root's answer. An
//! approval or a question of any agent of the tree makes the task `INPUT_REQUIRED`;
//! the client's next message to the task answers it. A message to a working task is
//! left for the root agent, read at its next turn. `CancelTask` cancels the tree.
//!
//! Every request but the card's must carry the bearer token (`listener::auth`, as
//! `warren mcp --http`); a request from a browser page of another origin is refused
//! (`listener::origin`). The bounds: the listener's connections and header time,
//! `server::MAX_BODY` per request, [`A2aLimits::max_tasks`] per credential, finished tasks
//! forgotten after [`A2aLimits::retention`] (then read from their runs' journals,
//! `stored`, as after a restart).

mod card;
mod history;
mod listing;
mod options;
mod person;
mod respond;
mod rpc;
mod server;
mod stored;
mod task;

pub(crate) use self::options::{A2aLimits, A2aOptions};
pub(crate) use self::server::serve;
