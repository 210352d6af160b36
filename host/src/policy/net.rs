//! Network policy as data: which hosts a tool may reach, as `host[:port]` patterns,
//! and the pure matching of names, addresses and other patterns against them.
//!
//! The sandbox applies it (`sandbox::net`): HTTP requests are checked by host name,
//! then every address the name resolves to must be public ([`is_public`]) unless the
//! pattern is literal ([`NetPattern::is_literal`]); raw sockets see only addresses, so
//! they match literal-IP patterns only ([`NetPolicy::admits_address`]).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// One `host[:port]` entry of `capabilities.net`, parsed and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NetPattern {
    /// Which hosts the pattern admits.
    host: HostPattern,
    /// The only port admitted, or any port when absent.
    port: Option<u16>,
}

/// The host part of a [`NetPattern`].
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
    pub(crate) fn is_literal(&self) -> bool {
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

    /// Whether the pattern admits `port`.
    fn admits_port(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }

    /// Whether the pattern admits host name or address `host` (`[v6]` brackets and
    /// case ignored).
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
pub(crate) fn is_public(ip: IpAddr) -> bool {
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

/// The checked, shareable form of `capabilities.net`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NetPolicy {
    /// The allow-list; empty means no network at all.
    patterns: Vec<NetPattern>,
}

impl NetPolicy {
    /// A policy admitting exactly `patterns`.
    pub(crate) fn new(patterns: Vec<NetPattern>) -> Self {
        NetPolicy { patterns }
    }

    /// The allow-list.
    pub(crate) fn patterns(&self) -> &[NetPattern] {
        &self.patterns
    }

    /// The entries of `self` that `parent` also admits: a sub-agent never reaches
    /// a host its parent could not.
    pub(crate) fn intersect(&self, parent: &NetPolicy) -> NetPolicy {
        let patterns = self
            .patterns
            .iter()
            .filter(|p| parent.patterns.iter().any(|q| q.covers(p)))
            .cloned()
            .collect();
        NetPolicy { patterns }
    }

    /// The first entry admitting an HTTP request to `host:port`, by name (or literal
    /// address).
    pub(crate) fn admitting(&self, host: &str, port: u16) -> Option<&NetPattern> {
        self.patterns
            .iter()
            .find(|p| p.admits_host(host) && p.admits_port(port))
    }

    /// Whether a raw socket may reach `addr`: only a literal IP entry admits one.
    pub(crate) fn admits_address(&self, addr: SocketAddr) -> bool {
        self.patterns.iter().any(|p| {
            matches!(p.host, HostPattern::Ip(ip) if ip == addr.ip()) && p.admits_port(addr.port())
        })
    }

    /// The allow-list for messages: its entries joined, or `empty: no network`.
    pub(crate) fn describe(&self) -> String {
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
}
