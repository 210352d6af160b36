//! Who may use the web view: a request carries the token (in the query as
//! `?token=…`, in the cookie the page's first load sets, or as `Authorization: Bearer
//! …`), names this server in `Host` (so a hostile page cannot reach it through a DNS
//! name rebound to loopback) and, when it sends `Origin`, comes from this server.
//! Every response carries the headers that keep the page to itself.

use std::io::Read as _;
use std::net::SocketAddr;

use hyper::header::{HeaderMap, HeaderValue};

/// Random bytes in a token (hex-encoded, twice as many characters).
const TOKEN_BYTES: usize = 24;

/// The content security policy of every response: scripts, styles and connections
/// from this server only, nothing inline, no frames, no forms, no plugins.
pub(super) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// A fresh token from the system's random source.
pub(super) fn new_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|error| anyhow::anyhow!("reading /dev/urandom for the web token: {error}"))?;
    Ok(hex::encode(bytes))
}

/// The checks of one server.
pub(super) struct Gate {
    /// The token.
    token: String,
    /// The cookie the token is kept in (named after the port: browsers share cookies
    /// across ports of one host, and two servers must not overwrite each other's).
    cookie: String,
    /// The `Host` values accepted: loopback names and the address listened on, each
    /// with the port.
    hosts: Vec<String>,
}

/// How a request proved it may be served.
#[derive(Debug, PartialEq)]
pub(super) enum Pass {
    /// With the token in its query: the response sets the cookie.
    Query,
    /// With the cookie or the `Authorization` header.
    Kept,
}

/// Why a request is refused.
#[derive(Debug, PartialEq)]
pub(super) enum Refusal {
    /// No token, or a wrong one.
    Token,
    /// A `Host` that does not name this server.
    Host,
    /// An `Origin` that is not this server.
    Origin,
}

impl Gate {
    pub(super) fn new(token: String, local: SocketAddr) -> Gate {
        let port = local.port();
        let mut names = vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            "[::1]".to_string(),
        ];
        if !local.ip().is_unspecified() && !local.ip().is_loopback() {
            names.push(match local {
                SocketAddr::V4(v4) => v4.ip().to_string(),
                SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
            });
        }
        Gate {
            token,
            cookie: format!("warren_token_{port}"),
            hosts: names.into_iter().map(|n| format!("{n}:{port}")).collect(),
        }
    }

    /// Whether the request with `headers` and `query` may be served.
    pub(super) fn check(&self, headers: &HeaderMap, query: Option<&str>) -> Result<Pass, Refusal> {
        let host = headers
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok());
        if !host.is_some_and(|host| self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = headers.get(hyper::header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            let ours = self
                .hosts
                .iter()
                .any(|h| origin.eq_ignore_ascii_case(&format!("http://{h}")));
            if !ours {
                return Err(Refusal::Origin);
            }
        }
        let from_query = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter_map(|pair| pair.strip_prefix("token="));
        if from_query.into_iter().any(|t| self.matches(t)) {
            return Ok(Pass::Query);
        }
        let from_cookie = headers
            .get_all(hyper::header::COOKIE)
            .iter()
            .filter_map(|c| c.to_str().ok())
            .flat_map(|c| c.split(';'))
            .filter_map(|pair| pair.trim().strip_prefix(&self.cookie)?.strip_prefix('='));
        let from_header = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        if from_cookie.chain(from_header).any(|t| self.matches(t)) {
            return Ok(Pass::Kept);
        }
        Err(Refusal::Token)
    }

    /// Compares in time independent of where they differ.
    fn matches(&self, given: &str) -> bool {
        given.len() == self.token.len()
            && given
                .bytes()
                .zip(self.token.bytes())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0
    }

    /// The `Set-Cookie` value that keeps the token for later requests: not readable
    /// by scripts, never sent by another site's requests.
    pub(super) fn set_cookie(&self) -> HeaderValue {
        HeaderValue::from_str(&format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie, self.token
        ))
        .expect("a token is hex")
    }
}

/// Adds the headers every response carries.
pub(super) fn protect(headers: &mut HeaderMap) {
    let protections = [
        (hyper::header::CONTENT_SECURITY_POLICY, CSP),
        (hyper::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (hyper::header::REFERRER_POLICY, "no-referrer"),
        (hyper::header::X_FRAME_OPTIONS, "DENY"),
        (hyper::header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in protections {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn only_this_server_with_the_token_is_served() {
        let gate = Gate::new("abc".into(), "127.0.0.1:8000".parse().unwrap());
        let host = ("host", "127.0.0.1:8000");
        assert_eq!(
            gate.check(&headers(&[host]), Some("token=abc")),
            Ok(Pass::Query)
        );
        assert_eq!(
            gate.check(
                &headers(&[host, ("cookie", "a=b; warren_token_8000=abc")]),
                None
            ),
            Ok(Pass::Kept)
        );
        assert_eq!(
            gate.check(
                &headers(&[("host", "localhost:8000"), ("authorization", "Bearer abc")]),
                None
            ),
            Ok(Pass::Kept)
        );
        assert_eq!(
            gate.check(&headers(&[host]), Some("token=abd")),
            Err(Refusal::Token)
        );
        assert_eq!(
            gate.check(&headers(&[host, ("cookie", "warren_token_9000=abc")]), None),
            Err(Refusal::Token)
        );
        assert_eq!(
            gate.check(
                &headers(&[("host", "evil.example:8000")]),
                Some("token=abc")
            ),
            Err(Refusal::Host)
        );
        assert_eq!(
            gate.check(
                &headers(&[host, ("origin", "http://evil.example")]),
                Some("token=abc")
            ),
            Err(Refusal::Origin)
        );
        assert_eq!(
            gate.check(
                &headers(&[host, ("origin", "http://127.0.0.1:8000")]),
                Some("token=abc")
            ),
            Ok(Pass::Query)
        );
    }
}
