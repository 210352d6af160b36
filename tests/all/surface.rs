//! The library's public surface, measured: what an embedder can name from `warren::`
//! stays small enough to learn in an afternoon (at most [`MAX_PUBLIC_ITEMS`]).
//!
//! A scanner over `host/src` (rustdoc's JSON needs a nightly compiler) starts at
//! `lib.rs` and follows every `pub mod` and `pub use` (through the `use`s of the
//! modules they name, to the item's definition). It counts, once per definition
//! however many paths reach it:
//! - each public type (`struct`, `enum`, `trait`, `type` alias), function, `const`,
//!   `static` and module;
//! - each `pub` field of a public struct (named or tuple);
//! - each variant of a public enum (a variant's fields are not counted apart: they
//!   are its constructor's arguments, as a function's parameters are);
//! - each `pub fn` and `pub const` of an inherent `impl` of a public type, in any file
//!   of the crate's top-level module that defines the type (`impl Trait for Type`
//!   blocks are not counted: their methods are the trait's);
//! - each `fn`, `const` and `type` a public trait declares;
//! - an item re-exported from outside `host/src` (another crate, code a macro
//!   generates) as one item.
//!
//! Left out: items under `#[cfg(test)]`, under `#[cfg(fuzzing)]` (the hidden
//! `warren::fuzzing` module, compiled only for the fuzz targets in `fuzz/`) and under
//! `#[cfg(feature = "internals")]` (what only the suite and the benches build: see
//! host/Cargo.toml), and anything `pub(crate)`, `pub(super)` or private.
//! `#[doc(hidden)]` items are counted.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::shape::{code_only, rust_files};

/// The most public items `warren::` may have, fields apart (see the module's doc for
/// what counts), as issue 47 asks: the API of docs/library.md, whose bulk is the typed
/// vocabularies an embedder matches on (the events and their states, the model
/// errors by kind, the provider's messages), and the binary's hidden entry point
/// (`cli_main`). What the suite and the benches reach beneath it (the sandbox called
/// without an agent, a profile as loaded, the pieces the benches time) is compiled
/// only with the `internals` feature and not counted. Lower it as the API narrows.
const MAX_PUBLIC_ITEMS: usize = 150;

/// The most `pub` fields of public structs (counted apart, as the issue counts them).
const MAX_PUBLIC_FIELDS: usize = 57;

/// What no `pub` field's type may name: a field holding one of them would hand an
/// embedder a run's internals (its channels, its cancellation, its locks).
const INTERNAL_TYPES: &[&str] = &[
    "Sender",
    "Receiver",
    "CancellationToken",
    "Mutex",
    "RwLock",
    "Notify",
    "JoinHandle",
    "Semaphore",
];

/// One top-level statement of a source file (an item, an `impl` or a `use`), read
/// from its code with comments and literals blanked.
#[derive(Debug)]
struct Statement {
    /// Where it starts in its file's code (its attributes included).
    start: usize,
    /// Its text, attributes and doc comments (blanked) included.
    text: String,
}

impl Statement {
    /// Whether it is compiled only for tests, for the fuzz targets, or for the suite
    /// and the benches (the `internals` feature).
    fn is_left_out(&self) -> bool {
        let compact: String = self.head_attributes().split_whitespace().collect();
        ["#[cfg(test)]", "#[cfg(fuzzing)]", "#[cfg(internals)]"]
            .iter()
            .any(|left_out| compact.contains(left_out))
    }

    /// The attributes before the item.
    fn head_attributes(&self) -> &str {
        &self.text[..self.text.len() - self.item().len()]
    }

    /// The text after its attributes.
    fn item(&self) -> &str {
        let mut rest = self.text.trim_start();
        while rest.starts_with('#') {
            let chars: Vec<char> = rest.chars().collect();
            let open = rest.find('[').unwrap_or(0);
            let close = bracket_end(&chars, open);
            rest = rest[close + 1..].trim_start();
        }
        rest
    }

    /// Whether it is `pub` (not `pub(crate)` or `pub(super)`).
    fn is_pub(&self) -> bool {
        let item = self.item();
        item.starts_with("pub ") || item.starts_with("pub\n")
    }

    /// Its kind (`struct`, `fn`, `use`, `impl`, …) and name (`""` for `use`, `impl`).
    fn kind_and_name(&self) -> (&str, &str) {
        let words: Vec<&str> = self
            .item()
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let mut words = words.into_iter().skip_while(|w| {
            [
                "pub", "crate", "super", "async", "unsafe", "extern", "default",
            ]
            .contains(w)
        });
        let mut kind = words.next().unwrap_or("");
        if kind == "const" && self.item().contains("const fn") {
            kind = words.next().unwrap_or("");
        }
        match kind {
            "use" | "impl" => (kind, ""),
            _ => (kind, words.next().unwrap_or("")),
        }
    }

    /// The text between its first `{` (or, for a tuple struct, `(`) and the matching
    /// close, when it has one before any `;`.
    fn body(&self, open: char) -> Option<&str> {
        let item = self.item();
        let at = item.find(open)?;
        if item[..at].contains(';') || (open == '(' && item[..at].contains('{')) {
            return None;
        }
        let chars: Vec<char> = item.chars().collect();
        let char_at = item[..at].chars().count();
        let close = bracket_end(&chars, char_at);
        let end: usize = chars[..close].iter().map(|c| c.len_utf8()).sum();
        Some(&item[at + 1..end])
    }
}

/// The index of the bracket that closes the one at `open` (any of `([{`).
fn bracket_end(chars: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    chars.len() - 1
}

/// The top-level statements of `code` (comments and literals already blanked): each
/// ends at a `;` outside brackets or at the `}` that closes its block.
fn statements(code: &str) -> Vec<Statement> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let (mut start, mut depth) = (0, 0i32);
    for (i, &c) in chars.iter().enumerate() {
        let end = match c {
            '(' | '[' | '{' => {
                depth += 1;
                false
            }
            ')' | ']' => {
                depth -= 1;
                false
            }
            '}' => {
                depth -= 1;
                depth == 0
            }
            ';' => depth == 0,
            _ => false,
        };
        if end {
            let text: String = chars[start..=i].iter().collect();
            if !text.trim().trim_end_matches(';').trim().is_empty() {
                found.push(Statement { start, text });
            }
            start = i + 1;
        }
    }
    found
}

/// The parts of `text` separated by `,` outside brackets, trimmed, empty ones left out.
fn split_commas(text: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut depth = 0i32;
    for c in text.chars() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '>' if !parts.last().unwrap().ends_with('-') => depth -= 1,
            ',' if depth == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        parts.last_mut().unwrap().push(c);
    }
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// What a `use` statement brings in: (path, name it is known by), `*` for a glob.
fn use_tree(statement: &Statement) -> Vec<(Vec<String>, String)> {
    let item = statement.item();
    let tree = item[item.find("use").unwrap() + 3..]
        .trim()
        .trim_end_matches(';');
    let mut found = Vec::new();
    expand_use(&[], tree.trim(), &mut found);
    found
}

/// Adds the names of use tree `tree` under `prefix` to `found`.
fn expand_use(prefix: &[String], tree: &str, found: &mut Vec<(Vec<String>, String)>) {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(open) = tree.find('{') {
        let mut path = prefix.to_vec();
        path.extend(segments(tree[..open].trim_end_matches("::")));
        let inner = &tree[open + 1..tree.rfind('}').unwrap()];
        for part in split_commas(inner) {
            if part == "self" {
                let name = path.last().cloned().unwrap_or_default();
                found.push((path.clone(), name));
            } else {
                expand_use(&path, &part, found);
            }
        }
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias.trim())),
        None => (tree.as_str(), None),
    };
    let mut full = prefix.to_vec();
    full.extend(segments(path));
    let name = alias.map_or_else(|| full.last().cloned().unwrap_or_default(), String::from);
    found.push((full, name));
}

/// The `::`-separated segments of a path, leading `::` ignored.
fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// A definition found: its statement and the module it is in.
struct Found<'a> {
    statement: &'a Statement,
    module: Vec<String>,
}

/// One source file, parsed.
struct File {
    path: PathBuf,
    module: Vec<String>,
    statements: Vec<Statement>,
}

/// The walk from `lib.rs`: every file of the crate, and what has been counted.
struct Surface {
    files: Vec<File>,
    /// Each public item, by the first public path that reached it, with its kind.
    items: Vec<String>,
    /// Each public field (as in `items`) with its type, as written.
    field_types: Vec<(String, String)>,
    /// Definitions counted: (file, start).
    seen: HashSet<(PathBuf, usize)>,
}

impl Surface {
    /// Reads every file under `src` (the crate's `host/src`).
    fn read(src: &Path) -> Surface {
        let files = rust_files(src)
            .into_iter()
            .filter(|path| path.file_name().is_some_and(|name| name != "main.rs"))
            .map(|path| {
                let source = std::fs::read_to_string(&path).unwrap();
                File {
                    module: module_of(src, &path),
                    // The feature's name is a literal, which `code_only` blanks.
                    statements: statements(&code_only(
                        &source.replace(r#"cfg(feature = "internals")"#, "cfg(internals)"),
                    )),
                    path,
                }
            })
            .collect();
        Surface {
            files,
            items: Vec::new(),
            field_types: Vec::new(),
            seen: HashSet::new(),
        }
    }

    /// The file of `module`.
    fn file(&self, module: &[String]) -> Option<&File> {
        self.files.iter().find(|f| f.module == module)
    }

    /// Counts every public item of `module`, named under `public`.
    fn walk_module(&mut self, module: &[String], public: &str) {
        let Some(file) = self.file(module) else {
            return;
        };
        let mut pending = Vec::new();
        for statement in &file.statements {
            if !statement.is_pub() || statement.is_left_out() {
                continue;
            }
            match statement.kind_and_name() {
                ("use", _) => {
                    for (path, name) in use_tree(statement) {
                        pending.push((Some(path), name));
                    }
                }
                ("impl", _) | ("macro_rules", _) => {}
                (_, name) => pending.push((None, name.to_string())),
            }
        }
        for (path, name) in pending {
            let path = path.unwrap_or_else(|| vec!["self".into(), name.clone()]);
            self.reach(module, &path, &name, public);
        }
    }

    /// Counts what `path` (as written in `module`) names, as `public::name`; a glob
    /// counts every public item of the module it names.
    fn reach(&mut self, module: &[String], path: &[String], name: &str, public: &str) {
        let target = self.absolute(module, path);
        if name == "*" {
            let glob = &target[..target.len() - 1];
            self.walk_module(glob, public);
            return;
        }
        let named = format!("{public}::{name}");
        match self.resolve(&target, 0) {
            Some((file, start)) => self.count(&file, start, &named),
            None => self
                .items
                .push(format!("{named} (defined outside host/src)")),
        }
    }

    /// `path` as written in `module`, made absolute from the crate's root (an
    /// external crate's path is returned as it is, under `::`).
    fn absolute(&self, module: &[String], path: &[String]) -> Vec<String> {
        let mut base = module.to_vec();
        let mut rest = path;
        match path.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &path[1..];
            }
            Some("self") => rest = &path[1..],
            Some(_) => {}
            None => return Vec::new(),
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        if path[0] != "crate" && path[0] != "self" && path[0] != "super" {
            let mut child = module.to_vec();
            child.push(path[0].clone());
            if self.file(&child).is_none() && !self.declares(module, &path[0]) {
                return [vec!["::".to_string()], path.to_vec()].concat();
            }
        }
        base.extend(rest.iter().cloned());
        base
    }

    /// Whether `module` defines or imports an item `name`.
    fn declares(&self, module: &[String], name: &str) -> bool {
        self.file(module).is_some_and(|file| {
            file.statements.iter().any(|s| {
                let (kind, own) = s.kind_and_name();
                own == name || (kind == "use" && use_tree(s).iter().any(|(_, n)| n == name))
            })
        })
    }

    /// The definition an absolute path names: (file, start of its statement).
    fn resolve(&self, path: &[String], hops: usize) -> Option<(PathBuf, usize)> {
        let (name, module) = path.split_last()?;
        if module.first().is_some_and(|s| s == "::") || hops > 20 {
            return None;
        }
        let file = self.file(module)?;
        // A module and a function or type may share a name (`mod from_json;` beside
        // `pub use self::from_json::from_json;`): the module is the last resort.
        let mut module_named = None;
        for statement in &file.statements {
            if statement.is_left_out() {
                continue;
            }
            match statement.kind_and_name() {
                ("use", _) => {
                    for (used, alias) in use_tree(statement) {
                        if alias == *name {
                            let target = self.absolute(module, &used);
                            if let Some(found) = self.resolve(&target, hops + 1) {
                                return Some(found);
                            }
                        }
                    }
                }
                ("mod", own) if own == name => module_named = Some(statement.start),
                (_, own) if own == name => return Some((file.path.clone(), statement.start)),
                _ => {}
            }
        }
        module_named.map(|start| (file.path.clone(), start))
    }

    /// Counts the definition at `start` of `file` as `public`, with its fields,
    /// variants, methods or contents, unless it was counted already.
    fn count(&mut self, file: &Path, start: usize, public: &str) {
        if !self.seen.insert((file.to_path_buf(), start)) {
            return;
        }
        let found = self.found(file, start);
        let (kind, name) = found.statement.kind_and_name();
        let (kind, name) = (kind.to_string(), name.to_string());
        let typed_fields = match kind.as_str() {
            "struct" => fields(found.statement),
            _ => Vec::new(),
        };
        let mut inner = match kind.as_str() {
            "struct" => typed_fields
                .iter()
                .map(|(field, _)| (field.clone(), "field"))
                .collect(),
            "enum" => variants(found.statement),
            "trait" => trait_items(found.statement),
            _ => Vec::new(),
        };
        if kind == "struct" || kind == "enum" || kind == "trait" {
            let top = found.module.first().cloned();
            inner.extend(self.methods(top.as_deref(), &name));
        }
        let mut module = found.module.clone();
        self.items.push(format!("{public} ({kind})"));
        if kind == "mod" {
            module.push(name);
            self.walk_module(&module, public);
            return;
        }
        for (inner, what) in inner {
            self.items.push(format!("{public}::{inner} ({what})"));
        }
        for (field, ty) in typed_fields {
            self.field_types
                .push((format!("{public}::{field} (field)"), ty));
        }
    }

    /// The statement at `start` of `file`.
    fn found(&self, file: &Path, start: usize) -> Found<'_> {
        let file = self.files.iter().find(|f| f.path == file).unwrap();
        Found {
            statement: file.statements.iter().find(|s| s.start == start).unwrap(),
            module: file.module.clone(),
        }
    }

    /// The `pub fn`s and `pub const`s of inherent `impl`s of `name` in the files of
    /// top-level module `top` (`None`: `lib.rs`).
    fn methods(&self, top: Option<&str>, name: &str) -> Vec<(String, &'static str)> {
        let mut found = Vec::new();
        let files = self
            .files
            .iter()
            .filter(|f| f.module.first().map(String::as_str) == top);
        for file in files {
            for statement in &file.statements {
                if statement.is_left_out() || impl_target(statement).as_deref() != Some(name) {
                    continue;
                }
                let body = statement.body('{').unwrap_or_default();
                for inner in statements(body) {
                    if !inner.is_pub() || inner.is_left_out() {
                        continue;
                    }
                    match inner.kind_and_name() {
                        ("fn", method) => found.push((method.to_string(), "method")),
                        ("const", constant) => found.push((constant.to_string(), "const")),
                        _ => {}
                    }
                }
            }
        }
        found
    }
}

/// The type an inherent `impl` statement is for (`None`: not an `impl`, or a trait's).
fn impl_target(statement: &Statement) -> Option<String> {
    if statement.kind_and_name().0 != "impl" {
        return None;
    }
    let item = statement.item();
    let head = &item[..item.find('{')?];
    let head = head.split(" where ").next()?;
    let mut rest = head.trim_start_matches("impl").trim_start();
    if rest.starts_with('<') {
        let mut depth = 0;
        let end = rest.char_indices().find(|&(_, c)| {
            depth += match c {
                '<' => 1,
                '>' => -1,
                _ => 0,
            };
            depth == 0
        })?;
        rest = &rest[end.0 + 1..];
    }
    if rest.split_whitespace().any(|w| w == "for") {
        return None;
    }
    let path = rest.split('<').next()?.trim();
    Some(path.rsplit("::").next()?.trim().to_string())
}

/// A struct's `pub` fields (a tuple struct's by position), with their types.
fn fields(statement: &Statement) -> Vec<(String, String)> {
    let (body, tuple) = match statement.body('{') {
        Some(body) => (body, false),
        None => match statement.body('(') {
            Some(body) => (body, true),
            None => return Vec::new(),
        },
    };
    split_commas(body)
        .into_iter()
        .enumerate()
        .filter_map(|(i, field)| {
            let field = Statement {
                start: 0,
                text: field,
            };
            let item = field.item();
            if !field.is_pub() {
                return None;
            }
            let declared = item["pub".len()..].trim();
            Some(match (tuple, declared.split_once(':')) {
                (false, Some((name, ty))) => (name.trim().to_string(), ty.trim().to_string()),
                _ => (i.to_string(), declared.to_string()),
            })
        })
        .collect()
}

/// An enum's variants.
fn variants(statement: &Statement) -> Vec<(String, &'static str)> {
    split_commas(statement.body('{').unwrap_or_default())
        .into_iter()
        .filter_map(|variant| {
            let variant = Statement {
                start: 0,
                text: variant,
            };
            let name: String = variant
                .item()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty() && !variant.is_left_out()).then_some((name, "variant"))
        })
        .collect()
}

/// The `fn`s, `const`s and `type`s a trait declares.
fn trait_items(statement: &Statement) -> Vec<(String, &'static str)> {
    statements(statement.body('{').unwrap_or_default())
        .into_iter()
        .filter_map(|inner| match inner.kind_and_name() {
            ("fn", name) => Some((name.to_string(), "trait method")),
            ("const", name) => Some((name.to_string(), "trait const")),
            ("type", name) => Some((name.to_string(), "trait type")),
            _ => None,
        })
        .collect()
}

/// The module path of the file at `path` under `src` (`lib.rs`: the root).
fn module_of(src: &Path, path: &Path) -> Vec<String> {
    let relative = path.strip_prefix(src).unwrap().with_extension("");
    let mut module: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if module
        .last()
        .is_some_and(|last| last == "mod" || last == "lib")
    {
        module.pop();
    }
    module
}

/// The surface of `warren::`, read from `host/src`.
fn public_surface() -> Surface {
    let mut surface = Surface::read(&crate::support::root().join("host/src"));
    surface.walk_module(&[], "warren");
    surface
}

#[test]
fn the_public_surface_is_small_enough_to_learn() {
    let surface = public_surface();
    let (fields, items): (Vec<&String>, Vec<&String>) = surface
        .items
        .iter()
        .partition(|item| item.ends_with(" (field)"));
    println!(
        "{} public items and {} public fields reachable from warren::",
        items.len(),
        fields.len()
    );
    let listed = |items: &[&String]| {
        items
            .iter()
            .map(|item| item.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        items.len() <= MAX_PUBLIC_ITEMS,
        "{} public items reachable from warren::, fields apart (at most {MAX_PUBLIC_ITEMS}; make the rest pub(crate)):\n{}",
        items.len(),
        listed(&items)
    );
    assert!(
        fields.len() <= MAX_PUBLIC_FIELDS,
        "{} public fields reachable from warren:: (at most {MAX_PUBLIC_FIELDS}):\n{}",
        fields.len(),
        listed(&fields)
    );
}

#[test]
fn no_public_field_hands_out_a_channel_a_cancellation_token_or_a_lock() {
    let surface = public_surface();
    assert!(surface.field_types.len() > 20, "{:?}", surface.field_types);
    let exposed: Vec<String> = surface
        .field_types
        .iter()
        .filter(|(_, ty)| {
            ty.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| INTERNAL_TYPES.contains(&word))
        })
        .map(|(field, ty)| format!("{field}: {ty}"))
        .collect();
    assert!(
        exposed.is_empty(),
        "public fields that expose a run's internals (make them pub(crate), offer a method):\n{}",
        exposed.join("\n")
    );
}

#[test]
fn the_scanner_follows_re_exports_to_definitions_and_counts_what_they_hold() {
    let src = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = src.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod inner;\npub mod open;\npub use inner::{Thing, Kind as Sort};\n\
         #[cfg(fuzzing)]\npub mod fuzzing;\npub(crate) fn hidden() {}\n\
         #[cfg(feature = \"internals\")]\npub fn for_the_suite() {}\n",
    );
    write(
        "inner/mod.rs",
        "mod parts;\npub use self::parts::Thing;\n/// {\npub enum Kind { A, B(u8), C { x: u8 } }\n",
    );
    write(
        "inner/parts.rs",
        "pub struct Thing { pub a: u8, pub(crate) b: u8, pub c: Vec<(u8, u8)> }\n\
         impl Thing {\n    pub fn new() -> Self { Thing }\n    pub(crate) fn own(&self) {}\n    \
         #[cfg(test)]\n    pub fn for_tests() {}\n    \
         #[cfg(feature = \"internals\")]\n    pub fn for_the_suite() {}\n}\nimpl Default for Thing { fn default() -> Self { Thing } }\n",
    );
    write(
        "open.rs",
        "pub trait Speak { fn say(&self); const N: u8; }\npub const LIMIT: u8 = 1;\nfn private() {}\n",
    );
    write("fuzzing.rs", "pub fn target() {}\n");
    let mut surface = Surface::read(src.path());
    surface.walk_module(&[], "warren");
    assert_eq!(
        surface.field_types,
        [
            ("warren::Thing::a (field)".to_string(), "u8".to_string()),
            (
                "warren::Thing::c (field)".to_string(),
                "Vec<(u8, u8)>".to_string()
            ),
        ]
    );
    let mut items = surface.items;
    items.sort();
    assert_eq!(
        items,
        [
            "warren::Sort (enum)",
            "warren::Sort::A (variant)",
            "warren::Sort::B (variant)",
            "warren::Sort::C (variant)",
            "warren::Thing (struct)",
            "warren::Thing::a (field)",
            "warren::Thing::c (field)",
            "warren::Thing::new (method)",
            "warren::open (mod)",
            "warren::open::LIMIT (const)",
            "warren::open::Speak (trait)",
            "warren::open::Speak::N (trait const)",
            "warren::open::Speak::say (trait method)",
        ]
    );
}
