//! Doc comments for a typed component's tools. wasmtime's types carry no docs, and the
//! usual toolchains (wit-bindgen, componentize-py, componentize-js) drop them from the
//! component, so they come from WIT: the source named by `[plugins.NAME] wit`, or the
//! component itself when it kept a `package-docs` section. The WIT is walked beside
//! the component's types ([`Shadow`]), so record fields, variant cases, enum cases and
//! flags get their own descriptions in the schema.

use std::path::Path;

use anyhow::Context as _;
use wit_parser::{Function, Resolve, TypeDefKind, WorldItem, WorldKey};

/// WIT packages to read doc comments from.
pub(crate) struct WitDocs {
    /// The parsed packages.
    resolve: Resolve,
}

impl WitDocs {
    /// Parses the WIT file or directory at `path` (with its `deps/`).
    pub(crate) fn from_source(path: &Path) -> anyhow::Result<Self> {
        let mut resolve = Resolve::default();
        resolve
            .push_path(path)
            .with_context(|| format!("reading WIT from {}", path.display()))?;
        Ok(WitDocs { resolve })
    }

    /// The WIT a component carries, when it kept any doc comments.
    pub(crate) fn from_component(bytes: &[u8]) -> Option<Self> {
        let decoded = wit_component::decode(bytes).ok()?;
        let resolve = decoded.resolve();
        let documented = resolve
            .interfaces
            .iter()
            .any(|(_, i)| i.functions.values().any(|f| f.docs.contents.is_some()))
            || resolve.worlds.iter().any(|(_, w)| {
                w.exports
                    .values()
                    .any(|item| matches!(item, WorldItem::Function(f) if f.docs.contents.is_some()))
            });
        documented.then(|| WitDocs {
            resolve: resolve.clone(),
        })
    }

    /// The function `name` of the exported interface `interface` (its full export
    /// name, e.g. `ns:pkg/iface@1.0.0`, or the plain name of an inline interface), or
    /// of a world's top level when `interface` is `None`.
    pub(crate) fn function(&self, interface: Option<&str>, name: &str) -> Option<FuncDocs<'_>> {
        let resolve = &self.resolve;
        let func = match interface {
            Some(export) => {
                let unversioned = export.split('@').next().unwrap_or(export);
                let named = resolve.interfaces.iter().find_map(|(id, i)| {
                    let full = resolve.id_of(id)?;
                    (full == export || full.split('@').next() == Some(unversioned)).then_some(i)
                });
                let inline = || {
                    resolve.worlds.iter().find_map(|(_, w)| {
                        w.exports.iter().find_map(|(key, item)| match (key, item) {
                            (WorldKey::Name(n), WorldItem::Interface { id, .. }) if n == export => {
                                Some(&resolve.interfaces[*id])
                            }
                            _ => None,
                        })
                    })
                };
                named.or_else(inline)?.functions.get(name)?
            }
            None => resolve.worlds.iter().find_map(|(_, w)| {
                w.exports.iter().find_map(|(key, item)| match (key, item) {
                    (WorldKey::Name(n), WorldItem::Function(f)) if n == name => Some(f),
                    _ => None,
                })
            })?,
        };
        Some(FuncDocs { resolve, func })
    }
}

/// One function's WIT, for its docs and its parameter and result types.
pub(crate) struct FuncDocs<'a> {
    /// Where its types live.
    resolve: &'a Resolve,
    /// The function.
    func: &'a Function,
}

impl<'a> FuncDocs<'a> {
    /// The function's doc comment.
    pub(crate) fn text(&self) -> Option<&'a str> {
        docs(&self.func.docs)
    }

    /// Whether the WIT function has these parameter names, in this order: docs from
    /// WIT that does not match the component are not used.
    pub(crate) fn matches(&self, params: &[&str]) -> bool {
        self.func.params.len() == params.len()
            && self
                .func
                .params
                .iter()
                .zip(params)
                .all(|(p, n)| p.name == *n)
    }

    /// The `index`th parameter's type.
    pub(crate) fn param(&self, index: usize) -> Option<Shadow<'a>> {
        let param = self.func.params.get(index)?;
        Some(Shadow::new(self.resolve, param.ty))
    }
}

/// A WIT type walked beside a wasmtime type, for the docs of what it contains.
#[derive(Clone, Copy)]
pub(crate) struct Shadow<'a> {
    /// Where its definition lives.
    resolve: &'a Resolve,
    /// The type.
    ty: wit_parser::Type,
}

impl<'a> Shadow<'a> {
    fn new(resolve: &'a Resolve, ty: wit_parser::Type) -> Self {
        Shadow { resolve, ty }
    }

    fn child(&self, ty: wit_parser::Type) -> Shadow<'a> {
        Shadow::new(self.resolve, ty)
    }

    /// The definition behind any aliases, and the docs of the nearest documented one.
    fn resolved(&self) -> Option<(&'a TypeDefKind, Option<&'a str>)> {
        let mut ty = self.ty;
        let mut found_docs = None;
        // Aliases cannot form a cycle in a valid Resolve; the bound is only a guard.
        for _ in 0..64 {
            let wit_parser::Type::Id(id) = ty else {
                return None;
            };
            let def = &self.resolve.types[id];
            found_docs = found_docs.or_else(|| docs(&def.docs));
            match &def.kind {
                TypeDefKind::Type(next) => ty = *next,
                kind => return Some((kind, found_docs)),
            }
        }
        None
    }

    /// The doc comment of the named type, if any.
    pub(crate) fn docs(&self) -> Option<&'a str> {
        self.resolved().and_then(|(_, docs)| docs)
    }

    /// A record field's docs and type, when this is a record.
    pub(crate) fn field(&self, index: usize) -> (Option<&'a str>, Option<Shadow<'a>>) {
        match self.resolved() {
            Some((TypeDefKind::Record(r), _)) => r
                .fields
                .get(index)
                .map_or((None, None), |f| (docs(&f.docs), Some(self.child(f.ty)))),
            _ => (None, None),
        }
    }

    /// A variant case's docs and payload type, when this is a variant.
    pub(crate) fn case(&self, index: usize) -> (Option<&'a str>, Option<Shadow<'a>>) {
        match self.resolved() {
            Some((TypeDefKind::Variant(v), _)) => v.cases.get(index).map_or((None, None), |c| {
                (docs(&c.docs), c.ty.map(|t| self.child(t)))
            }),
            _ => (None, None),
        }
    }

    /// The docs of an enum case or a flag, by position.
    pub(crate) fn name_docs(&self, index: usize) -> Option<&'a str> {
        match self.resolved()? {
            (TypeDefKind::Enum(e), _) => docs(&e.cases.get(index)?.docs),
            (TypeDefKind::Flags(f), _) => docs(&f.flags.get(index)?.docs),
            _ => None,
        }
    }

    /// The `index`th type inside this one: a list's, option's or fixed-length
    /// list's element (0), a tuple's member, a result's ok (0) or err (1).
    pub(crate) fn inner(&self, index: usize) -> Option<Shadow<'a>> {
        let ty = match self.resolved()?.0 {
            TypeDefKind::List(t) | TypeDefKind::Option(t) | TypeDefKind::FixedLengthList(t, _)
                if index == 0 =>
            {
                *t
            }
            TypeDefKind::Tuple(t) => *t.types.get(index)?,
            TypeDefKind::Result(r) if index == 0 => r.ok?,
            TypeDefKind::Result(r) if index == 1 => r.err?,
            _ => return None,
        };
        Some(self.child(ty))
    }
}

fn docs(docs: &wit_parser::Docs) -> Option<&str> {
    docs.contents
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
}
