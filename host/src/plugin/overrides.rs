//! `[plugins.NAME]` applied: a plugin's tools as its table offers them, whatever its
//! kind. Tools are named by what the plugin offers (for a typed component, the
//! generated `<interface>_<function>`); a name the plugin does not offer is an error
//! naming what it does.

use crate::config::PluginTable;
use crate::sandbox::ToolSpec;

/// Applies `table` to `specs` (as the plugin offers them); returns the offered
/// specs, each with the index of the plugin's own spec it came from.
/// `hidden_included` says whether hidden tools are still in `specs` (a typed
/// component leaves them out before deriving them, and checks `hide` itself).
pub(crate) fn offer(
    table: &PluginTable,
    specs: Vec<ToolSpec>,
    hidden_included: bool,
) -> anyhow::Result<Vec<(usize, ToolSpec)>> {
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let unknown = table
        .rename
        .keys()
        .chain(table.describe.keys())
        .chain(table.annotate.keys())
        .chain(table.hide.iter().filter(|_| hidden_included))
        .find(|n| !names.contains(&n.as_str()));
    if let Some(bad) = unknown {
        let hint = if table.hide.contains(bad) {
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
        .filter(|(_, spec)| !table.hide.contains(&spec.name))
        .map(|(index, mut spec)| {
            if let Some(description) = table.describe.get(&spec.name) {
                spec.description = description.clone();
            }
            if let Some(name) = table.rename.get(&spec.name) {
                spec.name = name.clone();
            }
            (index, spec)
        })
        .collect())
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
        let offered = offer(&table, vec![spec("a"), spec("b"), spec("c")], true).unwrap();
        let offered: Vec<(usize, &str, &str)> = offered
            .iter()
            .map(|(i, s)| (*i, s.name.as_str(), s.description.as_str()))
            .collect();
        assert_eq!(offered, [(0, "alpha", "First."), (2, "c", "c does things")]);
        let error = offer(&table, vec![spec("c")], true).unwrap_err();
        assert_eq!(
            error.to_string(),
            "[plugins.NAME] names tool `a`, which this plugin does not offer (it offers: c)"
        );
    }
}
