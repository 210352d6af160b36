//! `[plugins.NAME]`: how one plugin's tools are offered, whatever its kind. Tools are
//! named by what the plugin offers (for a typed component, the generated
//! `<interface>_<function>`); a name the plugin does not offer is an error naming what
//! it does.
//!
//! ```toml
//! [plugins.geometry]                    # geometry.wasm
//! wit = "geometry/wit"                  # doc comments for a typed component's tools
//! rename = { shapes_area = "area" }
//! describe = { shapes_scale = "Scale a shape by a factor." }
//! hide = ["debug_dump"]
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::sandbox::ToolSpec;

/// One `[plugins.NAME]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [plugins.NAME] table (wit, rename, describe, hide)"
)]
pub struct PluginTable {
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
}

impl PluginTable {
    /// Applies the table to `specs` (as the plugin offers them); returns the offered
    /// specs, each with the index of the plugin's own spec it came from.
    /// `hidden_included` says whether hidden tools are still in `specs` (a typed
    /// component leaves them out before deriving them, and checks `hide` itself).
    pub fn apply(
        &self,
        specs: Vec<ToolSpec>,
        hidden_included: bool,
    ) -> anyhow::Result<Vec<(usize, ToolSpec)>> {
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        let unknown = self
            .rename
            .keys()
            .chain(self.describe.keys())
            .chain(self.hide.iter().filter(|_| hidden_included))
            .find(|n| !names.contains(&n.as_str()));
        if let Some(bad) = unknown {
            let hint = if self.hide.contains(bad) {
                " (it is hidden)"
            } else {
                ""
            };
            anyhow::bail!(
                "[plugins.NAME] names tool `{bad}`{hint}, which this plugin does not offer (it offers: {})",
                names.join(", ")
            );
        }
        Ok(specs
            .into_iter()
            .enumerate()
            .filter(|(_, spec)| !self.hide.contains(&spec.name))
            .map(|(index, mut spec)| {
                if let Some(description) = self.describe.get(&spec.name) {
                    spec.description = description.clone();
                }
                if let Some(name) = self.rename.get(&spec.name) {
                    spec.name = name.clone();
                }
                (index, spec)
            })
            .collect())
    }
}

/// The keys of `[plugins]` that are not `[plugins.NAME]` tables, for messages.
const PLUGINS_KEYS: &str = "dir, files, cache_dir, cache, builtins, max_tools, max_description_kb, max_schema_kb, max_profile_tools_kb";

/// Every `[plugins.NAME]` table, by NAME: what is left of `[plugins]` after its own
/// keys. A key that is neither (a misspelt `max_tool`) is an error naming it.
#[derive(Debug, Default)]
pub struct PluginTables(pub BTreeMap<String, PluginTable>);

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
                            format!("[plugins] `{name}` is not a [plugins] key ({PLUGINS_KEYS}), nor a [plugins.{name}] table")
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

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("{name} does things"),
            input_schema: "{}".into(),
        }
    }

    #[test]
    fn renames_describes_and_hides_by_the_offered_name() {
        let table: PluginTable = toml::from_str(
            "rename = { a = \"alpha\" }\ndescribe = { a = \"First.\" }\nhide = [\"b\"]\n",
        )
        .unwrap();
        let offered = table
            .apply(vec![spec("a"), spec("b"), spec("c")], true)
            .unwrap();
        let offered: Vec<(usize, &str, &str)> = offered
            .iter()
            .map(|(i, s)| (*i, s.name.as_str(), s.description.as_str()))
            .collect();
        assert_eq!(offered, [(0, "alpha", "First."), (2, "c", "c does things")]);
        let error = table.apply(vec![spec("c")], true).unwrap_err();
        assert_eq!(
            error.to_string(),
            "[plugins.NAME] names tool `a`, which this plugin does not offer (it offers: c)"
        );
    }

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
