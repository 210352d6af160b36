//! JSON → component values, checked along the WIT type; an error names the JSON path
//! of the bad value and what was expected.

use base64::Engine as _;
use serde_json::{Map, Value};
use wasmtime::component::types::Type;
use wasmtime::component::Val;

use crate::plugin::typed::schema::MAX_TYPE_DEPTH;

/// A JSON value that does not fit its WIT type, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub(crate) struct InvalidArgument {
    /// The JSON path, e.g. `$.items[2].weight`.
    pub path: String,
    /// What was expected and what was found.
    pub message: String,
}

/// Converts a function's JSON arguments object to its parameters, in order. Unknown
/// and missing arguments are errors naming them; an absent `option` is `none`.
pub(crate) fn args_from_json(
    params: &[(String, Type)],
    args: &Map<String, Value>,
) -> Result<Vec<Val>, InvalidArgument> {
    let mut path = String::from("$");
    let fields: Vec<(&str, Type)> = params
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    let values = object_fields(&fields, args, &mut path, 0, "argument")?;
    Ok(values.into_iter().map(|(_, v)| v).collect())
}

/// Converts `value` to a component value of type `ty` (the round trip's test; calls
/// convert arguments with [`args_from_json`]).
#[cfg(test)]
pub(crate) fn from_json(ty: &Type, value: &Value) -> Result<Val, InvalidArgument> {
    convert(ty, value, &mut String::from("$"), 0)
}

/// Converts each of `fields` from `object`, in order; names unknown and missing ones.
fn object_fields(
    fields: &[(&str, Type)],
    object: &Map<String, Value>,
    path: &mut String,
    depth: usize,
    what: &str,
) -> Result<Vec<(String, Val)>, InvalidArgument> {
    let unknown: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|k| !fields.iter().any(|(n, _)| n == k))
        .collect();
    if !unknown.is_empty() {
        let expected: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
        return Err(invalid(
            path,
            format!(
                "unknown {what}{} {} (expected: {})",
                plural(unknown.len()),
                quoted(unknown.into_iter()),
                expected.join(", ")
            ),
        ));
    }
    let missing: Vec<&str> = fields
        .iter()
        .filter(|(n, ty)| !object.contains_key(*n) && !matches!(ty, Type::Option(_)))
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        return Err(invalid(
            path,
            format!(
                "missing required {what}{} {}",
                plural(missing.len()),
                quoted(missing.into_iter())
            ),
        ));
    }
    let mut values = Vec::with_capacity(fields.len());
    for (name, ty) in fields {
        let value = match object.get(*name) {
            Some(value) => at(path, depth, &format!(".{name}"), ty, value)?,
            None => Val::Option(None),
        };
        values.push((name.to_string(), value));
    }
    Ok(values)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn invalid(path: &str, message: String) -> InvalidArgument {
    InvalidArgument {
        path: path.to_string(),
        message,
    }
}

/// A JSON value as an error message shows it: short values as written, long ones
/// cut, containers by kind.
fn shown(value: &Value) -> String {
    match value {
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        other => {
            let text = other.to_string();
            if text.len() > 40 {
                format!("{}…", &text[..text.floor_char_boundary(40)])
            } else {
                text
            }
        }
    }
}

fn convert(
    ty: &Type,
    value: &Value,
    path: &mut String,
    depth: usize,
) -> Result<Val, InvalidArgument> {
    if depth > MAX_TYPE_DEPTH {
        return Err(invalid(
            path,
            format!("nested more than {MAX_TYPE_DEPTH} levels deep"),
        ));
    }
    Ok(match ty {
        Type::Bool => Val::Bool(
            value
                .as_bool()
                .ok_or_else(|| expected(path, value, "a boolean"))?,
        ),
        Type::U8 => Val::U8(int(value, "u8", 0, u8::MAX.into(), path)? as u8),
        Type::U16 => Val::U16(int(value, "u16", 0, u16::MAX.into(), path)? as u16),
        Type::U32 => Val::U32(int(value, "u32", 0, u32::MAX.into(), path)? as u32),
        Type::U64 => Val::U64(int(value, "u64", 0, u64::MAX.into(), path)? as u64),
        Type::S8 => Val::S8(int(value, "s8", i8::MIN.into(), i8::MAX.into(), path)? as i8),
        Type::S16 => Val::S16(int(value, "s16", i16::MIN.into(), i16::MAX.into(), path)? as i16),
        Type::S32 => Val::S32(int(value, "s32", i32::MIN.into(), i32::MAX.into(), path)? as i32),
        Type::S64 => Val::S64(int(value, "s64", i64::MIN.into(), i64::MAX.into(), path)? as i64),
        Type::Float64 => {
            Val::Float64(number(value).ok_or_else(|| expected(path, value, "a number (f64)"))?)
        }
        Type::Float32 => {
            let x = number(value).ok_or_else(|| expected(path, value, "a number (f32)"))?;
            if x.is_finite() && x.abs() > f64::from(f32::MAX) {
                return Err(expected(path, value, "a number in the range of f32"));
            }
            Val::Float32(x as f32)
        }
        Type::Char => char_of(value, path)?,
        Type::String => Val::String(
            value
                .as_str()
                .ok_or_else(|| expected(path, value, "a string"))?
                .to_string(),
        ),
        Type::List(list) if list.ty() == Type::U8 => bytes_of(value, path, depth)?,
        Type::List(list) => {
            let items = value
                .as_array()
                .ok_or_else(|| expected(path, value, "an array"))?;
            Val::List(elements(&list.ty(), items, path, depth)?)
        }
        Type::FixedLengthList(list) => {
            let n = list.len() as usize;
            let items = value
                .as_array()
                .filter(|items| items.len() == n)
                .ok_or_else(|| expected(path, value, &format!("an array of {n}")))?;
            Val::FixedLengthList(elements(&list.ty(), items, path, depth)?)
        }
        Type::Tuple(tuple) => tuple_of(tuple, value, path, depth)?,
        Type::Record(record) => record_of(record, value, path, depth)?,
        Type::Variant(variant) => variant_of(variant, value, path, depth)?,
        Type::Enum(names) => enum_of(names, value, path)?,
        Type::Flags(flags) => flags_of(flags, value, path)?,
        Type::Option(option) => option_of(option, value, path, depth)?,
        Type::Result(result) => result_of(result, value, path, depth)?,
        Type::Own(_)
        | Type::Borrow(_)
        | Type::Map(_)
        | Type::Future(_)
        | Type::Stream(_)
        | Type::ErrorContext => return Err(invalid(path, "this type has no JSON form".into())),
    })
}

/// A `list<u8>`: a base64 string, or an array of bytes.
fn bytes_of(value: &Value, path: &mut String, depth: usize) -> Result<Val, InvalidArgument> {
    Ok(match value {
        Value::String(text) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| invalid(path, format!("expected base64 bytes: {e}")))?;
            Val::List(bytes.into_iter().map(Val::U8).collect())
        }
        Value::Array(items) => Val::List(elements(&Type::U8, items, path, depth)?),
        _ => return Err(expected(path, value, "a base64 string")),
    })
}

/// A record: an object with its fields.
fn record_of(
    record: &wasmtime::component::types::Record,
    value: &Value,
    path: &mut String,
    depth: usize,
) -> Result<Val, InvalidArgument> {
    let object = value
        .as_object()
        .ok_or_else(|| expected(path, value, "an object"))?;
    let fields: Vec<(&str, Type)> = record.fields().map(|f| (f.name, f.ty)).collect();
    Ok(Val::Record(object_fields(
        &fields, object, path, depth, "field",
    )?))
}

/// An enum: the name of one of its cases.
fn enum_of(
    names: &wasmtime::component::types::Enum,
    value: &Value,
    path: &str,
) -> Result<Val, InvalidArgument> {
    match value.as_str().filter(|n| names.names().any(|c| c == *n)) {
        Some(name) => Ok(Val::Enum(name.to_string())),
        None => Err(expected(
            path,
            value,
            &format!("one of {}", quoted(names.names())),
        )),
    }
}

/// A `char`: a one-character string.
fn char_of(value: &Value, path: &str) -> Result<Val, InvalidArgument> {
    let text = value
        .as_str()
        .ok_or_else(|| expected(path, value, "a one-character string"))?;
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(Val::Char(c)),
        _ => Err(expected(path, value, "a one-character string")),
    }
}

/// A tuple: an array of its length, each item of its type.
fn tuple_of(
    tuple: &wasmtime::component::types::Tuple,
    value: &Value,
    path: &mut String,
    depth: usize,
) -> Result<Val, InvalidArgument> {
    let n = tuple.types().len();
    let items = value
        .as_array()
        .filter(|items| items.len() == n)
        .ok_or_else(|| expected(path, value, &format!("an array of {n} (a tuple)")))?;
    let mut values = Vec::with_capacity(n);
    for (index, (ty, item)) in tuple.types().zip(items).enumerate() {
        values.push(at(path, depth, &format!("[{index}]"), &ty, item)?);
    }
    Ok(Val::Tuple(values))
}

/// A variant: `{"case": payload}`.
fn variant_of(
    variant: &wasmtime::component::types::Variant,
    value: &Value,
    path: &mut String,
    depth: usize,
) -> Result<Val, InvalidArgument> {
    let cases: Vec<String> = variant.cases().map(|c| c.name.to_string()).collect();
    let expected_case = || {
        invalid(
            path,
            format!(
                "expected one of {} as {{\"case\": payload}}, got {}",
                quoted(cases.iter().map(String::as_str)),
                shown(value)
            ),
        )
    };
    let (name, payload) = tag(value).ok_or_else(expected_case)?;
    let case = variant
        .cases()
        .find(|c| c.name == name)
        .ok_or_else(expected_case)?;
    let payload = case_payload(
        path,
        depth,
        name,
        case.ty,
        payload,
        [
            &format!("variant case `{name}`"),
            "payload",
            &format!(": {{\"{name}\": …}}"),
        ],
    )?;
    Ok(Val::Variant(name.to_string(), payload))
}

/// Flags: an array of the flags set.
fn flags_of(
    flags: &wasmtime::component::types::Flags,
    value: &Value,
    path: &str,
) -> Result<Val, InvalidArgument> {
    let items = value.as_array().ok_or_else(|| {
        expected(
            path,
            value,
            &format!("an array of flags from {}", quoted(flags.names())),
        )
    })?;
    let mut set: Vec<String> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match item.as_str().filter(|n| flags.names().any(|f| f == *n)) {
            Some(name) if !set.iter().any(|s| s == name) => set.push(name.to_string()),
            Some(_) => {}
            None => {
                return Err(invalid(
                    &format!("{path}[{index}]"),
                    format!(
                        "expected one of {}, got {}",
                        quoted(flags.names()),
                        shown(item)
                    ),
                ))
            }
        }
    }
    Ok(Val::Flags(set))
}

/// An option: `null`, or the value (`{"some": …}` for an option inside an option).
fn option_of(
    option: &wasmtime::component::types::OptionType,
    value: &Value,
    path: &mut String,
    depth: usize,
) -> Result<Val, InvalidArgument> {
    let inner = option.ty();
    match value {
        Value::Null => Ok(Val::Option(None)),
        _ if matches!(inner, Type::Option(_)) => {
            let payload = value
                .as_object()
                .filter(|o| o.len() == 1)
                .and_then(|o| o.get("some"))
                .ok_or_else(|| {
                    expected(
                        path,
                        value,
                        "null or {\"some\": …} (an option inside an option)",
                    )
                })?;
            Ok(Val::Option(Some(Box::new(at(
                path, depth, ".some", &inner, payload,
            )?))))
        }
        _ => Ok(Val::Option(Some(Box::new(convert(
            &inner,
            value,
            path,
            depth + 1,
        )?)))),
    }
}

/// A result: `{"ok": …}` or `{"err": …}`.
fn result_of(
    result: &wasmtime::component::types::ResultType,
    value: &Value,
    path: &mut String,
    depth: usize,
) -> Result<Val, InvalidArgument> {
    let (name, payload) = tag(value)
        .filter(|(n, _)| *n == "ok" || *n == "err")
        .ok_or_else(|| expected(path, value, "{\"ok\": …} or {\"err\": …}"))?;
    let ty = if name == "ok" {
        result.ok()
    } else {
        result.err()
    };
    let payload = case_payload(
        path,
        depth,
        name,
        ty,
        payload,
        [&format!("`{name}`"), "value", ""],
    )?;
    Ok(Val::Result(if name == "ok" {
        Ok(payload)
    } else {
        Err(payload)
    }))
}

/// "expected WHAT, got VALUE" at `path`.
fn expected(path: &str, value: &Value, what: &str) -> InvalidArgument {
    invalid(path, format!("expected {what}, got {}", shown(value)))
}

/// Converts `value` at `path` + `suffix`.
fn at(
    path: &mut String,
    depth: usize,
    suffix: &str,
    ty: &Type,
    value: &Value,
) -> Result<Val, InvalidArgument> {
    let len = path.len();
    path.push_str(suffix);
    let converted = convert(ty, value, path, depth + 1);
    path.truncate(len);
    converted
}

/// The payload of variant case or result side `name`, of type `ty` when it has one.
/// `words` are how errors name it: the subject, what it carries (`payload`,
/// `value`), and a hint after "needs a …".
fn case_payload(
    path: &mut String,
    depth: usize,
    name: &str,
    ty: Option<Type>,
    payload: Option<&Value>,
    [subject, noun, hint]: [&str; 3],
) -> Result<Option<Box<Val>>, InvalidArgument> {
    match (ty, payload) {
        (Some(ty), Some(payload)) => Ok(Some(Box::new(at(
            path,
            depth,
            &format!(".{name}"),
            &ty,
            payload,
        )?))),
        (Some(_), None) => Err(invalid(path, format!("{subject} needs a {noun}{hint}"))),
        (None, None | Some(Value::Null)) => Ok(None),
        (None, Some(other)) => Err(invalid(
            path,
            format!("{subject} has no {noun} (use null), got {}", shown(other)),
        )),
    }
}

/// Converts each array item to `ty`, naming its index on error.
fn elements(
    ty: &Type,
    items: &[Value],
    path: &mut String,
    depth: usize,
) -> Result<Vec<Val>, InvalidArgument> {
    items
        .iter()
        .enumerate()
        .map(|(index, item)| at(path, depth, &format!("[{index}]"), ty, item))
        .collect()
}

/// `{"name": payload}` → (name, Some(payload)); `"name"` → (name, None).
fn tag(value: &Value) -> Option<(&str, Option<&Value>)> {
    match value {
        Value::String(name) => Some((name, None)),
        Value::Object(object) if object.len() == 1 => {
            let (name, payload) = object.iter().next()?;
            Some((name, Some(payload)))
        }
        _ => None,
    }
}

/// An integer in `min..=max`: a JSON integer, or a float with no fraction.
fn int(
    value: &Value,
    name: &str,
    min: i128,
    max: i128,
    path: &str,
) -> Result<i128, InvalidArgument> {
    let n = value.as_number().and_then(|n| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| {
                n.as_f64()
                    .filter(|x| x.fract() == 0.0 && x.abs() < 1e19)
                    .map(|x| x as i128)
            })
    });
    match n {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(invalid(
            path,
            format!("expected {name} {min}..{max}, got {}", shown(value)),
        )),
    }
}

/// A float: a JSON number, or `"NaN"`, `"inf"`, `"-inf"` (also `"infinity"`, any case).
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "nan" => Some(f64::NAN),
            "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
            "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}
