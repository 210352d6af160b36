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
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    /// `[plugins]` and its `[plugins.NAME]` tables.
    #[serde(default)]
    pub(super) plugins: RawPlugins,
    /// `[models.NAME]`.
    #[serde(default)]
    #[cfg_attr(test, schemars(with = "BTreeMap<String, ModelConfig>"))]
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
    #[cfg_attr(test, schemars(with = "BTreeMap<String, String>"))]
    pub(super) model_aliases: BTreeMap<String, Spanned<String>>,
}

/// One `[tool_aliases]` value.
#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

/// The keys of the file, read from the schema of the structs above.
#[cfg(test)]
pub(super) mod schema {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use crate::config::raw::RawConfig;

    /// Every dotted key the serde structs `warren.toml` is read into accept: a table's
    /// keys, `*` for a name (a map of tables), `[]` for an entry of a list of tables.
    pub(crate) fn schema_keys() -> BTreeSet<String> {
        let schema = schemars::schema_for!(RawConfig);
        let root = schema.as_value();
        let mut keys = BTreeSet::new();
        table_keys(root, root, "", &mut keys);
        keys
    }

    /// `schema` with its `$ref` followed and an optional value's null branch dropped.
    fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
        if let Some(name) = schema.get("$ref").and_then(Value::as_str) {
            let name = name.trim_start_matches("#/$defs/");
            return resolve(root, &root["$defs"][name]);
        }
        for choice in ["anyOf", "oneOf"] {
            if let Some(branches) = schema.get(choice).and_then(Value::as_array) {
                let values: Vec<&Value> = branches
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                    .collect();
                if let [one] = values[..] {
                    return resolve(root, one);
                }
            }
        }
        schema
    }

    /// The tables a map of `schema` holds, when its values are tables.
    fn tables_of<'a>(root: &'a Value, schema: &'a Value) -> Option<&'a Value> {
        let each = resolve(root, schema.get("additionalProperties")?);
        (each.get("properties").is_some()
            || each
                .get("additionalProperties")
                .is_some_and(Value::is_object))
        .then_some(each)
    }

    fn join(prefix: &str, name: &str) -> String {
        match prefix {
            "" => name.to_string(),
            prefix => format!("{prefix}.{name}"),
        }
    }

    fn table_keys(root: &Value, schema: &Value, prefix: &str, keys: &mut BTreeSet<String>) {
        let schema = resolve(root, schema);
        for (name, value) in schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let path = join(prefix, name);
            let value = resolve(root, value);
            if value.get("properties").is_some() || tables_of(root, value).is_some() {
                table_keys(root, value, &path, keys);
                continue;
            }
            if let Some(items) = value.get("items").map(|items| resolve(root, items)) {
                if items.get("properties").is_some() {
                    table_keys(root, items, &format!("{path}[]"), keys);
                }
            }
            keys.insert(path);
        }
        if let Some(each) = tables_of(root, schema) {
            table_keys(root, each, &join(prefix, "*"), keys);
        }
    }
}
