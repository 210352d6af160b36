//! JSON Schemas from WIT types: the arguments object of a typed component's function,
//! and the check that a result type has a JSON form. The mapping (what each WIT type
//! looks like in JSON) is [`super::convert`]'s; this module describes it.
//!
//! Component types cannot be recursive, but they can share: a record whose two fields
//! are the same record, nested 30 times, is tiny in the binary and 2³⁰ nodes once
//! written out. So every walk carries a byte budget (`[plugins] max_schema_kb`) and a
//! depth limit ([`MAX_TYPE_DEPTH`]), checked before each node is built.

use serde_json::{json, Map, Value};
use wasmtime::component::types::Type;
use wasmtime::component::ResourceType;

use super::docs::{FuncDocs, Shadow};

/// How deeply types may nest (a list in a record in an option … counts each level).
/// JSON arguments are converted along the type, so this also bounds that recursion.
pub(crate) const MAX_TYPE_DEPTH: usize = 32;

/// Bytes charged per schema node on top of its names and docs: roughly what the
/// smallest node (`{"type":"boolean"}`) takes.
const NODE_COST: usize = 20;

/// Why a function cannot be offered as a tool.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SchemaError {
    /// A type with no JSON form.
    #[error("{path} is {what}, which has no JSON form; {hint}")]
    Unsupported {
        /// Where in the arguments or result, e.g. `$.items[*].owner`.
        path: String,
        /// The type, e.g. "a handle to resource `counter`".
        what: String,
        /// What to do instead.
        hint: &'static str,
    },
    /// Types nested past [`MAX_TYPE_DEPTH`].
    #[error("{path}: types nest more than {MAX_TYPE_DEPTH} levels deep")]
    TooDeep {
        /// Where the limit was passed.
        path: String,
    },
    /// The schema (or, for a result, the type written out) passed the byte budget.
    #[error(
        "its {what} would take more than {limit_kb} KiB written out ([plugins] max_schema_kb)"
    )]
    TooLarge {
        /// "input schema" or "result type".
        what: &'static str,
        /// The budget.
        limit_kb: usize,
    },
}

/// Builds schemas within a byte budget, naming resources by their export names.
pub(crate) struct SchemaBuilder<'a> {
    /// Bytes left of `[plugins] max_schema_kb` for the walk under way.
    budget: usize,
    /// The budget each walk starts with.
    limit: usize,
    /// What the walk under way produces, for [`SchemaError::TooLarge`].
    what: &'static str,
    /// Resource types the component imports or exports, with their names.
    resources: &'a [(ResourceType, String)],
}

impl<'a> SchemaBuilder<'a> {
    /// A builder whose walks may each take `limit` bytes.
    pub(crate) fn new(limit: usize, resources: &'a [(ResourceType, String)]) -> Self {
        SchemaBuilder {
            budget: limit,
            limit,
            what: "input schema",
            resources,
        }
    }

    /// The object schema of a function's parameters: every parameter by its WIT
    /// name, all required (an `option` parameter is nullable, and absent is taken as
    /// `null`).
    pub(crate) fn params(
        &mut self,
        params: &[(String, Type)],
        docs: Option<&FuncDocs<'_>>,
    ) -> Result<Value, SchemaError> {
        self.budget = self.limit;
        self.what = "input schema";
        let mut properties = Map::new();
        for (index, (name, ty)) in params.iter().enumerate() {
            self.charge(name.len())?;
            let mut path = format!("$.{name}");
            let shadow = docs.and_then(|d| d.param(index));
            let schema = self.of(ty, shadow, &mut path, 1)?;
            properties.insert(name.clone(), schema);
        }
        let required: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        Ok(json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }))
    }

    /// Checks that a result type has a JSON form, within the same budget and depth.
    pub(crate) fn check_result(&mut self, ty: &Type) -> Result<(), SchemaError> {
        self.budget = self.limit;
        self.what = "result type";
        self.of(ty, None, &mut "result".to_string(), 1).map(drop)
    }

    fn charge(&mut self, bytes: usize) -> Result<(), SchemaError> {
        self.budget = self
            .budget
            .checked_sub(NODE_COST + bytes)
            .ok_or(SchemaError::TooLarge {
                what: self.what,
                limit_kb: self.limit / 1024,
            })?;
        Ok(())
    }

    fn of(
        &mut self,
        ty: &Type,
        shadow: Option<Shadow<'_>>,
        path: &mut String,
        depth: usize,
    ) -> Result<Value, SchemaError> {
        if depth > MAX_TYPE_DEPTH {
            return Err(SchemaError::TooDeep { path: path.clone() });
        }
        let docs = shadow.and_then(|s| s.docs());
        self.charge(docs.map_or(0, str::len))?;
        let mut schema = match ty {
            Type::Bool => json!({"type": "boolean"}),
            Type::U8 => integer(0, u8::MAX),
            Type::U16 => integer(0, u16::MAX),
            Type::U32 => integer(0, u32::MAX),
            Type::U64 => integer(0, u64::MAX),
            Type::S8 => integer(i8::MIN, i8::MAX),
            Type::S16 => integer(i16::MIN, i16::MAX),
            Type::S32 => integer(i32::MIN, i32::MAX),
            Type::S64 => integer(i64::MIN, i64::MAX),
            Type::Float32 | Type::Float64 => json!({"type": "number"}),
            Type::Char => json!({"type": "string", "minLength": 1, "maxLength": 1}),
            Type::String => json!({"type": "string"}),
            Type::List(list) if list.ty() == Type::U8 => json!({
                "type": "string",
                "contentEncoding": "base64",
                "description": "bytes, base64-encoded (standard alphabet, padded)",
            }),
            Type::List(list) => {
                let inner = shadow.and_then(|s| s.inner(0));
                let items = self.child(&list.ty(), inner, path, depth, "[*]")?;
                json!({"type": "array", "items": items})
            }
            Type::FixedLengthList(list) => {
                let inner = shadow.and_then(|s| s.inner(0));
                let items = self.child(&list.ty(), inner, path, depth, "[*]")?;
                json!({"type": "array", "items": items, "minItems": list.len(), "maxItems": list.len()})
            }
            Type::Record(record) => self.record(record, shadow, path, depth)?,
            Type::Tuple(tuple) => self.tuple(tuple, shadow, path, depth)?,
            Type::Variant(variant) => self.variant(variant, shadow, path, depth)?,
            Type::Enum(names) => {
                let names: Vec<&str> = names.names().collect();
                self.named(
                    &names,
                    shadow,
                    |names| json!({"type": "string", "enum": names}),
                )?
            }
            Type::Flags(flags) => {
                let names: Vec<&str> = flags.names().collect();
                self.named(&names, shadow, |names| {
                    json!({
                        "type": "array",
                        "items": {"type": "string", "enum": names},
                        "uniqueItems": true,
                    })
                })?
            }
            Type::Option(option) => self.option(option, shadow, path, depth)?,
            Type::Result(result) => {
                let ok = self.result_arm(result.ok(), shadow, path, depth, (0, "ok"))?;
                let err = self.result_arm(result.err(), shadow, path, depth, (1, "err"))?;
                json!({"anyOf": [ok, err]})
            }
            Type::Own(_)
            | Type::Borrow(_)
            | Type::Map(_)
            | Type::Future(_)
            | Type::Stream(_)
            | Type::ErrorContext => return Err(self.unsupported(ty, path)),
        };
        describe(&mut schema, docs, self)?;
        Ok(schema)
    }

    /// The schema of a part of the type at `path` + `suffix`, one level deeper.
    fn child(
        &mut self,
        ty: &Type,
        shadow: Option<Shadow<'_>>,
        path: &mut String,
        depth: usize,
        suffix: &str,
    ) -> Result<Value, SchemaError> {
        let len = path.len();
        path.push_str(suffix);
        let schema = self.of(ty, shadow, path, depth + 1);
        path.truncate(len);
        schema
    }

    /// A record: an object with every field required and no others.
    fn record(
        &mut self,
        record: &wasmtime::component::types::Record,
        shadow: Option<Shadow<'_>>,
        path: &mut String,
        depth: usize,
    ) -> Result<Value, SchemaError> {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for (index, field) in record.fields().enumerate() {
            self.charge(field.name.len())?;
            let (field_docs, field_shadow) = shadow.map_or((None, None), |s| s.field(index));
            let suffix = format!(".{}", field.name);
            let mut schema = self.child(&field.ty, field_shadow, path, depth, &suffix)?;
            describe(&mut schema, field_docs, self)?;
            properties.insert(field.name.to_string(), schema);
            required.push(field.name.to_string());
        }
        Ok(json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }))
    }

    /// A tuple: an array of exactly its items, each of its own type.
    fn tuple(
        &mut self,
        tuple: &wasmtime::component::types::Tuple,
        shadow: Option<Shadow<'_>>,
        path: &mut String,
        depth: usize,
    ) -> Result<Value, SchemaError> {
        let mut items = Vec::new();
        for (index, ty) in tuple.types().enumerate() {
            let inner = shadow.and_then(|s| s.inner(index));
            items.push(self.child(&ty, inner, path, depth, &format!("[{index}]"))?);
        }
        let n = items.len();
        Ok(
            json!({"type": "array", "prefixItems": items, "items": false, "minItems": n, "maxItems": n}),
        )
    }

    /// An enum or flags: the schema `schema_of` makes of its case names, charged for
    /// them and described with each case's docs.
    fn named(
        &mut self,
        names: &[&str],
        shadow: Option<Shadow<'_>>,
        schema_of: impl FnOnce(&[&str]) -> Value,
    ) -> Result<Value, SchemaError> {
        self.charge(names.iter().map(|n| n.len() + 3).sum())?;
        let mut schema = schema_of(names);
        let docs = case_docs(names, shadow);
        describe(&mut schema, docs.as_deref(), self)?;
        Ok(schema)
    }

    /// An option: its value or `null`.
    fn option(
        &mut self,
        option: &wasmtime::component::types::OptionType,
        shadow: Option<Shadow<'_>>,
        path: &mut String,
        depth: usize,
    ) -> Result<Value, SchemaError> {
        let inner_ty = option.ty();
        let nested = matches!(inner_ty, Type::Option(_));
        let suffix = if nested { ".some" } else { "" };
        let inner = shadow.and_then(|s| s.inner(0));
        let inner = self.child(&inner_ty, inner, path, depth, suffix)?;
        // `option<option<T>>`: `null` is the outer none, so the inner value
        // (which may itself be `null`) is wrapped as {"some": …}.
        let present = if nested { tagged("some", inner) } else { inner };
        Ok(json!({"anyOf": [present, {"type": "null"}]}))
    }

    /// A variant: any of its cases, each `{"case": payload}`.
    fn variant(
        &mut self,
        variant: &wasmtime::component::types::Variant,
        shadow: Option<Shadow<'_>>,
        path: &mut String,
        depth: usize,
    ) -> Result<Value, SchemaError> {
        let mut cases = Vec::new();
        for (index, case) in variant.cases().enumerate() {
            self.charge(case.name.len())?;
            let (case_docs, case_shadow) = shadow.map_or((None, None), |s| s.case(index));
            let payload = match &case.ty {
                Some(ty) => self.child(ty, case_shadow, path, depth, &format!(".{}", case.name))?,
                None => json!({"type": "null"}),
            };
            let mut case_schema = tagged(case.name, payload);
            describe(&mut case_schema, case_docs, self)?;
            cases.push(case_schema);
        }
        Ok(json!({"anyOf": cases}))
    }

    /// One arm of a result, `(index, tag)`: `{"ok": …}` or `{"err": …}`.
    fn result_arm(
        &mut self,
        ty: Option<Type>,
        shadow: Option<Shadow<'_>>,
        path: &mut String,
        depth: usize,
        (index, tag): (usize, &str),
    ) -> Result<Value, SchemaError> {
        let payload = match ty {
            Some(ty) => {
                let inner = shadow.and_then(|s| s.inner(index));
                self.child(&ty, inner, path, depth, &format!(".{tag}"))?
            }
            None => json!({"type": "null"}),
        };
        Ok(tagged(tag, payload))
    }

    /// Why a type with no JSON form (a handle, a map, an asynchronous type) cannot be
    /// a tool's argument or result.
    fn unsupported(&self, ty: &Type, path: &str) -> SchemaError {
        match ty {
            Type::Own(resource) | Type::Borrow(resource) => {
                let name = self
                    .resources
                    .iter()
                    .find(|(r, _)| r == resource)
                    .map_or_else(
                        || "a resource".to_string(),
                        |(_, n)| format!("resource `{n}`"),
                    );
                SchemaError::Unsupported {
                    path: path.to_string(),
                    what: format!("a handle to {name}"),
                    hint: "a handle lives in one instance and every tool call gets a fresh one; export functions that take and return plain values",
                }
            }
            Type::Map(_) => SchemaError::Unsupported {
                path: path.to_string(),
                what: "a map".into(),
                hint: "use a list of key-value tuples or records",
            },
            _ => SchemaError::Unsupported {
                path: path.to_string(),
                what: "an asynchronous type (future, stream or error-context)".into(),
                hint: "return the value itself",
            },
        }
    }
}

/// `{"type":"integer","minimum":MIN,"maximum":MAX}`.
fn integer(min: impl Into<Value>, max: impl Into<Value>) -> Value {
    json!({"type": "integer", "minimum": min.into(), "maximum": max.into()})
}

/// An object with exactly one property, `tag`.
fn tagged(tag: &str, payload: Value) -> Value {
    json!({
        "type": "object",
        "properties": {tag: payload},
        "required": [tag],
        "additionalProperties": false,
    })
}

/// Sets (or prefixes) a schema's description.
fn describe(
    schema: &mut Value,
    docs: Option<&str>,
    builder: &mut SchemaBuilder<'_>,
) -> Result<(), SchemaError> {
    let Some(docs) = docs else { return Ok(()) };
    builder.charge(docs.len())?;
    let text = match schema.get("description").and_then(Value::as_str) {
        Some(existing) => format!("{docs} ({existing})"),
        None => docs.to_string(),
    };
    schema["description"] = text.into();
    Ok(())
}

/// "name: docs" lines for the enum cases or flags that have docs.
fn case_docs(names: &[&str], shadow: Option<Shadow<'_>>) -> Option<String> {
    let shadow = shadow?;
    let lines: Vec<String> = names
        .iter()
        .enumerate()
        .filter_map(|(i, name)| shadow.name_docs(i).map(|d| format!("`{name}`: {d}")))
        .collect();
    (!lines.is_empty()).then(|| lines.join("; "))
}

/// Bytes of a generated signature before it is cut short.
const MAX_SIGNATURE: usize = 1024;

/// The function's WIT signature, e.g. `shapes.area(shape: variant { circle, … }) ->
/// f64`: the description of a tool whose WIT has no doc comment.
pub(crate) fn signature(
    wit_name: &str,
    params: &[(String, Type)],
    result: Option<&Type>,
) -> String {
    let params: Vec<String> = params
        .iter()
        .map(|(name, ty)| format!("{name}: {}", type_name(ty, 2)))
        .collect();
    let mut text = format!("{wit_name}({})", params.join(", "));
    if let Some(result) = result {
        text.push_str(&format!(" -> {}", type_name(result, 2)));
    }
    if text.len() > MAX_SIGNATURE {
        let cut = text.floor_char_boundary(MAX_SIGNATURE);
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// A type as WIT would write it, down to `depth` levels (`…` below).
fn type_name(ty: &Type, depth: usize) -> String {
    let inner = |ty: &Type| {
        if depth == 0 {
            "…".to_string()
        } else {
            type_name(ty, depth - 1)
        }
    };
    let names = |kind: &str, names: Vec<&str>| {
        let shown: Vec<&str> = names.iter().copied().take(6).collect();
        let more = if names.len() > shown.len() {
            ", …"
        } else {
            ""
        };
        format!("{kind} {{ {}{more} }}", shown.join(", "))
    };
    match ty {
        Type::Bool => "bool".into(),
        Type::U8 => "u8".into(),
        Type::U16 => "u16".into(),
        Type::U32 => "u32".into(),
        Type::U64 => "u64".into(),
        Type::S8 => "s8".into(),
        Type::S16 => "s16".into(),
        Type::S32 => "s32".into(),
        Type::S64 => "s64".into(),
        Type::Float32 => "f32".into(),
        Type::Float64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::List(l) => format!("list<{}>", inner(&l.ty())),
        Type::FixedLengthList(l) => format!("list<{}, {}>", inner(&l.ty()), l.len()),
        Type::Option(o) => format!("option<{}>", inner(&o.ty())),
        Type::Result(r) => match (r.ok(), r.err()) {
            (None, None) => "result".into(),
            (Some(ok), None) => format!("result<{}>", inner(&ok)),
            (None, Some(err)) => format!("result<_, {}>", inner(&err)),
            (Some(ok), Some(err)) => format!("result<{}, {}>", inner(&ok), inner(&err)),
        },
        Type::Tuple(t) => {
            let types: Vec<String> = t.types().map(|t| inner(&t)).collect();
            format!("tuple<{}>", types.join(", "))
        }
        Type::Record(r) => names("record", r.fields().map(|f| f.name).collect()),
        Type::Variant(v) => names("variant", v.cases().map(|c| c.name).collect()),
        Type::Enum(e) => names("enum", e.names().collect()),
        Type::Flags(f) => names("flags", f.names().collect()),
        Type::Own(_) => "own<resource>".into(),
        Type::Borrow(_) => "borrow<resource>".into(),
        Type::Map(_) => "map".into(),
        Type::Future(_) => "future".into(),
        Type::Stream(_) => "stream".into(),
        Type::ErrorContext => "error-context".into(),
    }
}
