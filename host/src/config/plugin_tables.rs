//! `[plugins.NAME]` tables: how one plugin's tools are offered (renamed, described,
//! hidden, annotated for MCP clients) and, for a typed component, which WIT describes
//! them. Plain data here; the plugin loader applies it (`plugin::overrides`).
//!
//! ```toml
//! [plugins.geometry]                    # geometry.wasm
//! wit = "geometry/wit"                  # doc comments for a typed component's tools
//! rename = { shapes_area = "area" }
//! describe = { shapes_scale = "Scale a shape by a factor." }
//! hide = ["debug_dump"]
//! annotate = { shapes_area = { read_only = true, open_world = false } }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// One `[plugins.NAME]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(
    deny_unknown_fields,
    expecting = "a [plugins.NAME] table (wit, rename, describe, hide, annotate)"
)]
pub(crate) struct PluginTable {
    /// WIT source (a file, or a directory with `deps/`) whose doc comments describe a
    /// typed component's tools, relative to the config file once loaded.
    pub wit: Option<PathBuf>,
    /// New names for tools, by the name the plugin offers.
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    /// Descriptions replacing the plugin's (or the generated) ones.
    #[serde(default)]
    pub describe: BTreeMap<String, String>,
    /// Tools not offered at all.
    #[serde(default)]
    pub hide: Vec<String>,
    /// What each tool does, for MCP clients' tool annotations (warren cannot tell
    /// what a plugin's tool does); unset hints keep the defaults of
    /// [`ToolHints`].
    #[serde(default)]
    pub annotate: BTreeMap<String, ToolHints>,
}

/// What a tool does by its nature, as MCP's tool annotations say it: set for the
/// built-in tools, and per plugin tool in `[plugins.NAME] annotate`. A hint left out
/// takes MCP's default (may write, destructively, not idempotent, reaches the world);
/// under a profile that can neither write a granted directory nor reach the network,
/// every tool is read-only in effect (`plugin::hints`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(
    deny_unknown_fields,
    expecting = "tool hints (title, read_only, destructive, idempotent, open_world)"
)]
pub(crate) struct ToolHints {
    /// A human-readable title.
    pub title: Option<String>,
    /// It changes nothing outside itself.
    pub read_only: Option<bool>,
    /// A change it makes may destroy or overwrite what was there.
    pub destructive: Option<bool>,
    /// Calling it again with the same arguments changes nothing more.
    pub idempotent: Option<bool>,
    /// It reaches things outside the granted directories (the network).
    pub open_world: Option<bool>,
}

/// The keys of `[plugins]` that are not `[plugins.NAME]` tables, for messages (the
/// key table's, as its test checks).
pub(super) const PLUGINS_KEYS: &[&str] = &[
    "dir",
    "files",
    "cache_dir",
    "cache",
    "builtins",
    "max_tools",
    "max_description_kb",
    "max_schema_kb",
    "max_profile_tools_kb",
];

/// Every `[plugins.NAME]` table, by NAME: what is left of `[plugins]` after its own
/// keys. A key that is neither (a misspelt `max_tool`) is an error naming it.
#[derive(Debug, Default)]
pub(crate) struct PluginTables(pub(crate) BTreeMap<String, PluginTable>);

/// Any name, each a [`PluginTable`], for the key table's check (`config::keys`).
#[cfg(test)]
impl schemars::JsonSchema for PluginTables {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PluginTables".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let table = generator.subschema_for::<PluginTable>().to_value();
        schemars::json_schema!({ "type": "object", "additionalProperties": table })
    }
}

impl<'de> Deserialize<'de> for PluginTables {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Tables;
        impl<'de> Visitor<'de> for Tables {
            type Value = PluginTables;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("[plugins.NAME] tables")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PluginTables, A::Error> {
                let mut tables = BTreeMap::new();
                while let Some(name) = map.next_key::<String>()? {
                    let table = map.next_value::<PluginTable>().map_err(|e| {
                        let e = e.to_string();
                        A::Error::custom(if e.starts_with("invalid type") {
                            format!("[plugins] `{name}` is not a [plugins] key ({}), nor a [plugins.{name}] table", PLUGINS_KEYS.join(", "))
                        } else {
                            format!("[plugins.{name}]: {e}")
                        })
                    })?;
                    tables.insert(name, table);
                }
                Ok(PluginTables(tables))
            }
        }
        deserializer.deserialize_map(Tables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_that_is_neither_is_named() {
        #[derive(Deserialize)]
        struct Plugins {
            #[allow(dead_code)]
            dir: Option<String>,
            #[serde(flatten)]
            tables: PluginTables,
        }
        let parsed: Plugins = toml::from_str("dir = \"p\"\n[x]\nhide = [\"t\"]\n").unwrap();
        assert_eq!(parsed.tables.0["x"].hide, ["t"]);
        let error = toml::from_str::<Plugins>("[x]\nhidden = []\n")
            .err()
            .unwrap();
        assert!(
            error
                .to_string()
                .contains("[plugins.x]: unknown field `hidden`"),
            "{error}"
        );
        let error = toml::from_str::<Plugins>("max_tool = 3\n").err().unwrap();
        assert!(
            error
                .to_string()
                .contains("[plugins] `max_tool` is not a [plugins] key (dir, files,"),
            "{error}"
        );
    }
}
