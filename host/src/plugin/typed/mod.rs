//! Typed components: any WebAssembly component that does not implement
//! `warren:plugin/tool`, written against nothing but its own WIT. Each exported
//! function (in an exported interface, or at the world's top level) becomes a tool
//! named `<interface>_<function>` (or `<function>`), with `-` written `_`; its
//! arguments object's schema is derived from the WIT types ([`schema`]), and JSON is
//! converted to component values and back along them ([`convert`]).
//!
//! A call runs through [`Sandbox::run_call`] like any plugin tool: a fresh instance in
//! a fresh store under the caller's capabilities, fuel, deadline, memory cap and
//! output cap. What a typed component may cost the host is bounded before the work:
//! the number of functions (`[plugins] max_tools`) before any schema is built, each
//! schema by `max_schema_kb` while it is built, type nesting by
//! [`schema::MAX_TYPE_DEPTH`], and the values a result may make the host allocate by
//! the store's hostcall fuel, sized from `max_output_kb`.
//!
//! Layout: `exports` (what a component imports and exports, and the tool each
//! function becomes), [`schema`] (JSON Schema of the arguments, signatures),
//! [`convert`] (JSON ↔ values), `docs` (WIT doc comments for descriptions).

pub(crate) mod convert;
mod docs;
mod exports;
pub(crate) mod schema;

use std::path::Path;

use anyhow::Context as _;
use serde_json::{Map, Value};
use wasmtime::component::types::Type;
use wasmtime::component::{Component, Instance, Val};
use wasmtime::Store;

pub(crate) use self::convert::{args_from_json, to_json};
use self::docs::WitDocs;
use self::exports::Export;
pub(crate) use self::exports::TypedFunction;
use self::schema::SchemaBuilder;
use crate::config::PluginLimits;
use crate::sandbox::{
    CallState, GuestCall, GuestFuture, Linked, Measured, Sandbox, ToolCallError, ToolError,
    ToolRequest, ToolSpec,
};

/// The smallest hostcall fuel a typed call gets: what a guest may hand the host in one
/// call (a WASI write, a result), in bytes of host memory.
const MIN_HOSTCALL_FUEL: usize = 16 << 20;

/// Whether `component` implements `warren:plugin/tool`; every other component loads
/// as a typed component.
pub(crate) fn is_plugin(component: &Component, sandbox: &Sandbox) -> bool {
    component
        .component_type()
        .exports(sandbox.engine())
        .any(|(name, _)| name.starts_with("warren:plugin/tool@"))
}

/// A typed component: linked like any plugin, with the functions it offers.
pub(crate) struct TypedComponent {
    /// The component with its imports resolved.
    linked: Linked,
    /// The offered functions, in the order of the tool specs.
    functions: Vec<TypedFunction>,
}

/// How to load one typed component.
pub(crate) struct TypedOptions<'a> {
    /// WIT source whose doc comments describe the tools (`[plugins.NAME] wit`).
    pub wit: Option<&'a Path>,
    /// Tools not offered (`[plugins.NAME] hide`), by generated name: not checked.
    pub hidden: &'a [String],
    /// The `[plugins]` bounds.
    pub limits: &'a PluginLimits,
}

impl TypedComponent {
    /// Checks `component` (imports, resources, types), links it and derives a tool
    /// per exported function. `bytes` are its file, for embedded docs.
    pub(crate) fn load(
        sandbox: &Sandbox,
        component: &Component,
        bytes: &[u8],
        options: &TypedOptions<'_>,
    ) -> anyhow::Result<(Self, Vec<ToolSpec>)> {
        let resources = exports::check_imports(component, sandbox.engine())?;
        let found = exports::functions(component, sandbox.engine())?;
        let known: Vec<String> = found.iter().map(Export::tool_name).collect();
        if let Some(bad) = options.hidden.iter().find(|h| !known.contains(h)) {
            anyhow::bail!(
                "[plugins] hide names `{bad}`, which this component does not export (its tools: {})",
                known.join(", ")
            );
        }
        let offered: Vec<_> = found
            .into_iter()
            .zip(known)
            .filter(|(_, name)| !options.hidden.contains(name))
            .collect();
        anyhow::ensure!(
            offered.len() <= options.limits.max_tools,
            "exports {} functions; a plugin may offer at most {} ([plugins] max_tools; hide some with [plugins.NAME] hide)",
            offered.len(),
            options.limits.max_tools
        );
        anyhow::ensure!(
            !offered.is_empty(),
            "exports no functions and does not implement the warren:plugin/plugin world (see wit/plugin.wit), so it offers no tools"
        );

        let docs = match options.wit {
            Some(path) => Some(WitDocs::from_source(path)?),
            None => WitDocs::from_component(bytes),
        };
        let mut builder = SchemaBuilder::new(options.limits.max_schema_bytes, &resources);
        let mut functions = Vec::new();
        let mut specs = Vec::new();
        for (export, name) in offered {
            let (typed, spec) = export.describe(component, name, docs.as_ref(), &mut builder)?;
            functions.push(typed);
            specs.push(spec);
        }
        let linked = sandbox
            .link(component)
            .context("linking it with warren's WASI")?;
        Ok((TypedComponent { linked, functions }, specs))
    }

    /// The offered functions, in the order of the tool specs.
    pub(crate) fn functions(&self) -> &[TypedFunction] {
        &self.functions
    }

    /// Calls function `index` with `arguments` in a fresh sandbox under
    /// `request.capabilities`; its result comes with what it used.
    pub(crate) async fn call(
        &self,
        sandbox: &Sandbox,
        index: usize,
        arguments: &Map<String, Value>,
        request: ToolRequest<'_>,
    ) -> Measured {
        let function = &self.functions[index];
        let params = match args_from_json(&function.params, arguments) {
            Ok(params) => params,
            Err(error) => {
                return Measured::refused(ToolCallError::InvalidInput {
                    tool: request.tool.to_string(),
                    message: error.to_string(),
                })
            }
        };
        let hostcall_fuel = (std::mem::size_of::<Val>() + 1)
            .saturating_mul(request.capabilities.limits.max_output_bytes())
            .max(MIN_HOSTCALL_FUEL);
        let call = TypedCall {
            function,
            params,
            hostcall_fuel,
        };
        sandbox.run_call(&self.linked, request, call).await
    }
}

/// A typed function's call: its arguments already converted.
struct TypedCall<'a> {
    /// What to call and how to read its result.
    function: &'a TypedFunction,
    /// The converted arguments.
    params: Vec<Val>,
    /// Bytes of host memory the result (and each guest-to-host call) may take while
    /// it is lifted: past it the call fails as an oversized result.
    hostcall_fuel: usize,
}

impl GuestCall for TypedCall<'_> {
    fn run<'s>(self, store: &'s mut Store<CallState>, instance: Instance) -> GuestFuture<'s>
    where
        Self: 's,
    {
        Box::pin(async move {
            let function = self.function;
            let func = instance
                .get_func(&mut *store, function.export)
                .ok_or_else(|| {
                    wasmtime::Error::msg(format!(
                        "the instance has no export `{}`",
                        function.wit_name
                    ))
                })?;
            store.set_hostcall_fuel(self.hostcall_fuel);
            let mut results = vec![Val::Bool(false); usize::from(function.result.is_some())];
            func.call_async(&mut *store, &self.params, &mut results)
                .await?;
            output(function.result.as_ref(), results.first()).map_err(wasmtime::Error::msg)
        })
    }
}

/// The tool's output: a top-level `result` is the tool's success or error; a string
/// is its text, anything else its JSON (`null` for no result).
fn output(ty: Option<&Type>, value: Option<&Val>) -> Result<Result<String, ToolError>, String> {
    let text = |ty: &Type, value: &Val| -> Result<String, String> {
        match (ty, value) {
            (Type::String, Val::String(s)) => Ok(s.clone()),
            _ => Ok(to_json(ty, value)?.to_string()),
        }
    };
    Ok(match (ty, value) {
        (None, _) => Ok("null".into()),
        (Some(Type::Result(result)), Some(Val::Result(outcome))) => match outcome {
            Ok(payload) => Ok(match (result.ok(), payload) {
                (Some(ty), Some(value)) => text(&ty, value)?,
                _ => "null".into(),
            }),
            Err(payload) => Err(ToolError::Failed(match (result.err(), payload) {
                (Some(ty), Some(value)) => text(&ty, value)?,
                _ => "the function returned an error (its WIT error type carries no detail)".into(),
            })),
        },
        (Some(ty), Some(value)) => Ok(text(ty, value)?),
        (Some(_), None) => return Err("the call returned no result".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_result_is_its_text_and_others_are_json() {
        let text = |ty: Option<&Type>, value: Option<&Val>| match output(ty, value) {
            Ok(Ok(text)) => text,
            _ => panic!("not a success"),
        };
        assert_eq!(
            text(Some(&Type::String), Some(&Val::String("a\nb".into()))),
            "a\nb"
        );
        assert_eq!(
            text(Some(&Type::U64), Some(&Val::U64(u64::MAX))),
            "18446744073709551615"
        );
        assert_eq!(text(None, None), "null");
    }
}
