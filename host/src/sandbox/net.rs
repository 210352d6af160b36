//! Network enforcement: the [`NetPolicy`] applied to HTTP requests and raw sockets.
//!
//! HTTP requests (through `wasi:http`) are checked by host name, then every address
//! the name resolves to must be public unless the pattern is a literal IP address or
//! `localhost`: that stops an allowed name from being pointed at loopback, private or
//! link-local services. Raw sockets see only addresses, so they match literal-IP
//! patterns only. Every refusal is recorded as a [`Denial`] and logged.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use tracing::warn;
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use crate::policy::net::{is_public, NetPolicy};

/// A request the sandbox refused, kept so the caller can report it precisely.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Denial {
    /// What the guest asked for, e.g. `HTTP GET to evil.example:443`.
    pub request: String,
    /// The profile key that would allow it, e.g. `capabilities.net`.
    pub capability: &'static str,
    /// Why the request was refused, with what to change.
    pub reason: String,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.request, self.reason)
    }
}

/// Where one tool call's denials collect; shared between the store and its hooks.
#[derive(Clone, Debug)]
pub(crate) struct DenialLog {
    /// Who is asking, for the log line: `profile`, `plugin`.
    who: Arc<(String, String)>,
    /// The denials so far, oldest first.
    entries: Arc<Mutex<Vec<Denial>>>,
}

impl DenialLog {
    /// A log for calls made by `profile` into `plugin`.
    pub(crate) fn new(profile: &str, plugin: &str) -> Self {
        DenialLog {
            who: Arc::new((profile.to_string(), plugin.to_string())),
            entries: Arc::default(),
        }
    }

    /// Logs the denial and keeps it for the call's outcome.
    pub(crate) fn record(&self, denial: Denial) {
        let (profile, plugin) = &*self.who;
        warn!(target: "warren::denial", profile = %profile, plugin = %plugin, capability = denial.capability, request = %denial.request, "denied: {}", denial.reason);
        self.entries
            .lock()
            .expect("denial log poisoned")
            .push(denial);
    }

    /// Every denial recorded so far.
    pub(crate) fn entries(&self) -> Vec<Denial> {
        self.entries.lock().expect("denial log poisoned").clone()
    }
}

/// Decides an HTTP request to `host:port` under `policy`; on success returns the addresses the
/// host resolved to (all checked), to connect to without resolving again.
pub(crate) async fn check_http(
    policy: &NetPolicy,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, Denial> {
    let request = format!("HTTP request to {host}:{port}");
    let deny = |reason: String| Denial {
        request: request.clone(),
        capability: "capabilities.net",
        reason,
    };
    let Some(pattern) = policy.admitting(host, port) else {
        return Err(deny(format!(
            "{host}:{port} matches no entry of capabilities.net ({}); add \"{host}\" to allow it",
            policy.describe()
        )));
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match tokio::net::lookup_host((bare, port)).await {
        Ok(addrs) => addrs.collect(),
        Err(e) => return Err(deny(format!("{host} did not resolve: {e}"))),
    };
    if addrs.is_empty() {
        return Err(deny(format!("{host} resolved to no address")));
    }
    if !pattern.is_literal() {
        if let Some(private) = addrs.iter().find(|a| !is_public(a.ip())) {
            return Err(deny(format!(
                "{host} resolves to the non-public address {}; only a literal IP entry (e.g. \"{}:{port}\") in capabilities.net admits it",
                private.ip(),
                private.ip()
            )));
        }
    }
    Ok(addrs)
}

/// Decides a raw socket use (`socket_addr_check`) under `policy`.
pub(crate) fn check_socket(
    policy: &NetPolicy,
    addr: SocketAddr,
    usage: SocketAddrUse,
) -> Result<(), Denial> {
    let deny = |reason: String| Denial {
        request: format!("raw socket {usage:?} {addr}"),
        capability: "capabilities.net",
        reason,
    };
    match usage {
        // The implicit bind before a connect uses the wildcard address.
        SocketAddrUse::TcpBind if addr.ip().is_unspecified() && addr.port() == 0 => Ok(()),
        SocketAddrUse::TcpConnect | SocketAddrUse::UdpSend => {
            if policy.admits_address(addr) {
                Ok(())
            } else {
                Err(deny(format!(
                    "{addr} matches no literal IP entry of capabilities.net ({}); raw sockets need the address itself listed",
                    policy.describe()
                )))
            }
        }
        _ => Err(deny("tools may not bind or listen on sockets".into())),
    }
}

/// `wasi:http` hooks that route every outgoing request through the [`NetPolicy`].
pub(crate) struct NetHooks {
    /// The policy of the calling profile.
    pub policy: Arc<NetPolicy>,
    /// Where refusals go.
    pub denials: DenialLog,
}

type SendFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for NetHooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_error: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> SendFuture {
        let policy = self.policy.clone();
        let denials = self.denials.clone();
        Box::new(async move {
            let uri = request.uri().clone();
            let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
            let authority = uri
                .authority()
                .ok_or(wasmtime_wasi_http::Error::HttpRequestUriInvalid)?;
            let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
            let addrs = match check_http(&policy, authority.host(), port).await {
                Ok(addrs) => addrs,
                Err(denial) => {
                    denials.record(denial);
                    return Err(wasmtime_wasi_http::Error::HttpRequestDenied);
                }
            };
            // Plain HTTP connects to the address just checked, so a second DNS answer
            // cannot redirect it; the Host header already carries the name. HTTPS keeps
            // the name for SNI and certificate checks, which a redirected connection fails.
            if !https {
                let mut parts = uri.into_parts();
                parts.authority = Some(
                    addrs[0]
                        .to_string()
                        .parse()
                        .map_err(|_| wasmtime_wasi_http::Error::HttpRequestUriInvalid)?,
                );
                *request.uri_mut() = http::Uri::from_parts(parts)
                    .map_err(|_| wasmtime_wasi_http::Error::HttpRequestUriInvalid)?;
            }
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(patterns: &[&str]) -> NetPolicy {
        NetPolicy::new(patterns.iter().map(|p| p.parse().unwrap()).collect())
    }

    #[tokio::test]
    async fn names_resolving_to_loopback_are_refused_unless_literal() {
        let denial = check_http(
            &policy(&["localhost.example", "*.localhost"]),
            "localhost",
            80,
        )
        .await
        .unwrap_err();
        assert!(denial.reason.contains("matches no entry"), "{denial}");
        assert!(check_http(&policy(&["localhost"]), "localhost", 80)
            .await
            .is_ok());
        assert!(check_http(&policy(&["127.0.0.1:8080"]), "127.0.0.1", 8080)
            .await
            .is_ok());
        assert!(check_http(&policy(&["127.0.0.1:8080"]), "127.0.0.1", 8081)
            .await
            .is_err());
    }

    #[test]
    fn sockets_need_literal_addresses() {
        let p = policy(&["10.0.0.5:5432", "db.internal"]);
        let check = |addr: &str, usage| check_socket(&p, addr.parse().unwrap(), usage);
        assert!(check("10.0.0.5:5432", SocketAddrUse::TcpConnect).is_ok());
        assert!(check("10.0.0.5:22", SocketAddrUse::TcpConnect).is_err());
        assert!(check("0.0.0.0:0", SocketAddrUse::TcpBind).is_ok());
        assert!(check("0.0.0.0:8080", SocketAddrUse::TcpListen).is_err());
    }
}
