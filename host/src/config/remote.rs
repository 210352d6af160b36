//! `[profiles.NAME.a2a]`: a profile whose agent is a remote A2A agent, not a model
//! in warren's sandbox. Its tools and capabilities are the remote agent's own, so
//! warren cannot narrow them: a profile must say `unsandboxed = true` to be one,
//! and may not write tools, capabilities, a model or approvals that would not hold.

use serde::Deserialize;

/// `[profiles.NAME.a2a]` as written.
#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(super) struct RawRemote {
    /// Where the agent's card is: its base URL (the card at
    /// `/.well-known/agent-card.json` below it) or the card's own URL.
    url: String,
    /// The environment variable holding the bearer token to send, if it needs one.
    token_env: Option<String>,
    /// Must be `true`: the agent runs outside warren's sandbox.
    #[serde(default)]
    unsandboxed: bool,
}

/// A remote A2A agent a profile runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RemoteAgent {
    /// Its card's URL.
    pub(crate) card_url: String,
    /// The variable holding its bearer token (read when a child starts, never
    /// logged).
    pub(crate) token_env: Option<String>,
}

impl RawRemote {
    /// The remote agent, or what is wrong with the table (`key` names it).
    pub(super) fn resolve(&self, key: &str) -> Result<RemoteAgent, String> {
        if !self.unsandboxed {
            return Err(format!(
                "a remote A2A agent runs outside warren's sandbox (its tools, files and network are its own, and no profile limit narrows them): add `unsandboxed = true` to [{key}] to opt in"
            ));
        }
        let url = self.url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "{key}.url must be an http:// or https:// URL, not `{url}`"
            ));
        }
        let card_url = if url.ends_with(".json") {
            url.to_string()
        } else {
            format!("{}/.well-known/agent-card.json", url.trim_end_matches('/'))
        };
        if let Some(name) = &self.token_env {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "`token_env` must name an environment variable (letters, digits, `_`), not `{name}`"
                ));
            }
        }
        Ok(RemoteAgent {
            card_url,
            token_env: self.token_env.clone(),
        })
    }
}
