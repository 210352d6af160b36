//! The crate's modules form layers and every `crate::` path points down: a module
//! never names one of its own layer or above, so there is no import cycle. The
//! README's architecture section draws the same table.

use std::collections::BTreeMap;
use std::path::Path;

/// Each top-level module of `host/src` and its layer (0 depends on nothing in the
/// crate). A module may name only modules of lower layers.
const LAYERS: &[(&str, u8)] = &[
    // L0: vocabularies and engines that know nothing of agents.
    ("builtin", 0),
    ("events", 0),
    ("llm", 0),
    ("sandbox", 0),
    ("term", 0),
    ("outcome", 1),
    ("telemetry", 1),
    // L1: the configuration as plain validated data.
    ("config", 2),
    // L2: loaded tools; the job tree, the narrowing rule and the Backend seam.
    ("plugin", 3),
    ("jobs", 3),
    // L3: the agent loop and its spawn tools; the Redis backend.
    ("agent", 4),
    ("queue", 4),
    // L4: the composition root.
    ("host", 5),
    // L5: what drives a host.
    ("worker", 6),
    ("mcp", 6),
    ("ui", 6),
    ("init", 6),
    ("doctor", 6),
    ("agents_report", 6),
    ("scaffold", 6),
    ("fuzzing", 6),
    ("cli", 7),
];

/// The modules named by `crate::` paths in `source`, outside comments.
fn named_modules(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in source.lines() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let preceded_by_ident = rest[..at]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            rest = &rest[at + "crate::".len()..];
            if preceded_by_ident {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a::X, b}`: the first segment of each item.
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    names.push(leading_ident(item.trim()).to_string());
                }
            } else {
                names.push(leading_ident(rest).to_string());
            }
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

fn leading_ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_import_points_down_the_layers() {
    let src = crate::support::root().join("host/src");
    let layers: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    let mut modules_seen = std::collections::BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        modules_seen.insert(top.clone());
        let Some(&from) = layers.get(top.as_str()) else {
            wrong.push(format!(
                "module `{top}` ({}) has no layer: add it to LAYERS in tests/all/layers.rs and to the README's architecture table",
                relative.display()
            ));
            continue;
        };
        let source = std::fs::read_to_string(file).unwrap();
        for name in named_modules(&source) {
            if name == top {
                continue;
            }
            match layers.get(name.as_str()) {
                Some(&to) if to < from => {}
                Some(&to) => wrong.push(format!(
                    "{}: `{top}` (layer {from}) names `crate::{name}` (layer {to}): imports must point to lower layers",
                    relative.display()
                )),
                None => wrong.push(format!(
                    "{}: names `crate::{name}`, which has no layer",
                    relative.display()
                )),
            }
        }
    }
    for (name, _) in LAYERS {
        assert!(
            modules_seen.contains(*name),
            "LAYERS names `{name}`, which is not a module of host/src"
        );
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "layer violations:\n{}", wrong.join("\n"));
}

#[test]
fn the_scanner_sees_grouped_and_inline_paths() {
    let source = "use crate::{agent::Agent, config};\nfn f() { crate::queue::x(); }\n// crate::host\nlet s = xcrate::b;";
    assert_eq!(named_modules(source), ["agent", "config", "queue"]);
}
