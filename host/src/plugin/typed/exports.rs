//! What a typed component imports and exports: the check that warren provides every
//! import, the exported functions that become tools (and the exports that are not
//! tools), and the tool spec of each.

use anyhow::Context as _;
use tracing::warn;
use wasmtime::component::types::{ComponentFunc, ComponentItem, Type};
use wasmtime::component::{Component, ComponentExportIndex, ResourceType};
use wasmtime::Engine;

use super::docs::WitDocs;
use super::schema::{self, SchemaBuilder};
use crate::sandbox::ToolSpec;

/// One exported function offered as a tool.
pub(crate) struct TypedFunction {
    /// How WIT names it: `interface.function` or `function`.
    pub wit_name: String,
    /// Where it is in an instance, found once at load.
    pub(super) export: ComponentExportIndex,
    /// Parameter names and types, in order.
    pub(super) params: Vec<(String, Type)>,
    /// The result type, if it returns one.
    pub(super) result: Option<Type>,
}

/// Imports a typed component may have: WASI 0.2 and warren's `host-log`, the same
/// interfaces a `warren:plugin` component gets (the linker, not this list, decides in
/// the end; the list names what is missing when it would refuse).
const PROVIDED: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
    "wasi:http/types@",
    "wasi:http/outgoing-handler@",
    "warren:plugin/host-log@",
];

/// Exports a toolchain adds beside the component's own WIT, which are not tools:
/// componentize-py's pre-initialisation hook (instance `exports`, function `init`).
const TOOLCHAIN_EXPORTS: &[(&str, &str)] = &[("exports", "init")];

/// Exported interfaces in this namespace are entry points for other hosts
/// (`wasi:cli/run`, `wasi:http/incoming-handler`), not tools.
const ENTRY_POINTS: &str = "wasi:";

/// Refuses a component importing anything warren does not provide, naming every such
/// import; returns the imported resource types with their names, for messages.
pub(super) fn check_imports(
    component: &Component,
    engine: &Engine,
) -> anyhow::Result<Vec<(ResourceType, String)>> {
    let mut resources = Vec::new();
    let mut missing = Vec::new();
    for (name, item) in component.component_type().imports(engine) {
        if !provided(name) {
            missing.push(format!("`{name}`"));
        }
        if let ComponentItem::ComponentInstance(instance) = item.ty {
            for (export, item) in instance.exports(engine) {
                if let ComponentItem::Resource(resource) = item.ty {
                    if !resources.iter().any(|(r, _)| *r == resource) {
                        resources.push((resource, format!("{export}` (from `{name}")));
                    }
                }
            }
        }
    }
    anyhow::ensure!(
        missing.is_empty(),
        "imports {} that warren does not provide (a component may import WASI 0.2 — cli, clocks, filesystem, io, random, sockets, http — and warren:plugin/host-log)",
        missing.join(", ")
    );
    Ok(resources)
}

/// Whether warren's linker provides the import `name` (WASI 0.2.x, host-log).
fn provided(name: &str) -> bool {
    PROVIDED.iter().any(|p| name.starts_with(p))
        && (name.starts_with("warren:") || name.contains("@0.2."))
}

/// One exported function.
pub(super) struct Export {
    /// The exported interface's full name (`ns:pkg/iface@1.0.0`, or an inline
    /// interface's plain name); `None` at the world's top level.
    interface: Option<String>,
    /// The function's name in WIT.
    function: String,
    /// Its type.
    func: ComponentFunc,
}

/// The exported functions that are tools, in export order. A component exporting a
/// resource is refused: a handle lives in one instance, and every call gets a fresh
/// one.
pub(super) fn functions(component: &Component, engine: &Engine) -> anyhow::Result<Vec<Export>> {
    let mut found = Vec::new();
    for (name, item) in component.component_type().exports(engine) {
        match item.ty {
            ComponentItem::ComponentFunc(func) => found.push(Export {
                interface: None,
                function: name.to_string(),
                func,
            }),
            ComponentItem::ComponentInstance(_) if name.starts_with(ENTRY_POINTS) => {}
            ComponentItem::ComponentInstance(instance) => {
                for (function, item) in instance.exports(engine) {
                    match item.ty {
                        ComponentItem::ComponentFunc(_)
                            if TOOLCHAIN_EXPORTS.contains(&(name, function)) => {}
                        ComponentItem::ComponentFunc(func) => found.push(Export {
                            interface: Some(name.to_string()),
                            function: function.to_string(),
                            func,
                        }),
                        ComponentItem::Resource(_) => anyhow::bail!(
                            "exports resource `{function}` (in {name}): a typed component cannot use resources, since a handle lives in one instance and every tool call gets a fresh one; export functions that take and return plain values"
                        ),
                        _ => {}
                    }
                }
            }
            ComponentItem::Resource(_) => anyhow::bail!(
                "exports resource `{name}`: a typed component cannot use resources, since a handle lives in one instance and every tool call gets a fresh one"
            ),
            _ => {}
        }
    }
    Ok(found)
}

impl Export {
    /// The tool it becomes before `[plugins.NAME]`: `iface_function` or `function`.
    pub(super) fn tool_name(&self) -> String {
        tool_name(self.interface.as_deref(), &self.function)
    }

    /// How WIT names it: `iface.function` or `function`.
    fn wit_name(&self) -> String {
        match &self.interface {
            Some(i) => format!("{}.{}", short_name(i), self.function),
            None => self.function.clone(),
        }
    }

    /// Its tool spec (named `name`) and what a call needs: the schema from its
    /// parameter types, the description from its WIT docs or else its signature, and
    /// where it is in an instance. Fails naming the function and the type when a
    /// parameter or the result has no JSON form.
    pub(super) fn describe(
        self,
        component: &Component,
        name: String,
        docs: Option<&WitDocs>,
        builder: &mut SchemaBuilder<'_>,
    ) -> anyhow::Result<(TypedFunction, ToolSpec)> {
        let wit_name = self.wit_name();
        let context = || format!("function `{wit_name}`");
        anyhow::ensure!(
            !self.func.async_(),
            "{}: async functions cannot be tools yet",
            context()
        );
        let params: Vec<(String, Type)> = self
            .func
            .params()
            .map(|(n, t)| (n.to_string(), t))
            .collect();
        let result = self.func.results().next();
        let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        let docs = docs
            .and_then(|d| d.function(self.interface.as_deref(), &self.function))
            .filter(|d| {
                let matches = d.matches(&names);
                if !matches {
                    warn!(function = %wit_name, "the WIT's parameters differ from the component's; its docs are not used");
                }
                matches
            });
        let schema = builder
            .params(&params, docs.as_ref())
            .with_context(context)?;
        if let Some(result) = &result {
            builder.check_result(result).with_context(context)?;
        }
        let description = docs.as_ref().and_then(|d| d.text()).map_or_else(
            || schema::signature(&wit_name, &params, result.as_ref()),
            str::to_string,
        );
        let instance = match &self.interface {
            Some(i) => Some(
                component
                    .get_export_index(None, i)
                    .with_context(|| format!("no export `{i}`"))?,
            ),
            None => None,
        };
        let export = component
            .get_export_index(instance.as_ref(), &self.function)
            .with_context(|| format!("no export `{wit_name}`"))?;
        let spec = ToolSpec {
            name,
            description,
            input_schema: schema.to_string(),
        };
        let function = TypedFunction {
            wit_name,
            export,
            params,
            result,
        };
        Ok((function, spec))
    }
}

/// `ns:pkg/iface@1.0.0` → `iface`; a plain name stays as it is.
fn short_name(export: &str) -> &str {
    let unversioned = export.split('@').next().unwrap_or(export);
    unversioned.rsplit('/').next().unwrap_or(unversioned)
}

/// The tool name of `function` in the exported interface `interface` (its full export
/// name), or at the top level: `iface_function`, `-` written `_`.
pub(crate) fn tool_name(interface: Option<&str>, function: &str) -> String {
    match interface {
        Some(i) => format!("{}_{function}", short_name(i)),
        None => function.to_string(),
    }
    .replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_join_interface_and_function_in_snake_case() {
        assert_eq!(
            tool_name(Some("ns:pkg/shapes@1.0.0"), "total-weight"),
            "shapes_total_weight"
        );
        assert_eq!(tool_name(Some("inline-iface"), "f"), "inline_iface_f");
        assert_eq!(tool_name(None, "add-two"), "add_two");
    }

    #[test]
    fn provided_imports_are_wasi_0_2_and_host_log() {
        for name in [
            "wasi:io/streams@0.2.6",
            "wasi:http/outgoing-handler@0.2.12",
            "wasi:sockets/tcp@0.2.0",
            "warren:plugin/host-log@0.1.0",
        ] {
            assert!(provided(name), "{name}");
        }
        for name in [
            "wasi:io/streams@0.3.0",
            "wasi:keyvalue/store@0.2.0-draft",
            "wasi:http/incoming-handler@0.2.6",
            "fixture:typed-import/store@0.1.0",
            "host-thing",
        ] {
            assert!(!provided(name), "{name}");
        }
    }
}
