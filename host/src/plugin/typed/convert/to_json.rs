//! Component values → JSON, along the WIT type.

use base64::Engine as _;
use serde_json::{Map, Number, Value};
use wasmtime::component::types::Type;
use wasmtime::component::Val;

/// Converts a component value of type `ty` to JSON. Fails only when `val` is not of
/// type `ty`, or of a type with no JSON form.
pub(crate) fn to_json(ty: &Type, val: &Val) -> Result<Value, String> {
    Ok(match (ty, val) {
        (Type::Bool, Val::Bool(b)) => Value::Bool(*b),
        (Type::U8, Val::U8(n)) => (*n).into(),
        (Type::U16, Val::U16(n)) => (*n).into(),
        (Type::U32, Val::U32(n)) => (*n).into(),
        (Type::U64, Val::U64(n)) => (*n).into(),
        (Type::S8, Val::S8(n)) => (*n).into(),
        (Type::S16, Val::S16(n)) => (*n).into(),
        (Type::S32, Val::S32(n)) => (*n).into(),
        (Type::S64, Val::S64(n)) => (*n).into(),
        // The shortest decimal that reads back as the same f32 (0.1, not
        // 0.10000000149011612).
        (Type::Float32, Val::Float32(x)) => float(f64::from(*x), x.to_string()),
        (Type::Float64, Val::Float64(x)) => float(*x, x.to_string()),
        (Type::Char, Val::Char(c)) => Value::String(c.to_string()),
        (Type::String, Val::String(s)) => Value::String(s.clone()),
        (Type::List(list), Val::List(items)) if list.ty() == Type::U8 => bytes(items)?,
        (Type::List(list), Val::List(items)) => array(&list.ty(), items)?,
        (Type::FixedLengthList(list), Val::FixedLengthList(items)) => array(&list.ty(), items)?,
        (Type::Tuple(tuple), Val::Tuple(items)) if tuple.types().len() == items.len() => {
            Value::Array(
                tuple
                    .types()
                    .zip(items)
                    .map(|(t, v)| to_json(&t, v))
                    .collect::<Result<_, _>>()?,
            )
        }
        (Type::Record(record), Val::Record(fields)) if record.fields().len() == fields.len() => {
            object(record, fields)?
        }
        (Type::Variant(variant), Val::Variant(name, payload)) => {
            variant_case(variant, name, payload)?
        }
        (Type::Enum(names), Val::Enum(name)) if names.names().any(|n| n == name) => {
            Value::String(name.clone())
        }
        (Type::Flags(flags), Val::Flags(set)) => flag_names(flags, set)?,
        (Type::Option(_), Val::Option(None)) => Value::Null,
        (Type::Option(option), Val::Option(Some(value))) => {
            let inner = option.ty();
            let json = to_json(&inner, value)?;
            if matches!(inner, Type::Option(_)) {
                single("some", json)
            } else {
                json
            }
        }
        (Type::Result(result), Val::Result(outcome)) => result_outcome(result, outcome)?,
        (ty, val) => return Err(mismatch(ty, val)),
    })
}

/// A variant case as `{"case": payload}` (`null` for a case without one).
fn variant_case(
    variant: &wasmtime::component::types::Variant,
    name: &str,
    payload: &Option<Box<Val>>,
) -> Result<Value, String> {
    let case = variant
        .cases()
        .find(|c| c.name == name)
        .ok_or_else(|| format!("no variant case `{name}`"))?;
    let payload = match (&case.ty, payload) {
        (Some(ty), Some(value)) => to_json(ty, value)?,
        (None, None) => Value::Null,
        _ => return Err(format!("variant case `{name}` with the wrong payload")),
    };
    Ok(single(name, payload))
}

/// Flags as an array of the names set, in the type's order.
fn flag_names(flags: &wasmtime::component::types::Flags, set: &[String]) -> Result<Value, String> {
    if let Some(bad) = set.iter().find(|f| !flags.names().any(|n| n == *f)) {
        return Err(format!("no flag `{bad}`"));
    }
    Ok(Value::Array(
        flags
            .names()
            .filter(|n| set.iter().any(|s| s == n))
            .map(|n| Value::String(n.to_string()))
            .collect(),
    ))
}

/// A result as `{"ok": payload}` or `{"err": payload}` (`null` for no payload).
fn result_outcome(
    result: &wasmtime::component::types::ResultType,
    outcome: &Result<Option<Box<Val>>, Option<Box<Val>>>,
) -> Result<Value, String> {
    let (tag, ty, payload) = match outcome {
        Ok(payload) => ("ok", result.ok(), payload),
        Err(payload) => ("err", result.err(), payload),
    };
    let payload = match (ty, payload) {
        (Some(ty), Some(value)) => to_json(&ty, value)?,
        (None, None) => Value::Null,
        _ => return Err(format!("result `{tag}` with the wrong payload")),
    };
    Ok(single(tag, payload))
}

/// A `list<u8>` as base64 text.
fn bytes(items: &[Val]) -> Result<Value, String> {
    let bytes: Vec<u8> = items
        .iter()
        .map(|v| match v {
            Val::U8(b) => Ok(*b),
            other => Err(mismatch(&Type::U8, other)),
        })
        .collect::<Result<_, _>>()?;
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(bytes),
    ))
}

/// A record as an object, its fields in `record`'s order.
fn object(
    record: &wasmtime::component::types::Record,
    fields: &[(String, Val)],
) -> Result<Value, String> {
    let mut object = Map::new();
    for (field, (name, value)) in record.fields().zip(fields) {
        if field.name != name {
            return Err(format!(
                "record field `{name}` where `{}` belongs",
                field.name
            ));
        }
        object.insert(name.clone(), to_json(&field.ty, value)?);
    }
    Ok(Value::Object(object))
}

fn mismatch(ty: &Type, val: &Val) -> String {
    format!("the value {val:?} where {ty:?} belongs")
}

fn array(ty: &Type, items: &[Val]) -> Result<Value, String> {
    Ok(Value::Array(
        items
            .iter()
            .map(|v| to_json(ty, v))
            .collect::<Result<_, _>>()?,
    ))
}

/// A finite float as a JSON number written as `shortest` reads; NaN and the
/// infinities as strings, which JSON numbers cannot hold.
fn float(x: f64, shortest: String) -> Value {
    if x.is_nan() {
        Value::String("NaN".into())
    } else if x.is_infinite() {
        Value::String(if x > 0.0 { "inf" } else { "-inf" }.into())
    } else {
        let exact = shortest.parse::<f64>().unwrap_or(x);
        Number::from_f64(exact).map_or(Value::Null, Value::Number)
    }
}

fn single(key: &str, value: Value) -> Value {
    let mut object = Map::new();
    object.insert(key.to_string(), value);
    Value::Object(object)
}
