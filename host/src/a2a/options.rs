//! What `warren a2a` serves, and what its clients may make it hold.

use std::net::SocketAddr;
use std::time::Duration;

use crate::listener::auth::HttpAuth;

/// What `warren a2a` serves and how.
pub(crate) struct A2aOptions {
    /// The profiles served, the first also at the root's card.
    pub(crate) profiles: Vec<String>,
    /// Where to listen.
    pub(crate) http: SocketAddr,
    /// Who may send messages.
    pub(crate) auth: HttpAuth,
    /// The URL clients reach this server at, when not `http://ADDR` (a proxy's).
    pub(crate) public_url: Option<String>,
    /// What clients may make it hold.
    pub(crate) limits: A2aLimits,
}

/// What A2A clients may make the server hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct A2aLimits {
    /// Connections open at once.
    pub(crate) max_connections: usize,
    /// Longest a connection may take to send a request's headers.
    pub(crate) header_timeout: Duration,
    /// Tasks one credential may hold at once, running or kept after they ended.
    pub(crate) max_tasks: usize,
    /// How long an ended task stays readable.
    pub(crate) retention: Duration,
}

impl Default for A2aLimits {
    fn default() -> Self {
        A2aLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            max_tasks: 32,
            retention: Duration::from_secs(3600),
        }
    }
}
