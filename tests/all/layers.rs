//! The crate's modules form layers and every `crate::` path points down: a module
//! never names one of its own layer or above, so there is no import cycle. Inside a
//! module the files do not form rings either: a file a parent `mod.rs` names never
//! names that `mod.rs` back (shared items live in a file both name). The layer
//! numbers are the ones the architecture documentation's table gives.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `host/src` and its layer (0 depends on nothing in the
/// crate). A module may name only modules of lower layers.
const LAYERS: &[(&str, u8)] = &[
    // L0: vocabularies that know nothing of the rest of the crate: capability
    // policy as plain data, model providers, embedded plugins, the terminal.
    ("builtin", 0),
    ("llm", 0),
    ("policy", 0),
    ("term", 0),
    // L1: the wasmtime engine; the bounded listener of the HTTP servers (which
    // words their refusals with the terminal's text rules).
    ("sandbox", 1),
    ("listener", 1),
    // L2: how an agent ended; logs and traces.
    ("outcome", 2),
    ("telemetry", 2),
    // L3: the configuration as plain validated data; the event bus.
    ("config", 3),
    ("events", 3),
    // L4: the run journal.
    ("journal", 4),
    // L5: loaded tools; the job tree, its owner, the narrowing rule, the Backend seam.
    ("plugin", 5),
    ("jobs", 5),
    // L6: the scheduler (the spawn protocol); where each agent stands.
    ("scheduler", 6),
    // L7: the agent loop and its spawn tools; the Redis backend.
    ("agent", 7),
    ("queue", 7),
    // L8: the composition root.
    ("host", 8),
    // L9: what drives a host as a server.
    ("a2a", 9),
    ("mcp", 9),
    ("web", 9),
    ("fuzzing", 9),
    // L10: the command line, each command's body beside it (`warren worker`'s too).
    ("cli", 10),
];

/// Where the architecture's layer table is documented.
const ARCHITECTURE_DOC: &str = "docs/architecture.md";

/// A `crate::`, `super::` or `self::` path named in a source file, as the segments
/// that follow the crate root once resolved, with the line it is on.
#[derive(Debug)]
struct Named {
    segments: Vec<String>,
    line: usize,
}

/// The part of `source` that is not a `#[cfg(test)] mod tests` block (by convention
/// the last thing in a file): a test module naming `super::*` names its own file.
fn without_tests(source: &str) -> &str {
    match source.find("#[cfg(test)]\nmod tests") {
        Some(at) => &source[..at],
        None => source,
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path `source` names, resolved against the module path `module` of its file
/// (`["jobs", "child"]` for `jobs/child.rs`): `crate::`, `super::` and `self::` paths,
/// and in a file with child modules `children`, paths that start with one of them.
fn named_paths(source: &str, module: &[String], children: &BTreeSet<String>) -> Vec<Named> {
    // Comments out, lines kept (so a byte offset still gives the line).
    let code: String = without_tests(source)
        .lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n");
    let mut named = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let preceded = code[..at]
            .chars()
            .last()
            .is_some_and(|c| is_ident_char(c) || c == ':');
        let start = leading_ident(rest);
        if start.is_empty() || preceded || !rest[start.len()..].starts_with("::") {
            at += rest
                .chars()
                .next()
                .map_or(1, char::len_utf8)
                .max(start.len());
            continue;
        }
        let base: Option<Vec<String>> = match start {
            "crate" => Some(Vec::new()),
            "self" => Some(module.to_vec()),
            "super" => Some(module[..module.len().saturating_sub(1)].to_vec()),
            child if children.contains(child) => {
                let mut base = module.to_vec();
                base.push(child.to_string());
                Some(base)
            }
            _ => None,
        };
        let mut after = &rest[start.len() + 2..];
        if let Some(mut base) = base {
            // `super::super::x`
            while let Some(more) = after.strip_prefix("super::") {
                base.pop();
                after = more;
            }
            let line = code[..at].matches('\n').count() + 1;
            for segments in use_tree(after, &base) {
                named.push(Named { segments, line });
            }
        }
        at = code.len() - after.len();
    }
    named
}

/// The paths of a use tree (`a::b`, `a::{b, c::d}`), each prefixed with `base`; only
/// the first two segments after `base` matter to the check.
fn use_tree(text: &str, base: &[String]) -> Vec<Vec<String>> {
    let mut path = base.to_vec();
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut items = Vec::new();
            let mut item_start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        items.push(&group[item_start..i]);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&group[item_start..i]);
                        item_start = i + 1;
                    }
                    _ => {}
                }
            }
            return items
                .into_iter()
                .map(str::trim)
                .filter(|item| !item.is_empty() && *item != "self")
                .flat_map(|item| use_tree(item, &path))
                .collect();
        }
        let ident = leading_ident(rest);
        if ident.is_empty() {
            return vec![path];
        }
        path.push(ident.to_string());
        match rest[ident.len()..].strip_prefix("::") {
            Some(more) => rest = more,
            None => return vec![path],
        }
    }
}

fn leading_ident(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident_char(c)).unwrap_or(s.len());
    &s[..end]
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file relative to `src` (`jobs/mod.rs` and `jobs.rs` are
/// `["jobs"]`, `jobs/child.rs` is `["jobs", "child"]`).
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// One source file: its path, module path and the paths it names.
struct Source {
    relative: PathBuf,
    module: Vec<String>,
    named: Vec<Named>,
}

/// Every source file of `host/src`, with the modules each file has as children.
fn sources() -> Vec<Source> {
    let src = crate::support::root().join("host/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: Vec<Vec<String>> = files
        .iter()
        .map(|f| module_path(f.strip_prefix(&src).unwrap()))
        .collect();
    files
        .iter()
        .zip(&modules)
        .map(|(file, module)| {
            let children: BTreeSet<String> = modules
                .iter()
                .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
                .map(|m| m.last().unwrap().clone())
                .collect();
            let source = std::fs::read_to_string(file).unwrap();
            Source {
                relative: file.strip_prefix(&src).unwrap().to_path_buf(),
                module: module.clone(),
                named: named_paths(&source, module, &children),
            }
        })
        .collect()
}

#[test]
fn every_import_points_down_the_layers() {
    let layers: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    let mut modules_seen = BTreeSet::new();
    for file in sources() {
        let Some(top) = file.module.first().cloned() else {
            continue; // lib.rs
        };
        if top == "main" {
            continue;
        }
        modules_seen.insert(top.clone());
        let Some(&from) = layers.get(top.as_str()) else {
            wrong.push(format!(
                "module `{top}` ({}) has no layer: add it to LAYERS in tests/all/layers.rs and to the architecture table in {ARCHITECTURE_DOC}",
                file.relative.display()
            ));
            continue;
        };
        for named in &file.named {
            let Some(name) = named.segments.first() else {
                continue;
            };
            if *name == top {
                continue;
            }
            match layers.get(name.as_str()) {
                Some(&to) if to < from => {}
                Some(&to) => wrong.push(format!(
                    "{}:{}: `{top}` (layer {from}) names `crate::{name}` (layer {to}): imports must point to lower layers",
                    file.relative.display(),
                    named.line
                )),
                None => wrong.push(format!(
                    "{}:{}: names `crate::{name}`, which has no layer",
                    file.relative.display(),
                    named.line
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

/// The node a module path stands for inside directory module `dir`: the directory's
/// own file (`None`) or one of its children, or not inside `dir` at all.
fn node_in(dir: &[String], path: &[String], children: &BTreeSet<String>) -> Option<Option<String>> {
    let rest = path.strip_prefix(dir)?;
    Some(match rest.first() {
        Some(child) if children.contains(child) => Some(child.clone()),
        _ => None,
    })
}

#[test]
fn no_module_has_a_ring_among_its_files() {
    let sources = sources();
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let mut rings = Vec::new();
    for dir in &modules {
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.len() == dir.len() + 1 && m.starts_with(dir))
            .map(|m| m.last().unwrap().clone())
            .collect();
        if children.is_empty() {
            continue;
        }
        let name = |node: &Option<String>| match node {
            Some(child) => format!(
                "`{}`",
                [dir.clone(), vec![child.clone()]].concat().join("::")
            ),
            None => format!("`{}`", dir.join("::")),
        };
        // Edges between this directory's nodes, each with one place that makes it.
        let mut edges: BTreeMap<(Option<String>, Option<String>), String> = BTreeMap::new();
        for file in &sources {
            let Some(from) = node_in(dir, &file.module, &children) else {
                continue;
            };
            for named in &file.named {
                let Some(to) = node_in(dir, &named.segments, &children) else {
                    continue;
                };
                if to != from {
                    edges
                        .entry((from.clone(), to))
                        .or_insert_with(|| format!("{}:{}", file.relative.display(), named.line));
                }
            }
        }
        // A ring is an edge whose target reaches back to its source.
        let reaches = |start: &Option<String>, goal: &Option<String>| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![start.clone()];
            while let Some(node) = stack.pop() {
                if &node == goal {
                    return true;
                }
                if seen.insert(node.clone()) {
                    stack.extend(
                        edges
                            .keys()
                            .filter(|(from, _)| *from == node)
                            .map(|(_, to)| to.clone()),
                    );
                }
            }
            false
        };
        for ((from, to), place) in &edges {
            if reaches(to, from) {
                rings.push(format!(
                    "{} names {} ({place}), which leads back to it",
                    name(from),
                    name(to)
                ));
            }
        }
    }
    assert!(
        rings.is_empty(),
        "rings among a module's files (move what both sides share into a file both name):\n{}",
        rings.join("\n")
    );
}

/// The architecture documentation's table, row `| L<n> | `a`, `b`; then `c` | … |`,
/// as module → layer.
fn documented_layers() -> BTreeMap<String, u8> {
    let doc = std::fs::read_to_string(crate::support::root().join(ARCHITECTURE_DOC)).unwrap();
    let mut layers = BTreeMap::new();
    for line in doc.lines() {
        let Some(row) = line.strip_prefix("| L") else {
            continue;
        };
        let mut cells = row.split('|');
        let (Some(number), Some(modules)) = (cells.next(), cells.next()) else {
            continue;
        };
        let Ok(number) = number.trim().parse::<u8>() else {
            continue;
        };
        for name in modules.split('`').skip(1).step_by(2) {
            layers.insert(name.to_string(), number);
        }
    }
    layers
}

/// Most entries `host/src` may list: the crate root keeps the shared vocabulary and
/// the servers; a command's body lives with its command under `cli/`.
const MAX_ROOT_ENTRIES: usize = 24;

#[test]
fn the_crate_root_stays_short_and_every_module_has_a_layer() {
    let src = crate::support::root().join("host/src");
    let entries: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        entries.len() <= MAX_ROOT_ENTRIES,
        "host/src lists {} entries (at most {MAX_ROOT_ENTRIES}; a subcommand's body goes under cli/): {entries:?}",
        entries.len()
    );
    let layered: BTreeSet<&str> = LAYERS.iter().map(|(name, _)| *name).collect();
    for entry in &entries {
        let module = entry.strip_suffix(".rs").unwrap_or(entry);
        if !["lib", "main"].contains(&module) {
            assert!(
                layered.contains(module),
                "host/src/{entry} has no layer in LAYERS"
            );
        }
    }
}

#[test]
fn the_documented_layers_are_the_checked_ones() {
    let checked: BTreeMap<String, u8> = LAYERS
        .iter()
        .map(|(name, layer)| (name.to_string(), *layer))
        .collect();
    assert_eq!(
        documented_layers(),
        checked,
        "the layer table in {ARCHITECTURE_DOC} and LAYERS in tests/all/layers.rs differ"
    );
}

#[test]
fn the_scanner_sees_grouped_relative_and_inline_paths() {
    let module = ["jobs".to_string(), "child".to_string()];
    let children = BTreeSet::new();
    let source = "use crate::{\n    agent::Agent,\n    config,\n};\nuse super::{tree::Tree, JobId};\nfn f() { crate::queue::x(); }\n// crate::host\nlet s = xcrate::b;\n#[cfg(test)]\nmod tests {\n    use crate::cli;\n}";
    let named: Vec<String> = named_paths(source, &module, &children)
        .into_iter()
        .map(|n| n.segments.join("::"))
        .collect();
    assert_eq!(
        named,
        [
            "agent::Agent",
            "config",
            "jobs::tree::Tree",
            "jobs::JobId",
            "queue::x"
        ]
    );
    let parent = ["jobs".to_string()];
    let children: BTreeSet<String> = ["child".to_string()].into();
    let named: Vec<String> = named_paths(
        "pub use child::narrow;\nuse self::child::X;",
        &parent,
        &children,
    )
    .into_iter()
    .map(|n| n.segments.join("::"))
    .collect();
    assert_eq!(named, ["jobs::child::narrow", "jobs::child::X"]);
}

/// A file compiled a second time through `#[path = "…"]` (the fuzz entry points do this
/// to reach a private parser) sits under a different parent there, so a `super::` or
/// `self::` path in it would resolve to something else or to nothing: only `crate::`
/// paths (and its own test module) are allowed in it. CI's fuzz build is where such a
/// slip would otherwise first show.
#[test]
fn files_compiled_twice_name_the_crate_only_by_crate_paths() {
    let src = crate::support::root().join("host/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    let mut included = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for line in text.lines() {
            let Some(rest) = line.trim().strip_prefix("#[path = \"") else {
                continue;
            };
            let target = rest.split('"').next().unwrap();
            let path = file.parent().unwrap().join(target);
            let body = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: #[path] {target}: {e}", file.display()));
            included += 1;
            for (n, code) in without_tests(&body).lines().enumerate() {
                let code = code.split("//").next().unwrap();
                if code.contains("super::") || code.contains("self::") {
                    wrong.push(format!("{target}:{}: {}", n + 1, code.trim()));
                }
            }
        }
    }
    assert!(included > 0, "no #[path] include found: the scan is broken");
    assert!(
        wrong.is_empty(),
        "files compiled twice through #[path] must use crate:: paths:\n{}",
        wrong.join("\n")
    );
}
