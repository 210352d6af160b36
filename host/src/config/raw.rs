//! The shape of `warren.toml` as written: its top-level tables, each key typed so a
//! bad value fails where it is written and an unknown key is refused.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::defaults::RawDefaults;
use super::plugins::RawPlugins;
use super::profile_table::RawProfile;
use super::queue::RawQueue;
use super::tool_selection::ToolAliases;
use super::values::{ProfileName, ToolPattern};
use crate::llm::ModelConfig;

/// The whole file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    /// `[plugins]` and its `[plugins.NAME]` tables.
    #[serde(default)]
    pub(super) plugins: RawPlugins,
    /// `[models.NAME]`.
    #[serde(default)]
    pub(super) models: BTreeMap<ProfileName, Spanned<ModelConfig>>,
    /// `[defaults]`.
    #[serde(default)]
    pub(super) defaults: RawDefaults,
    /// `[profiles.NAME]`.
    #[serde(default)]
    pub(super) profiles: BTreeMap<ProfileName, RawProfile>,
    /// `[queue]`.
    pub(super) queue: Option<RawQueue>,
    /// `[journal]`.
    pub(super) journal: Option<super::journal::RawJournal>,
    /// More tool names (e.g. other systems' names) for warren tools.
    #[serde(default)]
    pub(super) tool_aliases: BTreeMap<String, RawToolAlias>,
    /// Model names used by agent files (`sonnet`, `opus`, …) for `[models]` names.
    #[serde(default)]
    pub(super) model_aliases: BTreeMap<String, Spanned<String>>,
}

/// One `[tool_aliases]` value.
#[derive(Deserialize)]
#[serde(untagged, expecting = "a tool name or a list of tool names")]
pub(super) enum RawToolAlias {
    /// One warren tool.
    One(ToolPattern),
    /// Several.
    Many(Vec<ToolPattern>),
}

/// `[tool_aliases]`, each value one name or a list.
pub(super) fn tool_aliases(raw: &BTreeMap<String, RawToolAlias>) -> ToolAliases {
    raw.iter()
        .map(|(alias, tools)| {
            let tools = match tools {
                RawToolAlias::One(tool) => vec![tool.0.clone()],
                RawToolAlias::Many(tools) => tools.iter().map(|t| t.0.clone()).collect(),
            };
            (alias.clone(), tools)
        })
        .collect()
}
