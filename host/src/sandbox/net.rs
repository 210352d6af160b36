//! Network policy: which hosts a tool may reach, for HTTP and for raw sockets.
//!
//! A profile's `capabilities.net` is a list of `host[:port]` patterns. HTTP requests
//! (through `wasi:http`) are checked by host name, then every address the name resolves
//! to must be public unless the pattern is a literal IP address or `localhost`: that
//! stops an allowed name from being pointed at loopback, private or link-local
//! services. Raw sockets see only addresses, so they match literal-IP patterns only.
//! Every refusal is recorded as a [`Denial`] and logged.

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use tracing::warn;
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

/// One `host[:port]` entry of `capabilities.net`, parsed and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetPattern {
    /// Which hosts the pattern admits.
    host: HostPattern,
    /// The only port admitted, or any port when absent.
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    /// A host name, lower-cased.
    Name(String),
    /// `*.example.com`: any subdomain of the stored suffix (`example.com`), not the apex.
    Subdomains(String),
    /// A literal address; the only way (with `localhost`) to admit non-public addresses.
    Ip(IpAddr),
}

impl NetPattern {
    /// Whether this pattern names its host literally, which lets it reach
    /// loopback, private and link-local addresses.
    fn is_literal(&self) -> bool {
        match &self.host {
            HostPattern::Ip(_) => true,
            HostPattern::Name(name) => name == "localhost",
            HostPattern::Subdomains(_) => false,
        }
    }

    /// Whether everything `other` admits, `self` admits too.
    fn covers(&self, other: &NetPattern) -> bool {
        let port = match (self.port, other.port) {
            (None, _) => true,
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        let host = match (&self.host, &other.host) {
            (a, b) if a == b => true,
            (
                HostPattern::Subdomains(suffix),
                HostPattern::Name(name) | HostPattern::Subdomains(name),
            ) => name.ends_with(&format!(".{suffix}")),
            _ => false,
        };
        port && host
    }

    fn admits_port(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }

    fn admits_host(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        match &self.host {
            HostPattern::Name(name) => *name == host,
            HostPattern::Subdomains(suffix) => {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
            HostPattern::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
        }
    }
}

impl std::str::FromStr for NetPattern {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            format!("`{text}` is not a valid net pattern: {why} (expected host[:port], *.domain[:port] or an IP address)")
        };
        if text.is_empty() {
            return Err(bad("it is empty"));
        }
        if text.contains("://") || text.contains('/') {
            return Err(bad("give the host only, without scheme or path"));
        }
        // `[v6]:port`, `[v6]`, a bare IPv6 address, `host:port` or `host`.
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (ip, after) = rest.split_once(']').ok_or_else(|| bad("unclosed `[`"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after `]`"))?),
            };
            (ip, port)
        } else if text.matches(':').count() > 1 {
            (text, None)
        } else if let Some((host, port)) = text.split_once(':') {
            (host, Some(port))
        } else {
            (text, None)
        };
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("the port must be 1-65535"))?,
            ),
        };
        let host_pattern = if let Ok(ip) = host.parse::<IpAddr>() {
            HostPattern::Ip(ip)
        } else {
            let name = host.to_ascii_lowercase();
            let (wildcard, name) = match name.strip_prefix("*.") {
                Some(rest) => (true, rest.to_string()),
                None => (false, name),
            };
            let valid = !name.is_empty()
                && name.len() <= 253
                && name.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            if !valid {
                return Err(bad(
                    "the host has characters or labels a DNS name cannot have",
                ));
            }
            if wildcard {
                HostPattern::Subdomains(name)
            } else {
                HostPattern::Name(name)
            }
        };
        Ok(NetPattern {
            host: host_pattern,
            port,
        })
    }
}

impl fmt::Display for NetPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Name(name) => write!(f, "{name}")?,
            HostPattern::Subdomains(suffix) => write!(f, "*.{suffix}")?,
            HostPattern::Ip(IpAddr::V6(ip)) if self.port.is_some() => write!(f, "[{ip}]")?,
            HostPattern::Ip(ip) => write!(f, "{ip}")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// Whether an address is on the public internet. Loopback, private, link-local,
/// unspecified, broadcast, documentation, shared (CGNAT) and multicast addresses are
/// not, nor are IPv4-mapped IPv6 forms of them.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80) // link local
        }
    }
}

/// A request the sandbox refused, kept so the caller can report it precisely.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
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
pub struct DenialLog {
    /// Who is asking, for the log line: `profile`, `plugin`.
    who: Arc<(String, String)>,
    /// The denials so far, oldest first.
    entries: Arc<Mutex<Vec<Denial>>>,
}

impl DenialLog {
    /// A log for calls made by `profile` into `plugin`.
    pub fn new(profile: &str, plugin: &str) -> Self {
        DenialLog {
            who: Arc::new((profile.to_string(), plugin.to_string())),
            entries: Arc::default(),
        }
    }

    /// Logs the denial and keeps it for the call's outcome.
    pub fn record(&self, denial: Denial) {
        let (profile, plugin) = &*self.who;
        warn!(target: "warren::denial", profile = %profile, plugin = %plugin, capability = denial.capability, request = %denial.request, "denied: {}", denial.reason);
        self.entries
            .lock()
            .expect("denial log poisoned")
            .push(denial);
    }

    /// Every denial recorded so far.
    pub fn entries(&self) -> Vec<Denial> {
        self.entries.lock().expect("denial log poisoned").clone()
    }
}

/// The checked, shareable form of `capabilities.net`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetPolicy {
    /// The allow-list; empty means no network at all.
    patterns: Vec<NetPattern>,
}

impl NetPolicy {
    /// A policy admitting exactly `patterns`.
    pub fn new(patterns: Vec<NetPattern>) -> Self {
        NetPolicy { patterns }
    }

    /// The allow-list.
    pub fn patterns(&self) -> &[NetPattern] {
        &self.patterns
    }

    /// The entries of `self` that `parent` also admits: a sub-agent never reaches
    /// a host its parent could not.
    pub fn intersect(&self, parent: &NetPolicy) -> NetPolicy {
        let patterns = self
            .patterns
            .iter()
            .filter(|p| parent.patterns.iter().any(|q| q.covers(p)))
            .cloned()
            .collect();
        NetPolicy { patterns }
    }

    /// Decides an HTTP request to `host:port`; on success returns the addresses the
    /// host resolved to (all checked), to connect to without resolving again.
    pub async fn check_http(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Denial> {
        let request = format!("HTTP request to {host}:{port}");
        let deny = |reason: String| Denial {
            request: request.clone(),
            capability: "capabilities.net",
            reason,
        };
        let Some(pattern) = self
            .patterns
            .iter()
            .find(|p| p.admits_host(host) && p.admits_port(port))
        else {
            return Err(deny(format!("{host}:{port} matches no entry of capabilities.net ({}); add \"{host}\" to allow it", self.describe())));
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

    /// Decides a raw socket use (`socket_addr_check`).
    pub fn check_socket(&self, addr: SocketAddr, usage: SocketAddrUse) -> Result<(), Denial> {
        let deny = |reason: String| Denial {
            request: format!("raw socket {usage:?} {addr}"),
            capability: "capabilities.net",
            reason,
        };
        match usage {
            // The implicit bind before a connect uses the wildcard address.
            SocketAddrUse::TcpBind if addr.ip().is_unspecified() && addr.port() == 0 => Ok(()),
            SocketAddrUse::TcpConnect | SocketAddrUse::UdpSend => {
                let admitted = self.patterns.iter().any(|p| {
                    matches!(p.host, HostPattern::Ip(ip) if ip == addr.ip())
                        && p.admits_port(addr.port())
                });
                if admitted {
                    Ok(())
                } else {
                    Err(deny(format!(
                        "{addr} matches no literal IP entry of capabilities.net ({}); raw sockets need the address itself listed",
                        self.describe()
                    )))
                }
            }
            _ => Err(deny("tools may not bind or listen on sockets".into())),
        }
    }

    fn describe(&self) -> String {
        if self.patterns.is_empty() {
            "empty: no network".into()
        } else {
            self.patterns
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// `wasi:http` hooks that route every outgoing request through the [`NetPolicy`].
pub struct NetHooks {
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
            let addrs = match policy.check_http(authority.host(), port).await {
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

    #[test]
    fn patterns_parse_and_reject() {
        assert_eq!(
            "api.github.com".parse::<NetPattern>().unwrap().to_string(),
            "api.github.com"
        );
        assert_eq!(
            "*.Example.com:8443"
                .parse::<NetPattern>()
                .unwrap()
                .to_string(),
            "*.example.com:8443"
        );
        assert_eq!(
            "127.0.0.1:9".parse::<NetPattern>().unwrap().to_string(),
            "127.0.0.1:9"
        );
        assert_eq!(
            "[::1]:80".parse::<NetPattern>().unwrap().to_string(),
            "[::1]:80"
        );
        for bad in [
            "",
            "http://x.com",
            "x.com/path",
            "x.com:0",
            "x.com:99999",
            "bad host",
            "a..b",
            "[::1",
        ] {
            assert!(
                bad.parse::<NetPattern>().is_err(),
                "{bad} should be rejected"
            );
        }
    }

    #[test]
    fn wildcard_matches_subdomains_only() {
        let p: NetPattern = "*.example.com".parse().unwrap();
        assert!(p.admits_host("a.example.com"));
        assert!(p.admits_host("A.B.Example.com"));
        assert!(!p.admits_host("example.com"));
        assert!(!p.admits_host("evilexample.com"));
    }

    #[test]
    fn public_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(
                !is_public(private.parse().unwrap()),
                "{private} is not public"
            );
        }
        for public in ["93.184.216.34", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public} is public");
        }
    }

    #[tokio::test]
    async fn names_resolving_to_loopback_are_refused_unless_literal() {
        let denial = policy(&["localhost.example", "*.localhost"])
            .check_http("localhost", 80)
            .await
            .unwrap_err();
        assert!(denial.reason.contains("matches no entry"), "{denial}");
        assert!(policy(&["localhost"])
            .check_http("localhost", 80)
            .await
            .is_ok());
        assert!(policy(&["127.0.0.1:8080"])
            .check_http("127.0.0.1", 8080)
            .await
            .is_ok());
        assert!(policy(&["127.0.0.1:8080"])
            .check_http("127.0.0.1", 8081)
            .await
            .is_err());
    }

    #[test]
    fn intersection_keeps_only_what_the_parent_admits() {
        let parent = policy(&["*.example.com", "api.github.com:443", "10.0.0.5"]);
        let child = policy(&[
            "docs.example.com",
            "example.com",
            "api.github.com",
            "api.github.com:443",
            "10.0.0.5:22",
            "evil.org",
        ]);
        let kept: Vec<String> = child
            .intersect(&parent)
            .patterns()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            kept,
            ["docs.example.com", "api.github.com:443", "10.0.0.5:22"]
        );
    }

    #[test]
    fn sockets_need_literal_addresses() {
        let p = policy(&["10.0.0.5:5432", "db.internal"]);
        assert!(p
            .check_socket("10.0.0.5:5432".parse().unwrap(), SocketAddrUse::TcpConnect)
            .is_ok());
        assert!(p
            .check_socket("10.0.0.5:22".parse().unwrap(), SocketAddrUse::TcpConnect)
            .is_err());
        assert!(p
            .check_socket("0.0.0.0:0".parse().unwrap(), SocketAddrUse::TcpBind)
            .is_ok());
        assert!(p
            .check_socket("0.0.0.0:8080".parse().unwrap(), SocketAddrUse::TcpListen)
            .is_err());
    }
}
