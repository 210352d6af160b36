//! The configured secrets (API keys, header values, the Redis password, OTLP headers)
//! and their removal from text a remote server sent: servers and gateways quote the
//! credential they refused in their error bodies, and that text goes on to stdout,
//! stderr, event files, traces, MCP clients, job failure reasons and a parent model's
//! context. [`Secrets::redact`] is the one place it is removed; the transport applies it
//! to every error and warning it lets out.

use std::borrow::Cow;
use std::sync::Arc;

use super::error::LlmError;

/// What a secret is replaced with.
pub(crate) const REDACTED: &str = "[redacted]";

/// Values shorter than this are not treated as secrets: no credential is that short,
/// and replacing every `1` or `en` in an error message would make it unreadable.
pub(crate) const MIN_SECRET_BYTES: usize = 4;

/// The mark an error excerpt ends a cut text with.
const ELLIPSIS: &str = "…";

/// Every configured secret, longest first (so a secret containing another is
/// replaced whole). Cheap to clone; never printed.
#[derive(Clone, Default, PartialEq)]
pub(crate) struct Secrets {
    /// The values, deduplicated, each at least [`MIN_SECRET_BYTES`] long.
    values: Arc<[String]>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} values)", self.values.len())
    }
}

impl Secrets {
    /// The set of `values` (empty and too-short ones dropped).
    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Secrets {
        let mut values: Vec<String> = values
            .into_iter()
            .map(|value| value.trim().to_string())
            .filter(|value| value.len() >= MIN_SECRET_BYTES)
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Secrets {
            values: values.into(),
        }
    }

    /// This set with `more` added.
    pub(crate) fn with(&self, more: impl IntoIterator<Item = String>) -> Secrets {
        Secrets::new(self.values.iter().cloned().chain(more))
    }

    /// How many secrets the set holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.values.len()
    }

    /// `text` with every secret replaced by [`REDACTED`]. A secret cut by an excerpt
    /// (its first bytes right before the `…` that ends the excerpt, or at the end of
    /// the text) is replaced too, when at least [`MIN_SECRET_BYTES`] of it are there.
    pub(crate) fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in self.values.iter() {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        let (body, tail) = match out.strip_suffix(ELLIPSIS) {
            Some(body) => (body, ELLIPSIS),
            None => (out.as_ref(), ""),
        };
        let cut = self
            .values
            .iter()
            .filter_map(|secret| {
                (MIN_SECRET_BYTES..secret.len())
                    .rev()
                    .filter(|&n| secret.is_char_boundary(n))
                    .find(|&n| body.ends_with(&secret[..n]))
            })
            .max();
        match cut {
            Some(n) => Cow::Owned(format!("{}{REDACTED}{tail}", &body[..body.len() - n])),
            None => out,
        }
    }

    /// `error` with every text it carries redacted.
    pub(crate) fn redact_error(&self, mut error: LlmError) -> LlmError {
        if self.values.is_empty() {
            return error;
        }
        let clean = |text: &mut String| {
            if let Cow::Owned(redacted) = self.redact(text) {
                *text = redacted;
            }
        };
        match &mut error {
            LlmError::Config { message, .. } => clean(message),
            LlmError::Auth { excerpt, .. }
            | LlmError::UnknownModel { excerpt, .. }
            | LlmError::ContextTooLong { excerpt, .. }
            | LlmError::RateLimited { excerpt, .. }
            | LlmError::BadRequest { excerpt, .. }
            | LlmError::Server { excerpt, .. } => clean(excerpt),
            LlmError::Redirected {
                location, remedy, ..
            } => {
                clean(location);
                clean(remedy);
            }
            LlmError::Connection { what, .. } => clean(what),
            LlmError::Malformed { detail, .. } | LlmError::Truncated { detail, .. } => {
                clean(detail)
            }
            LlmError::ScriptExhausted { .. } => {}
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-0123456789abcdef";

    #[test]
    fn every_secret_is_replaced_wherever_it_is() {
        let secrets = Secrets::new([
            KEY.to_string(),
            "gw-token-42".into(),
            "".into(),
            "ab".into(),
        ]);
        assert_eq!(
            secrets.len(),
            2,
            "empty and too-short values are not secrets"
        );
        let text = format!("bad key {KEY}; header gw-token-42 and {KEY} again; ab stays");
        assert_eq!(
            secrets.redact(&text),
            "bad key [redacted]; header [redacted] and [redacted] again; ab stays"
        );
        assert!(matches!(secrets.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_cut_by_an_excerpt_is_replaced_too() {
        let secrets = Secrets::new([KEY.to_string()]);
        assert_eq!(secrets.redact("key: sk-live-0123…"), "key: [redacted]…");
        assert_eq!(secrets.redact("key: sk-live-01"), "key: [redacted]");
        assert_eq!(secrets.redact("key: sk-…"), "key: sk-…", "3 bytes are kept");
    }

    #[test]
    fn a_secret_containing_another_is_replaced_whole() {
        let secrets = Secrets::new(["secret".to_string(), "my-secret-key".into()]);
        assert_eq!(
            secrets.redact("my-secret-key secret"),
            "[redacted] [redacted]"
        );
    }

    #[test]
    fn errors_are_redacted_in_every_text_they_carry() {
        let secrets = Secrets::new([KEY.to_string()]);
        let error = LlmError::Auth {
            provider: "openai",
            model: "m".into(),
            status: 401,
            excerpt: format!("Incorrect API key provided: {KEY}"),
        };
        let text = secrets.redact_error(error).to_string();
        assert!(!text.contains(KEY) && text.contains(REDACTED), "{text}");
        assert_eq!(format!("{secrets:?}"), "Secrets(1 values)");
    }
}
