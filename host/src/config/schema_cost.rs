//! What checking a value against an output schema may cost, found before the check.
//!
//! A validator applies a schema's in-place subschemas (`allOf`, `anyOf`, `oneOf`,
//! `not`, `if`/`then`/`else`, `dependentSchemas`, `$ref`) to the value itself and its
//! other subschemas (`properties`, `items`, …) to the value's members, and it follows
//! every branch: a 2.6 KB schema of forty `$defs` each referring twice to the next
//! makes one check of `{}` take 2^40 steps. So the steps a check takes are counted
//! here first, without checking anything: each (subschema, part of the value) pair is
//! counted once and its count remembered, so counting costs at most as many steps as
//! it allows. A schema whose steps for one bare value pass
//! [`MAX_OUTPUT_SCHEMA_BRANCHES`] is refused when it is given; an answer whose check
//! would pass [`MAX_SCHEMA_CHECK_STEPS`] is not checked, and is refused saying so.
//!
//! References are followed only as JSON pointers into the schema (`#`, `#/$defs/a`),
//! and a subschema may not set its own `$id` (which would move where its references
//! point): what the validator follows is then what is counted.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// Most subschemas an output schema may apply to one value, its in-place
/// combinators and references unfolded (checked when the schema is given).
pub(crate) const MAX_OUTPUT_SCHEMA_BRANCHES: u64 = 4_096;

/// Most steps (a subschema applied to a part of the answer) the check of one answer
/// may take; an answer whose check would take more is refused unchecked.
pub(crate) const MAX_SCHEMA_CHECK_STEPS: u64 = 1_000_000;

/// Deepest chain of subschemas followed while counting (references included).
const MAX_NESTING: usize = 512;

/// What a property name is checked as by `propertyNames`.
static PROPERTY_NAME: Value = Value::String(String::new());

/// Why a check's steps are not bounded.
#[derive(Debug, PartialEq)]
pub(crate) enum Unbounded {
    /// It would take more than the limit.
    Over(u64),
    /// A subschema refers to itself without descending into the value (`$ref` text).
    Cycle(String),
    /// A reference that is not a JSON pointer into the schema, or a nested `$id`.
    Reference(String),
}

/// The steps checking `value` against `schema` takes, at most `limit`.
pub(crate) fn steps(schema: &Value, value: &Value, limit: u64) -> Result<u64, Unbounded> {
    let mut count = Count {
        root: schema,
        limit,
        budget: limit,
        known: HashMap::new(),
        open: HashSet::new(),
    };
    count.visits(schema, value)
}

/// One count in progress.
struct Count<'s> {
    /// The whole schema, where references point.
    root: &'s Value,
    /// The most steps allowed.
    limit: u64,
    /// Pairs that may still be counted (each is counted once).
    budget: u64,
    /// The steps of each (subschema, value) pair counted, by address.
    known: HashMap<(usize, usize), u64>,
    /// The pairs being counted (a pair met again inside itself is a cycle).
    open: HashSet<(usize, usize)>,
}

impl<'s> Count<'s> {
    /// The steps of `schema` applied to `value`, its subschemas' included.
    fn visits(&mut self, schema: &'s Value, value: &Value) -> Result<u64, Unbounded> {
        let key = (
            std::ptr::from_ref(schema) as usize,
            std::ptr::from_ref(value) as usize,
        );
        if let Some(&known) = self.known.get(&key) {
            return Ok(known);
        }
        if self.budget == 0 || self.open.len() >= MAX_NESTING {
            return Err(Unbounded::Over(self.limit));
        }
        if !self.open.insert(key) {
            let reference = schema.get("$ref").map(Value::to_string).unwrap_or_default();
            return Err(Unbounded::Cycle(reference));
        }
        self.budget -= 1;
        let total = self.of_keywords(schema, value);
        self.open.remove(&key);
        let total = total?;
        self.known.insert(key, total);
        Ok(total)
    }

    /// One step for `schema` itself, and its keywords' subschemas' steps.
    fn of_keywords(&mut self, schema: &'s Value, value: &Value) -> Result<u64, Unbounded> {
        let Value::Object(keywords) = schema else {
            return Ok(1);
        };
        let mut total = 1u64;
        for (keyword, sub) in keywords {
            let steps = match keyword.as_str() {
                "allOf" | "anyOf" | "oneOf" => self.each(sub.as_array(), value)?,
                "not" | "if" | "then" | "else" => self.visits(sub, value)?,
                "dependentSchemas" | "dependencies" => {
                    let schemas = sub.as_object().into_iter().flat_map(|map| map.values());
                    self.sum(schemas.filter(|s| !s.is_array()).map(|s| (s, value)))?
                }
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    let target = self.resolve(sub)?;
                    self.visits(target, value)?
                }
                _ => self.of_members(keyword, sub, value)?,
            };
            total = total.saturating_add(steps);
            if total > self.limit {
                return Err(Unbounded::Over(self.limit));
            }
        }
        Ok(total)
    }

    /// The steps of keyword `keyword`'s subschemas `sub` applied to `value`'s members
    /// (a property or an item); counted over, never under (`patternProperties` as if
    /// every pattern matched every property).
    fn of_members(
        &mut self,
        keyword: &str,
        sub: &'s Value,
        value: &Value,
    ) -> Result<u64, Unbounded> {
        match (keyword, value) {
            ("properties", Value::Object(members)) => {
                let named = sub.as_object().into_iter().flatten();
                self.sum(named.filter_map(|(name, s)| Some((s, members.get(name)?))))
            }
            ("patternProperties", Value::Object(members)) => {
                let patterns = sub.as_object().into_iter().flat_map(|map| map.values());
                self.sum(patterns.flat_map(|s| members.values().map(move |v| (s, v))))
            }
            ("additionalProperties" | "unevaluatedProperties", Value::Object(members)) => {
                self.sum(members.values().map(|v| (sub, v)))
            }
            ("propertyNames", Value::Object(members)) => {
                let one = self.visits(sub, &PROPERTY_NAME)?;
                Ok(one.saturating_mul(members.len() as u64))
            }
            ("prefixItems", Value::Array(items)) => {
                let schemas = sub.as_array().into_iter().flatten();
                self.sum(schemas.zip(items))
            }
            (
                "items" | "additionalItems" | "unevaluatedItems" | "contains",
                Value::Array(items),
            ) => match sub {
                Value::Array(schemas) => self.sum(schemas.iter().zip(items)),
                _ => self.sum(items.iter().map(|v| (sub, v))),
            },
            _ => Ok(0),
        }
    }

    /// The steps of each schema of `schemas` applied to `value`.
    fn each(&mut self, schemas: Option<&'s Vec<Value>>, value: &Value) -> Result<u64, Unbounded> {
        self.sum(schemas.into_iter().flatten().map(|s| (s, value)))
    }

    /// The steps of each (schema, value) pair, summed.
    fn sum<'v>(
        &mut self,
        pairs: impl Iterator<Item = (&'s Value, &'v Value)>,
    ) -> Result<u64, Unbounded> {
        let mut total = 0u64;
        for (schema, value) in pairs {
            total = total.saturating_add(self.visits(schema, value)?);
            if total > self.limit {
                return Err(Unbounded::Over(self.limit));
            }
        }
        Ok(total)
    }

    /// The subschema reference `reference` points to: a JSON pointer into the schema.
    fn resolve(&self, reference: &Value) -> Result<&'s Value, Unbounded> {
        let text = reference.as_str().unwrap_or_default();
        let pointer = text
            .strip_prefix('#')
            .filter(|pointer| pointer.is_empty() || pointer.starts_with('/'))
            .and_then(percent_decoded);
        pointer
            .and_then(|pointer| self.root.pointer(&pointer))
            .ok_or_else(|| Unbounded::Reference(format!("$ref {reference}")))
    }
}

/// The first `$id` below the schema's root (or, in a draft-04 schema, `id`), which
/// would move where the references under it point: the count follows pointers from
/// the root only.
pub(crate) fn nested_base(schema: &Value) -> Option<String> {
    let draft4 = schema["$schema"]
        .as_str()
        .is_some_and(|uri| uri.contains("draft-04"));
    let mut stack: Vec<(&Value, bool)> = vec![(schema, true)];
    while let Some((value, root)) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, sub) in map {
                    let moves = key == "$id" || (draft4 && key == "id" && sub.is_string());
                    if moves && !root {
                        return Some(format!("{key} {sub}"));
                    }
                    stack.push((sub, false));
                }
            }
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, false))),
            _ => {}
        }
    }
    None
}

/// `text` with its `%XX` escapes decoded (`None` when they do not make UTF-8).
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = text.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Forty `$defs`, each referring twice to the next, the last a string: 2^40
    /// steps for any value that is not a string.
    fn doubling(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for level in 0..levels {
            let next = format!("#/$defs/d{}", level + 1);
            defs.insert(
                format!("d{level}"),
                json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert(format!("d{levels}"), json!({"type": "string"}));
        json!({"$defs": defs, "$ref": "#/$defs/d0"})
    }

    #[test]
    fn branching_is_counted_without_being_walked() {
        let schema = doubling(40);
        assert!(
            schema.to_string().len() < 4096,
            "{}",
            schema.to_string().len()
        );
        assert_eq!(
            steps(&schema, &json!({}), MAX_OUTPUT_SCHEMA_BRANCHES),
            Err(Unbounded::Over(MAX_OUTPUT_SCHEMA_BRANCHES))
        );
        // Eight levels: about 2^10 steps.
        assert!(steps(&doubling(8), &Value::Null, MAX_OUTPUT_SCHEMA_BRANCHES).is_ok());
    }

    #[test]
    fn an_answer_is_counted_per_member() {
        let schema =
            json!({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]}});
        let answer = json!([1, 2, 3]);
        assert_eq!(steps(&schema, &answer, 100), Ok(1 + 3 * 3));
        // Recursion into the answer multiplies per level: bounded by the limit.
        let recursive = json!({"anyOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}]});
        let mut deep = json!(1);
        for _ in 0..40 {
            deep = json!([deep]);
        }
        assert_eq!(
            steps(&recursive, &deep, MAX_SCHEMA_CHECK_STEPS),
            Err(Unbounded::Over(MAX_SCHEMA_CHECK_STEPS))
        );
        assert!(steps(&recursive, &json!([[1]]), MAX_SCHEMA_CHECK_STEPS).is_ok());
    }

    #[test]
    fn cycles_and_references_outside_the_schema_are_named() {
        let cycle = json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
        assert!(matches!(
            steps(&cycle, &Value::Null, 100),
            Err(Unbounded::Cycle(_))
        ));
        for reference in ["#anchor", "other.json", "#/$defs/missing"] {
            let schema = json!({"$ref": reference, "$defs": {}});
            assert!(
                matches!(
                    steps(&schema, &Value::Null, 100),
                    Err(Unbounded::Reference(_))
                ),
                "{reference}"
            );
        }
        let escaped = json!({"$defs": {"a/b c": {"type": "string"}}, "$ref": "#/$defs/a~1b%20c"});
        assert_eq!(steps(&escaped, &Value::Null, 100), Ok(2));
    }

    #[test]
    fn a_nested_base_is_found_wherever_it_is() {
        let nested = json!({"$defs": {"r": {"$id": "https://example.com/r", "$defs": {}}}});
        assert_eq!(
            nested_base(&nested).as_deref(),
            Some("$id \"https://example.com/r\"")
        );
        assert_eq!(
            nested_base(&json!({"$id": "https://example.com/root"})),
            None
        );
        let ids = json!({"properties": {"id": {"type": "string"}}, "required": ["id"]});
        assert_eq!(nested_base(&ids), None);
        let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "definitions": {"a": {"id": "a.json"}}});
        assert_eq!(nested_base(&draft4).as_deref(), Some("id \"a.json\""));
    }
}
