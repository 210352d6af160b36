//! The bounded TCP listener of warren's HTTP servers (the web view, MCP over HTTP,
//! A2A), with what the MCP and A2A servers check of every request alike: the bearer
//! token ([`auth`]) and the `Origin` header ([`origin`]). The listener:
//! anyone who can connect must not be able to exhaust the process, so a server holds
//! at most [`ListenLimits::max_connections`] connections (one over the limit is closed
//! as soon as it is accepted), a connection that takes longer than
//! [`ListenLimits::header_timeout`] to send a request's headers, or stays idle that
//! long between requests, is closed, and a failing `accept` (no descriptors left) is
//! retried after a pause that doubles from [`ACCEPT_PAUSE_MIN`] to
//! [`ACCEPT_PAUSE_MAX`]. Each burst of failed accepts, and of connections closed over
//! the limit, is logged when it begins and when it ends, with its count, never once
//! per try.

pub(crate) mod auth;
pub(crate) mod origin;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The first pause after a failed `accept`; it doubles up to [`ACCEPT_PAUSE_MAX`].
pub(crate) const ACCEPT_PAUSE_MIN: Duration = Duration::from_millis(10);
/// The longest pause between tries of a failing `accept`.
pub(crate) const ACCEPT_PAUSE_MAX: Duration = Duration::from_millis(1000);

/// What one server's clients may make it hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListenLimits {
    /// Connections open at once; one over it is closed as soon as it is accepted,
    /// so a flood of connections cannot take the descriptors the process's own work
    /// (tool calls, model requests) needs.
    pub(crate) max_connections: usize,
    /// Longest a connection may take to send a request's headers, or stay idle
    /// between requests; it is closed then, so half-sent requests do not hold
    /// descriptors forever.
    pub(crate) header_timeout: Duration,
}

/// How a server names itself and its limit in the log.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerName {
    /// What the server is, as log lines begin (`web view`, `MCP over HTTP`).
    pub(crate) server: &'static str,
    /// Where the connection limit is set (`--max-connections`, a constant's name).
    pub(crate) limit: &'static str,
}

/// Serves HTTP/1.1 on `listener` until `shutdown` resolves, within `limits`: every
/// request of every connection goes to `handle` (the web view, MCP over HTTP, A2A).
pub(crate) async fn serve<H, R>(
    listener: TcpListener,
    limits: ListenLimits,
    name: ServerName,
    shutdown: impl Future<Output = ()>,
    handle: H,
) where
    H: Fn(hyper::Request<Incoming>) -> R + Send + Sync + 'static,
    R: Future<Output = hyper::Response<BoxBody>> + Send + 'static,
{
    let handle = Arc::new(handle);
    accept_loop(listener, limits, name, shutdown, |stream, peer, permit| {
        let handle = handle.clone();
        let timeout = limits.header_timeout;
        serve_http1(stream, peer, timeout, permit, name.server, move |request| {
            handle(request)
        })
    })
    .await;
}

/// Accepts connections on `listener` until `shutdown` resolves, within `limits`,
/// handing each to `connection` with the permit it holds until it ends.
async fn accept_loop<F, C>(
    listener: TcpListener,
    limits: ListenLimits,
    name: ServerName,
    shutdown: impl Future<Output = ()>,
    mut connection: C,
) where
    C: FnMut(TcpStream, SocketAddr, OwnedSemaphorePermit) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let ServerName { server, limit } = name;
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    let mut failed_accepts = Burst::default();
    let mut refused = Burst::default();
    let mut pause = ACCEPT_PAUSE_MIN;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                if failed_accepts.hit() {
                    tracing::warn!(
                        %error,
                        "{server}: accepting a connection failed; retrying every {} ms at most (logged again when it works)",
                        ACCEPT_PAUSE_MAX.as_millis()
                    );
                }
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = &mut shutdown => break,
                }
                pause = (pause * 2).min(ACCEPT_PAUSE_MAX);
                continue;
            }
        };
        pause = ACCEPT_PAUSE_MIN;
        if let Some(failures) = failed_accepts.end() {
            tracing::warn!(
                "{server}: accepting connections works again after {failures} failed tries"
            );
        }
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            if refused.hit() {
                tracing::warn!(
                    "{server}: {} connections are open, the limit ({limit}); closing new ones until one ends",
                    limits.max_connections
                );
            }
            drop(stream);
            continue;
        };
        if let Some(count) = refused.end() {
            tracing::warn!("{server}: {count} connections were closed over the limit ({limit})");
        }
        tokio::spawn(connection(stream, peer, permit));
    }
}

/// Serves HTTP/1.1 on `stream` with `handle` for each request, closing it when a
/// request's headers take longer than `header_timeout` (or the connection idles that
/// long between requests); holds `permit` until the connection ends.
async fn serve_http1<H, R>(
    stream: TcpStream,
    peer: SocketAddr,
    header_timeout: Duration,
    permit: OwnedSemaphorePermit,
    server: &'static str,
    handle: H,
) where
    H: Fn(hyper::Request<Incoming>) -> R + Send + Sync + 'static,
    R: Future<Output = hyper::Response<BoxBody>> + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let response = handle(request);
        async move { Ok::<_, Infallible>(response.await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(error) = connection {
        tracing::debug!(%peer, %error, "{server}: connection ended");
    }
    drop(permit);
}

/// A response body, as both servers answer.
pub(crate) type BoxBody = http_body_util::combinators::BoxBody<bytes::Bytes, Infallible>;

/// Failures in a row of one kind, so that a burst is logged when it begins and when
/// it ends, with its count, instead of once per failure.
#[derive(Default)]
struct Burst {
    /// Failures since the last success.
    count: u64,
}

impl Burst {
    /// Counts a failure; true for the first of a burst.
    fn hit(&mut self) -> bool {
        self.count += 1;
        self.count == 1
    }

    /// A success: the burst's count, if one was going on.
    fn end(&mut self) -> Option<u64> {
        (self.count > 0).then(|| std::mem::take(&mut self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_reported_at_its_start_and_end() {
        let mut burst = Burst::default();
        assert_eq!(burst.end(), None);
        assert!(burst.hit());
        assert!(!burst.hit());
        assert!(!burst.hit());
        assert_eq!(burst.end(), Some(3));
        assert!(burst.hit());
    }
}
