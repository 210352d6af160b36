//! The HTTP server's open sessions: whose each is, when it was last used and whether
//! a request of it is under way, so that a full server makes room instead of locking
//! every new client out. An `initialize` finds a place within
//! [`SessionLimits::max_sessions`] and its credential's
//! [`SessionLimits::max_sessions_per_token`]; when a limit is reached, the least
//! recently used session that has been idle (no request of it under way, its event
//! stream included) for [`SessionLimits::evict_after`] is ended, cancelling its agents,
//! and its place given to the new one. Only when no session is that idle is the
//! `initialize` refused (503, naming the limit).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::SessionManager as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::host::Session;
use crate::listener::auth::Owner;
use crate::listener::BoxBody;

/// Longest an `initialize` waits for the place of the session it ended to come back
/// (the session's agents are cancelled and its tree dropped first).
const EVICTION_WAIT: Duration = Duration::from_secs(5);

/// The limits a [`SessionBook`] keeps (from `HttpLimits`).
#[derive(Clone, Copy, Debug)]
pub(super) struct SessionLimits {
    /// Sessions open at once (`--max-sessions`).
    pub(super) max_sessions: usize,
    /// Sessions one credential may hold (`--max-sessions-per-token`).
    pub(super) max_sessions_per_token: usize,
    /// How long a session must have had no request under way before a new one may
    /// end it (`--session-evict-after`).
    pub(super) evict_after: Duration,
}

/// The open sessions, by `Mcp-Session-Id`.
pub(super) struct SessionBook {
    /// Each open session's entry.
    entries: Mutex<HashMap<String, Entry>>,
    /// Free places (`--max-sessions`); a session holds one until it ends.
    places: Arc<Semaphore>,
    /// The limits the places and the evictions follow.
    limits: SessionLimits,
}

/// One open session.
struct Entry {
    /// The credential that opened it.
    owner: Owner,
    /// When a request of it last ended (or it opened).
    last_used: Instant,
    /// Its requests under way (a response still being sent counts, so an open event
    /// stream keeps it in use).
    in_flight: usize,
    /// Its warren session: gone once the session ended by itself (`--session-idle`).
    session: Weak<Session>,
}

/// A request of a session under way: the session is in use until this is dropped.
pub(super) struct InUse {
    book: Arc<SessionBook>,
    id: String,
}

impl InUse {
    /// `response`, its body holding the session in use until it is all sent.
    pub(super) fn hold(self, response: hyper::Response<BoxBody>) -> hyper::Response<BoxBody> {
        response.map(|body| {
            http_body_util::BodyExt::boxed(Held {
                body,
                _in_use: self,
            })
        })
    }
}

/// A response body and the use it holds.
struct Held {
    body: BoxBody,
    _in_use: InUse,
}

impl hyper::body::Body for Held {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        if let Some(entry) = self.book.lock().get_mut(&self.id) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.last_used = Instant::now();
        }
    }
}

impl SessionBook {
    pub(super) fn new(limits: SessionLimits) -> Arc<SessionBook> {
        Arc::new(SessionBook {
            entries: Mutex::default(),
            places: Arc::new(Semaphore::new(limits.max_sessions)),
            limits,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks session `id` in use for as long as the returned guard lives (`None`
    /// for a session the book does not hold).
    pub(super) fn in_use(self: &Arc<Self>, id: &str) -> Option<InUse> {
        let mut entries = self.lock();
        let entry = entries.get_mut(id)?;
        entry.in_flight += 1;
        entry.last_used = Instant::now();
        Some(InUse {
            book: self.clone(),
            id: id.to_string(),
        })
    }

    /// Enters session `id`, opened by `owner`, whose warren session is `session`.
    pub(super) fn opened(&self, id: &str, owner: Owner, session: Weak<Session>) {
        let mut entries = self.lock();
        entries.retain(|_, entry| entry.session.strong_count() > 0);
        entries.insert(
            id.to_string(),
            Entry {
                owner,
                last_used: Instant::now(),
                in_flight: 0,
                session,
            },
        );
    }

    /// Forgets session `id` (its client deleted it).
    pub(super) fn closed(&self, id: &str) {
        self.lock().remove(id);
    }

    /// A place for a new session of `owner`, ending the least recently used idle
    /// session of `sessions` when a limit is reached; the refusal's message when no
    /// session is idle enough to end.
    pub(super) async fn admit(
        &self,
        owner: Owner,
        sessions: &LocalSessionManager,
    ) -> Result<OwnedSemaphorePermit, String> {
        let held = {
            let mut entries = self.lock();
            entries.retain(|_, entry| entry.session.strong_count() > 0);
            entries
                .values()
                .filter(|entry| entry.owner == owner)
                .count()
        };
        let full = format!(
            "warren mcp serves at most {} sessions at once (--max-sessions) and all are open, none idle for {} s (--session-evict-after): retry once a session ends (a client deletes its session, or it ends after --session-idle) or is idle that long",
            self.limits.max_sessions,
            self.limits.evict_after.as_secs()
        );
        let mut evicted = false;
        if held >= self.limits.max_sessions_per_token {
            match self.least_recently_used(Some(owner)) {
                Some(victim) => {
                    self.evict(&victim, sessions).await;
                    evicted = true;
                }
                // Full for everyone: that is the limit to name.
                None if self.places.available_permits() == 0 => return Err(full),
                None => {
                    return Err(format!(
                        "this credential holds {held} sessions, the most one token may (--max-sessions-per-token), and none has been idle for {} s (--session-evict-after): delete one, or retry once one is idle",
                        self.limits.evict_after.as_secs()
                    ))
                }
            }
        }
        if let Ok(place) = self.places.clone().try_acquire_owned() {
            return Ok(place);
        }
        if !evicted {
            let victim = self.least_recently_used(None).ok_or_else(|| full.clone())?;
            self.evict(&victim, sessions).await;
        }
        tokio::time::timeout(EVICTION_WAIT, self.places.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or(full)
    }

    /// The least recently used session (of `owner`, when given) with no request
    /// under way for at least `evict_after`.
    fn least_recently_used(&self, owner: Option<Owner>) -> Option<String> {
        let entries = self.lock();
        entries
            .iter()
            .filter(|(_, entry)| owner.is_none_or(|owner| entry.owner == owner))
            .filter(|(_, entry)| {
                entry.in_flight == 0 && entry.last_used.elapsed() >= self.limits.evict_after
            })
            .min_by_key(|(_, entry)| entry.last_used)
            .map(|(id, _)| id.clone())
    }

    /// Ends session `id` to make room: its agents are cancelled, its place given back
    /// once its tree is dropped.
    async fn evict(&self, id: &str, sessions: &LocalSessionManager) {
        let idle = self
            .lock()
            .remove(id)
            .map(|entry| entry.last_used.elapsed().as_secs());
        tracing::info!(
            idle_s = idle,
            "MCP over HTTP: ending the least recently used idle session to make room for a new one"
        );
        if let Err(error) = sessions.close_session(&id.into()).await {
            tracing::warn!(%error, "MCP over HTTP: ending an idle session failed");
        }
    }
}
