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

use serde::Deserialize;

use crate::sandbox::ToolSpec;

/// One `[plugins.NAME]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [plugins.NAME] table (wit, rename, describe, hide), or one of the [plugins] keys"
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
