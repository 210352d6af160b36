//! The configuration reference (docs/configuration.md, between its `keys:begin` and
//! `keys:end` markers), rendered from the key table: a markdown table per table of
//! the file, each key with its default, bounds and doc.

use super::keys::{separated, KeyDefault, Table, KEYS};
use super::values::Bounds;

/// The reference's tables of keys, as docs/configuration.md holds them between its
/// `keys:begin` and `keys:end` markers.
pub(super) fn reference() -> String {
    let mut out = String::new();
    let mut at: Option<*const Table> = None;
    for key in KEYS {
        if at != Some(key.table as *const Table) {
            at = Some(key.table as *const Table);
            let heading: Vec<String> = key.table.paths.iter().map(|p| header(p)).collect();
            out.push_str(&format!(
                "\n### {}\n\n{}\n\n| key | default | bounds | meaning |\n|---|---|---|---|\n",
                heading.join(" and "),
                key.table.doc
            ));
        }
        let default = match key.default {
            KeyDefault::Key(path) => {
                let (table, name) = path.rsplit_once('.').unwrap_or(("", path));
                format!("`[{table}] {name}`")
            }
            KeyDefault::Absent(meaning) => meaning.to_string(),
            KeyDefault::Fallback(meaning, value) => format!("{meaning} `{value}`"),
            KeyDefault::Required(example) => format!("required, e.g. `{example}`"),
            default => format!("`{}`", default.toml().unwrap_or_default()),
        };
        let bounds = match key.bounds {
            Bounds::None => String::new(),
            Bounds::Int { min, max } => {
                format!("{} to {}", separated(min, ','), separated(max, ','))
            }
            Bounds::NonNegative => "≥ 0".to_string(),
            Bounds::Positive => "> 0".to_string(),
            Bounds::Bytes(max) => format!("at most {max} bytes"),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            key.name,
            cell(&default),
            bounds,
            cell(key.doc)
        ));
    }
    out
}

/// How a table at `path` is written in the file: `[profiles.NAME]`, `[[….fs]]` for
/// an entry of a list of tables, the top level as such.
fn header(path: &str) -> String {
    let named = path.replace('*', "NAME");
    match named.strip_suffix("[]") {
        _ if named.is_empty() => "Top level".to_string(),
        Some(list) => format!("`[[{list}]]`"),
        None => format!("`[{named}]`"),
    }
}

/// `text` fit for a markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}
