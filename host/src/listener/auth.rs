//! The bearer token `warren mcp --http` and `warren a2a` require of every request
//! (`Authorization: Bearer TOKEN`): given in a file (one or more, a line each) or
//! `WARREN_MCP_TOKEN`, or generated at start, and checked in constant time. Each
//! token is a credential of its own: the MCP and A2A tasks made with it are its only. Only a loopback server may run
//! without one (`--no-auth`), as any local process could then use it.

use std::io::Read as _;
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// The most tokens a token file may hold.
const MAX_TOKENS: usize = 256;
/// The shortest token accepted from a file or the environment.
const MIN_TOKEN_CHARS: usize = 16;
/// Random bytes in a generated token (printed as hex).
const GENERATED_BYTES: usize = 32;

/// Who may use an HTTP server.
#[derive(Clone, Debug)]
pub(crate) enum HttpAuth {
    /// Requests must carry one of these tokens (each a credential of its own).
    Bearer(Vec<BearerToken>),
    /// Anyone who can connect (`--no-auth`; loopback addresses only).
    Open,
}

/// A bearer token, kept as its SHA-256 digest: requests are checked against the
/// digest of what they send, so the comparison takes the same time wherever they
/// differ, and the token itself is not kept in memory.
#[derive(Clone)]
pub(crate) struct BearerToken {
    /// SHA-256 of the token.
    digest: [u8; 32],
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(…)")
    }
}

impl BearerToken {
    /// `token`, which must be at least 16 visible ASCII characters (what an HTTP
    /// header carries unchanged).
    pub(crate) fn new(token: &str) -> Result<BearerToken, String> {
        if token.chars().count() < MIN_TOKEN_CHARS {
            return Err(format!(
                "a bearer token needs at least {MIN_TOKEN_CHARS} characters"
            ));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "a bearer token may hold only visible ASCII characters (no spaces)".to_string(),
            );
        }
        Ok(BearerToken {
            digest: Sha256::digest(token.as_bytes()).into(),
        })
    }

    /// The tokens in `path`: one per non-empty line, without surrounding whitespace
    /// ([`MAX_TOKENS`] at most).
    pub(crate) fn from_file(path: &Path) -> Result<Vec<BearerToken>, String> {
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(64 * 1024).read_to_string(&mut text))
            .map_err(|error| format!("reading {}: {error}", path.display()))?;
        let tokens = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(BearerToken::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| format!("{}: {error}", path.display()))?;
        match tokens.len() {
            0 => Err(format!("{}: no token in it", path.display())),
            n if n > MAX_TOKENS => Err(format!(
                "{}: {n} tokens, over the {MAX_TOKENS} a file may hold",
                path.display()
            )),
            _ => Ok(tokens),
        }
    }

    /// A new random token, with its text (64 hex digits) to give to clients.
    pub(crate) fn generate() -> std::io::Result<(BearerToken, String)> {
        let mut bytes = [0; GENERATED_BYTES];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        let text = hex::encode(bytes);
        let token = BearerToken::new(&text).map_err(std::io::Error::other)?;
        Ok((token, text))
    }

    /// Whether an `Authorization` header value carries this token.
    pub(super) fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some((scheme, token)) = value.split_at_checked(7) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        let sent: [u8; 32] = Sha256::digest(token).into();
        sent.iter()
            .zip(&self.digest)
            .fold(0, |differ, (a, b)| differ | (a ^ b))
            == 0
    }
}

/// A credential: the SHA-256 of the bearer token a request carried (all zeros on a
/// `--no-auth` server and over stdio, where every client is the same one). Tasks,
/// their log records and the sessions a credential may hold are its.
pub(crate) type Owner = [u8; 32];

/// The digest of the token among `tokens` that an `Authorization` header value
/// carries (every token is compared, in constant time each).
fn admitted(tokens: &[BearerToken], authorization: Option<&[u8]>) -> Option<Owner> {
    tokens.iter().fold(None, |found, token| {
        let admits = token.admits(authorization);
        found.or(admits.then_some(token.digest))
    })
}

/// Why a request was refused before anything was made for it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Its `Origin` (this text) is neither loopback nor the server's own.
    Origin(String),
    /// It carries none of the server's tokens.
    Token,
}

impl Refused {
    /// The answer to the refused request, worded for `command` (`warren mcp`, `warren
    /// a2a`) serving `what` (`MCP`, `A2A`) on `local`, its body made by `respond`: 403
    /// naming the origin, or 401 with the bearer challenge of realm `command`.
    pub(crate) fn answer<B>(
        &self,
        command: &str,
        what: &str,
        local: std::net::SocketAddr,
        respond: impl FnOnce(http::StatusCode, &str) -> http::Response<B>,
    ) -> http::Response<B> {
        match self {
            Refused::Origin(origin) => {
                let origin = crate::term::bounded(origin, 200);
                tracing::warn!(%origin, "{what} over HTTP: refused a request from another origin");
                respond(
                    http::StatusCode::FORBIDDEN,
                    &format!("Origin `{origin}` is not this server's: {command} accepts requests from loopback origins and http://{local} only"),
                )
            }
            Refused::Token => {
                tracing::warn!(
                    "{what} over HTTP: refused a request without this server's bearer token"
                );
                let mut response = respond(
                    http::StatusCode::UNAUTHORIZED,
                    &format!("this {what} server needs its bearer token: send `Authorization: Bearer TOKEN`, with the token {command} printed at start (or the one given by --token-file or WARREN_MCP_TOKEN)"),
                );
                let realm = format!("Bearer realm=\"{command}\"");
                if let Ok(challenge) = http::HeaderValue::from_str(&realm) {
                    response
                        .headers_mut()
                        .insert(http::header::WWW_AUTHENTICATE, challenge);
                }
                response
            }
        }
    }
}

/// The credential of a request with `headers` to a server listening on `local`
/// under `auth`: its `Origin` (if any) must be this server's ([`super::origin`]), and
/// it must carry a token when one is needed. The one check of `warren mcp --http`
/// and `warren a2a`, which each word the refusal.
pub(crate) fn admit(
    headers: &http::HeaderMap,
    local: std::net::SocketAddr,
    auth: &HttpAuth,
) -> Result<Owner, Refused> {
    if let Some(origin) = headers.get(http::header::ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        if !super::origin::origin_allowed(&origin, local) {
            return Err(Refused::Origin(origin.into_owned()));
        }
    }
    let HttpAuth::Bearer(tokens) = auth else {
        return Ok([0; 32]);
    };
    let authorization = headers.get(http::header::AUTHORIZATION);
    admitted(tokens, authorization.map(|value| value.as_bytes())).ok_or(Refused::Token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_token_after_bearer_is_admitted() {
        let token = BearerToken::new("0123456789abcdef-token").unwrap();
        assert!(token.admits(Some(b"Bearer 0123456789abcdef-token")));
        assert!(token.admits(Some(b"bearer 0123456789abcdef-token")));
        for sent in [
            &b"Bearer 0123456789abcdef-tokeN"[..],
            b"Bearer 0123456789abcdef-token ",
            b"Basic 0123456789abcdef-token",
            b"0123456789abcdef-token",
            b"Bearer ",
            b"",
        ] {
            assert!(
                !token.admits(Some(sent)),
                "{}",
                String::from_utf8_lossy(sent)
            );
        }
        assert!(!token.admits(None));
    }

    #[test]
    fn each_token_of_a_file_is_its_own_credential() {
        let dir = std::env::temp_dir().join(format!("warren-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens");
        std::fs::write(
            &file,
            "first-token-0123456789\n\n  second-token-0123456789 \n",
        )
        .unwrap();
        let tokens = BearerToken::from_file(&file).unwrap();
        assert_eq!(tokens.len(), 2);
        let first = admitted(&tokens, Some(b"Bearer first-token-0123456789")).unwrap();
        let second = admitted(&tokens, Some(b"Bearer second-token-0123456789")).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            admitted(&tokens, Some(b"Bearer third-token-0123456789")),
            None
        );
        std::fs::write(&file, "\n").unwrap();
        assert!(BearerToken::from_file(&file)
            .unwrap_err()
            .contains("no token"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn short_or_spaced_tokens_are_refused_and_generated_ones_differ() {
        assert!(BearerToken::new("short").is_err());
        assert!(BearerToken::new("sixteen chars with spaces").is_err());
        let (first, text) = BearerToken::generate().unwrap();
        assert_eq!(text.len(), 64);
        assert!(first.admits(Some(format!("Bearer {text}").as_bytes())));
        assert_ne!(BearerToken::generate().unwrap().1, text);
    }
}
