//! `[queue]`: where sub-agent jobs go. Plain settings; the BullMQ connection, key
//! layout and retention built from them live in [`crate::queue`].

use crate::outcome::AgentState;

/// `[queue]` in `warren.toml`, or `--redis`.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueConfig {
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
            name: "warren".into(),
            keep_results_s: 86_400,
            attempts: 3,
            lock_ms: 30_000,
            stalled_interval_ms: 30_000,
            max_stalled: 1,
            shutdown_grace_s: 30,
            parent_timeout_s: 30,
            default_profile: None,
            fail_jobs_on: vec![AgentState::Error],
            keep_failed_s: None,
        }
    }
}

impl QueueConfig {
    /// The Redis URL without its password, for messages.
    pub fn redacted_url(&self) -> String {
        let url = self.redis.as_deref().unwrap_or("");
        match (url.find("://"), url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}://***@{}", &url[..scheme], &url[at + 1..])
            }
            _ => url.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted() {
        let config = QueueConfig {
            redis: Some("redis://user:secret@host:6379/0".into()),
            ..QueueConfig::default()
        };
        assert_eq!(config.redacted_url(), "redis://***@host:6379/0");
    }
}
