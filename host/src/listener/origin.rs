//! Whether a request's `Origin` header is this server's own: a page of another site,
//! or a DNS-rebinding page (a remote site whose name resolves to this machine), names
//! its own origin, which is neither loopback nor the address listened on.

use std::net::{IpAddr, SocketAddr};

/// Whether `origin` (an `Origin` header: `scheme://host[:port]`) is a loopback origin
/// (any port: a local tool's page) or `local`, the address listened on.
pub(crate) fn origin_allowed(origin: &str, local: SocketAddr) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, rest)) => (host, rest.strip_prefix(':')),
            None => return false,
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(ip) if ip.is_loopback() => true,
        Ok(ip) => {
            ip == local.ip() && port.and_then(|p| p.parse::<u16>().ok()) == Some(local.port())
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_and_the_servers_own_pass() {
        let local: SocketAddr = "192.168.1.5:8931".parse().unwrap();
        for origin in [
            "http://localhost:6274",
            "http://LOCALHOST",
            "https://127.0.0.1:3000",
            "http://[::1]:8080",
            "http://192.168.1.5:8931",
        ] {
            assert!(origin_allowed(origin, local), "{origin}");
        }
        for origin in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "http://192.168.1.5:80",
            "http://192.168.1.6:8931",
            "file://localhost",
            "http://[::1",
        ] {
            assert!(!origin_allowed(origin, local), "{origin}");
        }
    }
}
