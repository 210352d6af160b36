//! A child as its parent hands it over: the one narrowing rule ([`narrow`]) that
//! turns a profile and what a parent asks into what the child gets, in-process and on
//! workers alike; the child's first message ([`compose_task`]); [`ChildSpec`], what a
//! child needs to run anywhere; and [`Backend`], the seam through which a child runs
//! somewhere other than this process (the Redis queue implements it).

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::carried::{Again, History};
use super::handle::JobHandle;
use super::tree::JobId;
use crate::config::{AgentLimits, ApprovalRule, OutputSchema, Profile};
use crate::outcome::AgentOutcome;
use crate::policy::CapabilitySet;

/// What a parent asks of a child beyond its profile: the arguments of a
/// `spawn_agent` call, or the fields of a queue job.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ChildAsk<'a> {
    /// A subset of the profile's tools.
    pub tools: Option<&'a [String]>,
    /// Asked-for turn limit.
    pub max_turns: Option<u32>,
    /// Asked-for wall-time limit.
    pub timeout_s: Option<u64>,
    /// Asked-for cost cap.
    pub max_cost_usd: Option<f64>,
    /// The parent's capabilities; the child's are intersected with them.
    pub ceiling: Option<&'a CapabilitySet>,
    /// The parent's model (a `[models]` name): a child whose profile says `model:
    /// inherit` runs on it. `None` (a job from another producer): the profile's own.
    pub parent_model: Option<&'a str>,
    /// The JSON Schema the child's answer must match, when the profile fixes none (or
    /// fixes this one).
    pub output_schema: Option<&'a OutputSchema>,
    /// The parent's approval rule: the child's calls need a person's yes wherever its
    /// own profile's or this says.
    pub approval: Option<&'a ApprovalRule>,
}

/// What a child of profile `base` gets when asked for `ask`: capabilities within the
/// ceiling, the tool subset (every name must be one of `available()`, the tools `base`
/// may call, listed only when a subset is asked for; a name that is not is an error,
/// never silently dropped), its approval rule joined with the parent's, time and cost
/// only ever lower, turns up to the profile's `max_turns_ceiling`, and the parent's
/// model when the profile says `model: inherit`. The one rule for spawns, in-process
/// and on workers.
pub(crate) fn narrow<'a>(
    base: &Profile,
    ask: &ChildAsk<'_>,
    available: impl FnOnce() -> Vec<&'a str>,
) -> Result<(Profile, AgentLimits), String> {
    let mut profile = base.clone();
    match (&base.output_schema, ask.output_schema) {
        (Some(fixed), Some(asked)) if fixed != asked => {
            return Err(format!(
                "profile `{}` fixes its output schema ({}); the `output_schema` asked for ({}) differs: leave it out to get the profile's",
                base.name,
                bounded_schema(fixed),
                bounded_schema(asked)
            ))
        }
        (None, Some(asked)) => profile.output_schema = Some(asked.clone()),
        _ => {}
    }
    if let Some(ceiling) = ask.ceiling {
        profile.capabilities = base.capabilities.intersect(ceiling);
    }
    if let Some(parent) = ask.approval {
        profile.approval.rule = base.approval.rule.joined(parent);
    }
    if let Some(model) = ask.parent_model.filter(|_| base.inherit_model) {
        profile.model = Some(model.to_string());
    }
    if let Some(tools) = ask.tools {
        let available = available();
        if let Some(bad) = tools.iter().find(|t| !available.contains(&t.as_str())) {
            return Err(format!(
                "tool `{bad}` is not available to profile `{}` (available: {})",
                base.name,
                available.join(", ")
            ));
        }
        profile.tools = base.tools.narrowed_to(tools.to_vec());
    }
    let limits = base.spawn_limits(&AgentLimits {
        max_turns: ask.max_turns.unwrap_or(base.limits.max_turns),
        timeout_s: ask.timeout_s.unwrap_or(base.limits.timeout_s),
        max_cost_usd: ask.max_cost_usd,
    });
    Ok((profile, limits))
}

/// A schema's compact JSON for an error, cut at 200 characters.
fn bounded_schema(schema: &OutputSchema) -> String {
    let text = schema.compact();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// What a spawn asked for and did not get, one sentence each, for the parent: a
/// limit is never lowered (or capped) without the parent being told.
pub(crate) fn clamp_notes(
    base: &Profile,
    ask: &ChildAsk<'_>,
    granted: &AgentLimits,
) -> Vec<String> {
    let name = &base.name;
    let mut notes = Vec::new();
    if let Some(asked) = ask.max_turns.filter(|t| *t != granted.max_turns) {
        notes.push(format!(
            "max_turns {asked} was asked, {} granted: profile `{name}` allows at most {} (max_turns_ceiling).",
            granted.max_turns, base.max_turns_ceiling.max(base.limits.max_turns)
        ));
    }
    if let Some(asked) = ask.timeout_s.filter(|t| *t != granted.timeout_s) {
        notes.push(format!(
            "timeout_s {asked} was asked, {} granted: profile `{name}` allows at most {} (timeout_s).",
            granted.timeout_s, base.limits.timeout_s
        ));
    }
    if let (Some(asked), Some(got)) = (ask.max_cost_usd, granted.max_cost_usd) {
        if got < asked {
            notes.push(format!(
                "max_cost_usd {asked} was asked, {got} granted: profile `{name}` allows at most {got} (max_cost_usd)."
            ));
        }
    }
    notes
}

/// The message a sub-agent starts with: the task, then its context and constraints.
pub(crate) fn compose_task(task: &str, context: Option<&Value>, constraints: &[String]) -> String {
    let mut message = task.to_string();
    match context {
        None | Some(Value::Null) => {}
        Some(Value::String(context)) => {
            message.push_str(&format!("\n\n<context>\n{context}\n</context>"))
        }
        Some(context) => message.push_str(&format!(
            "\n\n<context>\n{}\n</context>",
            serde_json::to_string_pretty(context).unwrap_or_default()
        )),
    }
    if !constraints.is_empty() {
        let list: Vec<String> = constraints.iter().map(|c| format!("- {c}")).collect();
        message.push_str(&format!(
            "\n\n<constraints>\n{}\n</constraints>",
            list.join("\n")
        ));
    }
    message
}

/// Everything a child needs to run on another machine, already narrowed: the
/// machine running it narrows again, with its own profile of that name. A
/// [`Backend`] reads its profile and task, and ships the rest as it serializes: the
/// `data` of the job `[queue] redis` sends a `warren worker` (docs/workers.md; the
/// impl is the queue's, `queue/wire.rs`).
#[derive(Clone, Debug)]
pub struct ChildSpec {
    /// The profile's name.
    pub(crate) profile: String,
    /// What to do.
    pub(crate) task: String,
    /// Only what the child needs to know.
    pub(crate) context: Option<Value>,
    /// Rules it must follow.
    pub(crate) constraints: Vec<String>,
    /// Added to its profile's system prompt.
    pub(crate) system_prompt: Option<String>,
    /// The tool subset asked for, if any.
    pub(crate) tools: Option<Vec<String>>,
    /// Its effective limits.
    pub(crate) limits: AgentLimits,
    /// The model it inherits from its parent (its profile says `model: inherit`), by
    /// `[models]` name: the machine running it narrows with it again, and needs a
    /// model of that name. `None` when its profile names its own.
    pub(crate) model: Option<String>,
    /// The JSON Schema its answer must match, once narrowed.
    pub(crate) output_schema: Option<OutputSchema>,
    /// What is left of the run's budget.
    pub(crate) budget_usd: Option<f64>,
    /// Its parent's capabilities: it never gets more.
    pub(crate) ceiling: CapabilitySet,
    /// The parent's approval rule, which the child's joins.
    pub(crate) approval: ApprovalRule,
    /// The parent's job id.
    pub(crate) parent: JobId,
    /// How deep it is in the whole tree.
    pub(crate) depth: u32,
    /// The W3C trace context of the parent's span.
    pub(crate) traceparent: Option<String>,
    /// A follow-up's run of a child that finished on a worker: the history it rested
    /// with.
    pub(crate) again: Option<Again>,
    /// Where the backend leaves the child's history when a follow-up may resume it.
    pub(crate) kept: Arc<Mutex<Option<History>>>,
}

impl ChildSpec {
    /// The name of the child's profile.
    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// What the child is to do.
    pub fn task(&self) -> &str {
        &self.task
    }
}

/// Somewhere other than this process that runs children.
#[async_trait::async_trait]
pub trait Backend: Send + Sync {
    /// Runs `spec` as `job` to its end and returns its outcome once: the job is
    /// started (`job.start()`) when its agent starts there; its agents' events (and
    /// their children's, registered under `job`) are published in its tree under this
    /// run's ids, their cost charged to its budget; cancelling the job cancels the
    /// child and everything below it. The caller finishes the job with the outcome.
    ///
    /// A backend that can resume a child (warren's queue) reads a follow-up's history
    /// from the spec (`again`) and leaves the child's history, when a follow-up may
    /// resume it, in the spec's `kept`; any other backend ignores both, and its
    /// children end for good.
    async fn run(&self, job: &JobHandle, spec: ChildSpec) -> AgentOutcome;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, DEFAULT_PROFILE};

    fn main_profile() -> Profile {
        let config = Config::parse(std::path::Path::new("warren.toml"), "").unwrap();
        config.profile(DEFAULT_PROFILE).unwrap()
    }

    /// A child's approval rule is its profile's and its parent's: never looser.
    #[test]
    fn a_childs_approval_rule_takes_its_parents() {
        let base = main_profile();
        assert!(base.approval.rule.written().is_empty());
        let parent = ApprovalRule::parse(&["write_file", "@network"]).unwrap();
        let ask = ChildAsk {
            approval: Some(&parent),
            ..ChildAsk::default()
        };
        let (profile, _) = narrow(&base, &ask, Vec::new).unwrap();
        assert_eq!(profile.approval.rule.written(), ["write_file", "@network"]);
        assert!(profile
            .approval
            .rule
            .matches("write_file", &profile.capabilities)
            .is_some());
    }

    #[test]
    fn a_tool_the_profile_lacks_is_an_error() {
        let base = main_profile();
        let tools = vec!["read_file".to_string(), "rm_rf".to_string()];
        let ask = ChildAsk {
            tools: Some(&tools),
            ..ChildAsk::default()
        };
        let error = narrow(&base, &ask, || vec!["read_file", "write_file"]).unwrap_err();
        assert!(error.contains("`rm_rf`"), "{error}");
        let tools = vec!["read_file".to_string()];
        let ask = ChildAsk {
            tools: Some(&tools),
            ..ChildAsk::default()
        };
        let (profile, _) = narrow(&base, &ask, || vec!["read_file", "write_file"]).unwrap();
        assert!(profile.tools.allows("read_file"));
        assert!(!profile.tools.allows("write_file"));
    }

    #[test]
    fn an_inheriting_profile_takes_the_parents_model() {
        let mut base = main_profile();
        base.model = Some("default".into());
        let ask = ChildAsk {
            parent_model: Some("lead"),
            ..ChildAsk::default()
        };
        let (profile, _) = narrow(&base, &ask, Vec::new).unwrap();
        assert_eq!(profile.model.as_deref(), Some("default"), "not inheriting");
        base.inherit_model = true;
        let (profile, _) = narrow(&base, &ask, Vec::new).unwrap();
        assert_eq!(profile.model.as_deref(), Some("lead"));
        let (profile, _) = narrow(&base, &ChildAsk::default(), Vec::new).unwrap();
        assert_eq!(
            profile.model.as_deref(),
            Some("default"),
            "no parent model known: the profile's own"
        );
    }

    #[test]
    fn limits_only_tighten_and_capabilities_stay_within_the_ceiling() {
        let mut base = main_profile();
        base.limits.timeout_s = 60;
        base.capabilities.limits.fuel = 1_000;
        let mut ceiling = CapabilitySet::default();
        ceiling.limits.fuel = 10;
        let ask = ChildAsk {
            timeout_s: Some(600),
            ceiling: Some(&ceiling),
            ..ChildAsk::default()
        };
        let (profile, limits) = narrow(&base, &ask, Vec::new).unwrap();
        assert_eq!(limits.timeout_s, 60);
        assert_eq!(profile.capabilities.limits.fuel, 10);
    }
}
