//! A running job's mail, both ways through Redis: the messages and the answers the
//! parent's run leaves for the job's agents, and the worker's look that takes them.

use anyhow::Context as _;

use super::super::wire::{JobLook, JobPoll, StopRequest, WireLetter, MAIL_PER_POLL};
use super::RemoteQueue;
use crate::events::Answered;

impl RemoteQueue {
    /// Leaves `letter` for the agent of running job `id`, for its worker's next look.
    pub(crate) async fn post_mail(&self, id: &str, letter: &WireLetter) -> anyhow::Result<()> {
        let key = self.config.mail_key(id);
        self.post(&key, serde_json::to_string(letter)?)
            .await
            .context("leaving the message in Redis")
    }

    /// Leaves a person's `answer` for the request an agent of running job `id` waits
    /// on, for its worker's next look.
    pub(crate) async fn post_answer(&self, id: &str, answer: &Answered) -> anyhow::Result<()> {
        let key = self.config.answers_key(id);
        self.post(&key, serde_json::to_string(answer)?)
            .await
            .context("leaving the answer in Redis")
    }

    /// Appends `line` to list `key`, which lives as long as a job's markers.
    async fn post(&self, key: &str, line: String) -> redis::RedisResult<()> {
        let mut conn = self.queue.connection().connection();
        redis::pipe()
            .rpush(key, line)
            .expire(key, self.config.marker_ttl_s() as i64)
            .query_async::<()>(&mut conn)
            .await
    }

    /// A look at running job `id`: why it must stop, if it must ([`StopRequest::of`]),
    /// and up to [`MAIL_PER_POLL`] messages for its agent, taken. `None` when Redis
    /// does not answer (it looks again).
    pub(crate) async fn poll_job(&self, id: &str) -> Option<JobPoll> {
        let mut conn = self.queue.connection().connection();
        let job_key = self.config.job_key(id);
        let (cancel, exists, (finished_on, failed_reason), mail, answers): JobLook = redis::pipe()
            .exists(self.config.cancel_key(id))
            .exists(&job_key)
            .cmd("HMGET")
            .arg(&job_key)
            .arg("finishedOn")
            .arg("failedReason")
            .cmd("LPOP")
            .arg(self.config.mail_key(id))
            .arg(MAIL_PER_POLL)
            .cmd("LPOP")
            .arg(self.config.answers_key(id))
            .arg(MAIL_PER_POLL)
            .query_async(&mut conn)
            .await
            .ok()?;
        Some(JobPoll {
            stop: StopRequest::of(cancel, exists, finished_on.is_some(), failed_reason),
            mail: WireLetter::read_all(mail.unwrap_or_default(), id),
            answers: answers
                .unwrap_or_default()
                .iter()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect(),
        })
    }
}
