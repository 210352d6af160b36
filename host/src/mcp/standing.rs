//! The trees of MCP 2026-07-28 clients over HTTP. That revision has no sessions:
//! each request stands alone, with its protocol version and the client's
//! capabilities in its `_meta`. So that a background `spawn_agent`'s job id still
//! means something in the next request (`await_agents`, `message_agent`,
//! `cancel_agent`, `list_agents`), warren keeps one standing tree per credential for
//! these requests, with its own budget and concurrency limit, as a session's. It ends,
//! cancelling its agents, once it has gone [`HttpLimits::session_idle`] without a
//! request and none is under way; the credential's next request starts a new one.
//! Credentials are few (the server's tokens), so these trees are too.
//!
//! [`HttpLimits::session_idle`]: super::HttpLimits::session_idle

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::served::SessionOptions;
use crate::host::{Host, Session};
use crate::listener::auth::Owner;

/// One credential's standing tree and when a request last used it.
struct Kept {
    session: Arc<Session>,
    used: Instant,
}

/// The standing trees of a server's 2026-07-28 clients, by credential.
pub(super) struct Standing {
    host: Host,
    options: SessionOptions,
    idle: Duration,
    trees: Mutex<HashMap<Owner, Kept>>,
}

impl Standing {
    pub(super) fn new(host: Host, options: SessionOptions, idle: Duration) -> Standing {
        Standing {
            host,
            options,
            idle,
            trees: Mutex::new(HashMap::new()),
        }
    }

    /// `owner`'s standing tree, made when it has none (or its last one ended idle);
    /// the trees idle past their time end here.
    pub(super) fn tree(&self, owner: Owner) -> anyhow::Result<Arc<Session>> {
        let mut trees = self.trees.lock().unwrap_or_else(PoisonError::into_inner);
        // A tree a request (or a task's wait) still holds is in use, however old.
        let idle = self.idle;
        trees.retain(|_, kept| kept.used.elapsed() < idle || Arc::strong_count(&kept.session) > 1);
        if let Some(kept) = trees.get_mut(&owner) {
            kept.used = Instant::now();
            return Ok(kept.session.clone());
        }
        let session = self
            .host
            .session(self.options.profile.as_deref())?
            .with_await_limit(self.options.await_limit);
        let session = Arc::new(session);
        tracing::info!(
            profile = session.profile(),
            run = %session.tree().run_id,
            "MCP 2026-07-28 client: a standing tree for its credential"
        );
        trees.insert(
            owner,
            Kept {
                session: session.clone(),
                used: Instant::now(),
            },
        );
        Ok(session)
    }
}
