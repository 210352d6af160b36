//! `[defaults]`: what every profile inherits (its model, limits, capabilities and
//! bootstrap prompt, the turns ceiling) whether a `[profiles]` table, an agent file or
//! the implicit `main` defines it, and the limits of every run.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::approval::Approval;
use super::capabilities::{self, RawCapabilities};
use super::error::ConfigError;
use super::limits::{
    AgentLimits, AgentSeconds, Agents, Depth, FollowUps, HostConcurrency, MessageKib,
    PendingRequests, QueuedMessages, RunConcurrency, RunLimits, Turns,
};
use super::models::model_name;
use super::output_schema::OutputSchema;
use super::profile::{join_prompt, turns_ceiling, Profile, ProfileNote, ProfileSource};
use super::source::Source;
use super::tool_selection::{ToolAliases, ToolSelection};
use super::values::{count_or, Dollars};
use crate::llm::ModelConfig;
use crate::policy::CapabilitySet;

/// `[defaults]`: what every profile inherits, and the run's limits.
#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    /// The model of profiles that name none.
    #[cfg_attr(test, schemars(with = "Option<String>"))]
    model: Option<Spanned<String>>,
    /// Turns of one agent.
    max_turns: Option<Turns>,
    /// The most turns a spawn may give, in every profile that sets no ceiling.
    max_turns_ceiling: Option<Turns>,
    /// Wall time of one agent.
    timeout_s: Option<AgentSeconds>,
    /// Sub-agents running at once per run.
    max_concurrent: Option<RunConcurrency>,
    /// Sub-agents running at once per host.
    max_concurrent_total: Option<HostConcurrency>,
    /// How deep agents may nest.
    max_depth: Option<Depth>,
    /// Cost cap of a whole run.
    budget_usd: Option<Dollars>,
    /// Bytes one message to an agent may hold, in KiB.
    max_message_kb: Option<MessageKib>,
    /// Messages that may wait unread in one agent's mailbox.
    max_queued_messages: Option<QueuedMessages>,
    /// Follow-ups that may wake one agent after it finished.
    max_follow_ups: Option<FollowUps>,
    /// Approvals and questions that may wait at once in one run.
    max_pending_requests: Option<PendingRequests>,
    /// Agents one run may hold.
    max_agents: Option<Agents>,
    /// `[defaults.capabilities]`, under every profile's own.
    #[serde(default)]
    pub(super) capabilities: RawCapabilities,
}

impl RawDefaults {
    /// The limits of every run: each as written, else its default.
    pub(super) fn run_limits(&self) -> RunLimits {
        let d = RunLimits::default();
        RunLimits {
            max_concurrent: count_or(self.max_concurrent, d.max_concurrent),
            max_concurrent_total: count_or(self.max_concurrent_total, d.max_concurrent_total),
            max_depth: self.max_depth.map_or(d.max_depth, |v| v.0 as u32),
            budget_usd: self.budget_usd.map(|v| v.0),
            max_message_kb: count_or(self.max_message_kb, d.max_message_kb),
            max_queued_messages: count_or(self.max_queued_messages, d.max_queued_messages),
            max_follow_ups: count_or(self.max_follow_ups, d.max_follow_ups),
            max_pending_requests: count_or(self.max_pending_requests, d.max_pending_requests),
            max_agents: count_or(self.max_agents, d.max_agents),
            answers: d.answers,
        }
    }
}

/// What every profile inherits, resolved once: the file's `[defaults]`, its models and
/// aliases, and the bootstrap files beside it.
pub(super) struct Inherited<'a> {
    /// `[defaults.capabilities]` as written: a `[profiles]` table's own go over it,
    /// field by field.
    pub(super) raw_capabilities: &'a RawCapabilities,
    /// The same, resolved: an agent file's capabilities, and the implicit `main`'s.
    pub(super) capabilities: CapabilitySet,
    /// `[defaults] max_turns_ceiling`, when set.
    pub(super) max_turns_ceiling: Option<u32>,
    /// `AGENTS.md` and `ENVIRONMENT.md`, first in the prompt of a `[profiles]` table
    /// that lists no bootstrap files of its own.
    pub(super) bootstrap: Vec<String>,
    /// `[defaults] model` (or the only model), unless a profile names one.
    pub(super) model: Option<String>,
    /// `[defaults]` turns and time (a cost cap is only ever a profile's own).
    pub(super) limits: AgentLimits,
    /// `[models]`, to look a profile's model up in.
    pub(super) models: &'a BTreeMap<String, ModelConfig>,
    /// `[model_aliases]`, likewise.
    pub(super) model_aliases: &'a BTreeMap<String, String>,
    /// `[tool_aliases]` (and the built-in ones), for tool lists.
    pub(super) tool_aliases: ToolAliases,
}

impl<'a> Inherited<'a> {
    /// Resolves `raw` against the file (`src`) and its `models` and aliases.
    pub(super) fn resolve(
        src: &Source<'_>,
        raw: &'a RawDefaults,
        models: &'a BTreeMap<String, ModelConfig>,
        model_aliases: &'a BTreeMap<String, String>,
        tool_aliases: ToolAliases,
    ) -> Result<Inherited<'a>, ConfigError> {
        let capabilities =
            capabilities::resolve(src, &raw.capabilities, None, "defaults.capabilities")?;
        let model = match &raw.model {
            Some(model) => Some(model_name(
                src,
                model,
                models,
                model_aliases,
                "defaults.model",
            )?),
            None if models.len() == 1 => models.keys().next().cloned(),
            None => None,
        };
        let d = AgentLimits::default();
        let limits = AgentLimits {
            max_turns: raw.max_turns.map_or(d.max_turns, |v| v.0 as u32),
            timeout_s: raw.timeout_s.map_or(d.timeout_s, |v| v.0),
            max_cost_usd: None,
        };
        Ok(Inherited {
            raw_capabilities: &raw.capabilities,
            capabilities,
            max_turns_ceiling: raw.max_turns_ceiling.map(|v| v.0 as u32),
            bootstrap: src.default_bootstrap(),
            model,
            limits,
            models,
            model_aliases,
            tool_aliases,
        })
    }

    /// The implicit `main`: every tool, and everything else inherited.
    pub(super) fn implicit_main(&self, name: &str) -> Profile {
        self.profile(Written {
            name: name.to_string(),
            description: None,
            tools: ToolSelection::all(),
            capabilities: self.capabilities.clone(),
            prompt: join_prompt(&self.bootstrap),
            model: None,
            inherit_model: false,
            max_turns: None,
            max_turns_ceiling: None,
            timeout_s: None,
            max_cost_usd: None,
            output_schema: None,
            approval: Approval::default(),
            source: ProfileSource::Config,
            notes: Vec::new(),
        })
    }

    /// The profile `written` defines, what it leaves out inherited: the one place
    /// defaults apply, for a `[profiles]` table, an agent file and the implicit
    /// `main` alike.
    pub(super) fn profile(&self, written: Written) -> Profile {
        let max_turns = written.max_turns.unwrap_or(self.limits.max_turns);
        Profile {
            name: written.name,
            description: written.description,
            tools: written.tools,
            capabilities: written.capabilities,
            system_prompt: written.prompt,
            model: written.model.or_else(|| self.model.clone()),
            limits: AgentLimits {
                max_turns,
                timeout_s: written.timeout_s.unwrap_or(self.limits.timeout_s),
                max_cost_usd: written.max_cost_usd,
            },
            max_turns_ceiling: turns_ceiling(
                written.max_turns_ceiling,
                self.max_turns_ceiling,
                max_turns,
            ),
            inherit_model: written.inherit_model,
            output_schema: written.output_schema,
            approval: written.approval,
            source: written.source,
            remote: None,
            notes: written.notes,
        }
    }
}

/// What one definition of a profile says, resolved against the file but before
/// `[defaults]` fill its gaps ([`Inherited::profile`]); `None` is "not written".
pub(super) struct Written {
    /// The profile's name.
    pub(super) name: String,
    /// `description`.
    pub(super) description: Option<String>,
    /// The tools, each definition's rules applied.
    pub(super) tools: ToolSelection,
    /// Its capabilities, already over `[defaults.capabilities]`.
    pub(super) capabilities: CapabilitySet,
    /// The whole system prompt.
    pub(super) prompt: String,
    /// The model it names (an agent file's `inherit` leaves this `None`).
    pub(super) model: Option<String>,
    /// `model: inherit`.
    pub(super) inherit_model: bool,
    /// `max_turns`.
    pub(super) max_turns: Option<u32>,
    /// `max_turns_ceiling`.
    pub(super) max_turns_ceiling: Option<u32>,
    /// `timeout_s`.
    pub(super) timeout_s: Option<u64>,
    /// `max_cost_usd` (never inherited: a cost cap is only ever a profile's own).
    pub(super) max_cost_usd: Option<f64>,
    /// `output_schema`.
    pub(super) output_schema: Option<OutputSchema>,
    /// `approval` and `approval_timeout_s`.
    pub(super) approval: Approval,
    /// Where it was defined.
    pub(super) source: ProfileSource,
    /// What the user should know about the definition.
    pub(super) notes: Vec<ProfileNote>,
}
