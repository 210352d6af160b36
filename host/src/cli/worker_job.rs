//! What a worker reads of a job before it runs it: the job's data, checked (its
//! size first), the worker's profile it names, and how its agent starts there (that
//! profile narrowed by the job; a follow-up's job opens with the history it carries).

use bullmq::Job;

use crate::config::AnswerPolicy;
use crate::config::{names_or_none, Config, OutputSchema, Profile, DEFAULT_PROFILE};
use crate::host::{Host, JobStart};
use crate::jobs::{compose_task, narrow, ChildAsk};
use crate::queue::wire::{data_too_large, JobData, WireLetter};

/// The job's data, checked, and the worker's profile it names (or the default).
pub(super) fn read_job<'h>(
    host: &'h Host,
    worker: &str,
    job: &Job,
    id: &str,
) -> Result<(JobData, &'h Profile), bullmq::Error> {
    if let Some(reason) = data_too_large(job.data()) {
        tracing::warn!(job = %id, "{reason}");
        return Err(bullmq::Error::Unrecoverable(format!("job {id}: {reason}")));
    }
    let mut data: JobData = serde_json::from_value(job.data().clone())
        .map_err(|e| bullmq::Error::Unrecoverable(format!("job {id}: not a warren job: {e}")))?;
    let config = host.config();
    warn_unknown_fields_once(id, &data);
    if data.profile.is_empty() {
        data.profile = unnamed_jobs_profile(config).to_string();
    }
    let Some(base) = config.find_profile(&data.profile) else {
        let reason = format!(
            "unknown profile `{}` on worker {worker} (it has: {})",
            data.profile,
            names_or_none(config.profile_names().iter())
        );
        tracing::warn!(job = %id, "{reason}");
        return Err(bullmq::Error::Unrecoverable(reason));
    };
    Ok((data, base))
}

/// The profile of a job that names none (another producer's): `[queue]
/// default_profile`, else `main` (the file's, or the implicit one).
pub(super) fn unnamed_jobs_profile(config: &Config) -> &str {
    config
        .queue
        .default_profile
        .as_deref()
        .unwrap_or(DEFAULT_PROFILE)
}

/// How the job's agent starts: profile `base` narrowed by the job. `Err` (outer) for
/// job data that can never run; `Ok(Err)` for a model this worker lacks, which is
/// retried (another worker in the pool may have it).
pub(super) fn job_start(
    host: &Host,
    worker: &str,
    id: &str,
    data: &JobData,
    base: &Profile,
) -> Result<Result<JobStart, String>, bullmq::Error> {
    let config = host.config();
    let ceiling = data.ceiling.as_ref().map(|c| c.to_capabilities());
    let output_schema = data
        .output_schema
        .clone()
        .map(OutputSchema::new)
        .transpose()
        .map_err(|reason| {
            bullmq::Error::Unrecoverable(format!("job {id}: `output_schema`: {reason}"))
        })?;
    let approval = crate::config::ApprovalRule::parse(&data.approval).map_err(|reason| {
        bullmq::Error::Unrecoverable(format!("job {id}: `approval`: {reason}"))
    })?;
    let ask = ChildAsk {
        approval: Some(&approval),
        output_schema: output_schema.as_ref(),
        tools: data.tools.as_deref(),
        max_turns: data.limits.max_turns,
        timeout_s: data.limits.timeout_s,
        max_cost_usd: data.limits.max_cost_usd,
        ceiling: ceiling.as_ref(),
        parent_model: data.model.as_deref(),
    };
    // A child that takes its parent's model (its profile says `model: inherit` in the
    // parent's process, or it runs as its parent) takes it here too.
    let inheriting;
    let base = if data.inherit_model && data.model.is_some() && !base.inherit_model {
        inheriting = Profile {
            inherit_model: true,
            ..base.clone()
        };
        &inheriting
    } else {
        base
    };
    let (profile, limits) = narrow(base, &ask, || host.registry().names_for(base))
        .map_err(|reason| bullmq::Error::Unrecoverable(format!("job {id}: {reason}")))?;
    // An inherited model is the parent's name for it: this worker may not have one.
    // Like a worker without the profile's model, that is retried, on any worker:
    // another in the pool may have it.
    if let Some(model) = profile
        .model
        .as_deref()
        .filter(|model| !config.models.contains_key(*model))
    {
        return Ok(Err(format!(
            "model `{model}` (inherited from the parent's profile: `model: inherit`) is not under [models] on worker {worker} (it has: {})",
            names_or_none(config.models.keys())
        )));
    }
    let budget_usd = match (data.limits.budget_usd, config.run_limits.budget_usd) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(Ok(JobStart {
        profile,
        task: compose_task(&data.task, data.context.as_ref(), &data.constraints),
        extra_prompt: data.system_prompt.clone(),
        limits,
        depth: data.depth,
        budget_usd,
        traceparent: data.traceparent.clone(),
        queue_job: Some(id.to_string()),
        run_id: None,
        // A warren parent asks its people; another producer's job has nobody to ask.
        answers: data.parent.as_ref().map(|_| AnswerPolicy::Ask),
        carried: data.history.clone().map(|history| {
            let letters = data.letters.iter().map(WireLetter::to_letter).collect();
            (history, letters)
        }),
        keep_history: data.keep_history,
    }))
}

/// Logs each job-data field warren does not know, once per field name per process.
fn warn_unknown_fields_once(id: &str, data: &JobData) {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for field in data.unknown.keys() {
        if seen.insert(field.clone()) {
            tracing::warn!(job = %id, "ignoring job-data field `{field}` (not a warren field; logged once)");
        }
    }
}
