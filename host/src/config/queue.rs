//! `[queue]`: where sub-agent jobs go. Plain settings; the BullMQ connection, key
//! layout and retention built from them live in [`crate::queue`].

use serde::Deserialize;
use toml::Spanned;

use super::values::{Bounded, Parsed, ProfileName, QueueName};
use crate::outcome::AgentState;

/// `keep_results_s` and `keep_failed_s`: up to a year.
pub(super) type Retention = Bounded<1, 31_536_000>;
/// `attempts`.
pub(super) type Attempts = Bounded<1, 100>;
/// `lock_ms`: half a second to an hour.
pub(super) type LockMs = Bounded<500, 3_600_000>;
/// `stalled_interval_ms`.
pub(super) type StalledIntervalMs = Bounded<100, 3_600_000>;
/// `max_stalled`.
pub(super) type MaxStalled = Bounded<0, 100>;
/// `shutdown_grace_s`: up to a day.
pub(super) type GraceSeconds = Bounded<0, 86_400>;
/// `parent_timeout_s`: renewed every sixth of it, so at least 2 s.
pub(super) type ParentTimeout = Bounded<2, 86_400>;

/// The defaults of `[queue]`, as [`QueueConfig::default`] holds them.
pub(super) const DEFAULT_QUEUE_NAME: &str = "warren";
/// `[queue] keep_results_s`: a day.
pub(super) const DEFAULT_KEEP_RESULTS_S: u64 = 86_400;
/// `[queue] attempts`.
pub(super) const DEFAULT_ATTEMPTS: u32 = 3;
/// `[queue] lock_ms`.
pub(super) const DEFAULT_LOCK_MS: u64 = 30_000;
/// `[queue] stalled_interval_ms`.
pub(super) const DEFAULT_STALLED_INTERVAL_MS: u64 = 30_000;
/// `[queue] max_stalled`.
pub(super) const DEFAULT_MAX_STALLED: u32 = 1;
/// `[queue] shutdown_grace_s`.
pub(super) const DEFAULT_SHUTDOWN_GRACE_S: u64 = 30;
/// `[queue] parent_timeout_s`.
pub(super) const DEFAULT_PARENT_TIMEOUT_S: u64 = 30;
/// `[queue] fail_jobs_on`.
pub(super) const DEFAULT_FAIL_JOBS_ON: &[AgentState] = &[AgentState::Error];

/// `[queue]` in `warren.toml`, or `--redis`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QueueConfig {
    /// `redis://[user:password@]host:port[/db]`; `None` runs sub-agents in-process.
    pub redis: Option<String>,
    /// The BullMQ queue name (keys `bull:NAME:…`; default `warren`).
    pub name: String,
    /// How long finished jobs and their results stay in Redis (default one day).
    pub keep_results_s: u64,
    /// Attempts before a job that keeps failing ends failed (default 3).
    pub attempts: u32,
    /// A worker's lock on a job; renewed at half this while it runs, so a killed
    /// worker's job is taken again after at most this long (default 30 000).
    pub lock_ms: u64,
    /// How often workers look for stalled jobs (default 30 000).
    pub stalled_interval_ms: u64,
    /// Stalls (a worker died while running it) before a job ends failed (default 1).
    pub max_stalled: u32,
    /// On SIGTERM or Ctrl-C, how long a worker lets its jobs finish before it hands
    /// them back to the queue (default 30).
    pub shutdown_grace_s: u64,
    /// A parent process renews its heartbeat key every sixth of this; when the key
    /// has expired (the parent died, or lost Redis this long), workers cancel its
    /// jobs (default 30).
    pub parent_timeout_s: u64,
    /// The profile of a job that names none (producers other than warren).
    pub default_profile: Option<String>,
    /// Agent end states that make the BullMQ job *failed* (with the reason), so the
    /// producer's `attempts` and `backoff` apply (default `["error"]`); other states
    /// complete the job with the outcome as its return value.
    pub fail_jobs_on: Vec<AgentState>,
    /// How long failed jobs stay in Redis (`None`, the default: forever, as BullMQ's
    /// `removeOnFail: false`).
    pub keep_failed_s: Option<u64>,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            redis: None,
            name: DEFAULT_QUEUE_NAME.into(),
            keep_results_s: DEFAULT_KEEP_RESULTS_S,
            attempts: DEFAULT_ATTEMPTS,
            lock_ms: DEFAULT_LOCK_MS,
            stalled_interval_ms: DEFAULT_STALLED_INTERVAL_MS,
            max_stalled: DEFAULT_MAX_STALLED,
            shutdown_grace_s: DEFAULT_SHUTDOWN_GRACE_S,
            parent_timeout_s: DEFAULT_PARENT_TIMEOUT_S,
            default_profile: None,
            fail_jobs_on: DEFAULT_FAIL_JOBS_ON.to_vec(),
            keep_failed_s: None,
        }
    }
}

impl QueueConfig {
    /// The Redis URL without its password, for messages.
    pub(crate) fn redacted_url(&self) -> String {
        let url = self.redis.as_deref().unwrap_or("");
        match (url.find("://"), url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}://***@{}", &url[..scheme], &url[at + 1..])
            }
            _ => url.to_string(),
        }
    }
}

/// `[queue]`: sub-agent jobs through Redis (see [`crate::queue`]).
#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(super) struct RawQueue {
    /// See [`QueueConfig::redis`].
    redis: Option<String>,
    /// See [`QueueConfig::name`].
    name: Option<QueueName>,
    /// See [`QueueConfig::keep_results_s`].
    keep_results_s: Option<Retention>,
    /// See [`QueueConfig::attempts`].
    attempts: Option<Attempts>,
    /// See [`QueueConfig::lock_ms`].
    lock_ms: Option<LockMs>,
    /// See [`QueueConfig::stalled_interval_ms`].
    stalled_interval_ms: Option<StalledIntervalMs>,
    /// See [`QueueConfig::max_stalled`].
    max_stalled: Option<MaxStalled>,
    /// See [`QueueConfig::shutdown_grace_s`].
    shutdown_grace_s: Option<GraceSeconds>,
    /// See [`QueueConfig::parent_timeout_s`].
    parent_timeout_s: Option<ParentTimeout>,
    /// See [`QueueConfig::default_profile`]; its span, for the check once profiles
    /// are loaded.
    #[cfg_attr(test, schemars(with = "Option<String>"))]
    pub(super) default_profile: Option<Spanned<ProfileName>>,
    /// See [`QueueConfig::fail_jobs_on`].
    fail_jobs_on: Option<Vec<Parsed<AgentState>>>,
    /// See [`QueueConfig::keep_failed_s`].
    keep_failed_s: Option<Retention>,
}

impl RawQueue {
    /// The settings: each as written, else its default.
    pub(super) fn resolve(self) -> QueueConfig {
        let d = QueueConfig::default();
        QueueConfig {
            redis: self.redis,
            name: self.name.map_or(d.name, |n| n.0),
            keep_results_s: self.keep_results_s.map_or(d.keep_results_s, |v| v.0),
            attempts: self.attempts.map_or(d.attempts, |v| v.0 as u32),
            lock_ms: self.lock_ms.map_or(d.lock_ms, |v| v.0),
            stalled_interval_ms: self
                .stalled_interval_ms
                .map_or(d.stalled_interval_ms, |v| v.0),
            max_stalled: self.max_stalled.map_or(d.max_stalled, |v| v.0 as u32),
            shutdown_grace_s: self.shutdown_grace_s.map_or(d.shutdown_grace_s, |v| v.0),
            parent_timeout_s: self.parent_timeout_s.map_or(d.parent_timeout_s, |v| v.0),
            default_profile: self.default_profile.map(|p| p.into_inner().0),
            fail_jobs_on: self.fail_jobs_on.map_or(d.fail_jobs_on, |states| {
                states.into_iter().map(|s| s.0).collect()
            }),
            keep_failed_s: self.keep_failed_s.map(|v| v.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::parse;

    #[test]
    fn queue_settings_default_and_parse() {
        let config = parse("").unwrap();
        assert_eq!(config.queue, QueueConfig::default());
        assert_eq!(config.queue.parent_timeout_s, 30);
        let config =
            parse("[queue]\nredis = \"redis://h:1\"\nparent_timeout_s = 5\nkeep_results_s = 60\n")
                .unwrap();
        assert_eq!(config.queue.redis.as_deref(), Some("redis://h:1"));
        assert_eq!(config.queue.parent_timeout_s, 5);
        assert_eq!(config.queue.keep_results_s, 60);
        assert_eq!(config.queue.attempts, QueueConfig::default().attempts);
    }

    #[test]
    fn urls_are_redacted() {
        let config = QueueConfig {
            redis: Some("redis://user:secret@host:6379/0".into()),
            ..QueueConfig::default()
        };
        assert_eq!(config.redacted_url(), "redis://***@host:6379/0");
    }
}
