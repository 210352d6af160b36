//! An output schema: the JSON Schema an agent's final answer must match (a profile's
//! `output_schema` or `output_schema_file`, an agent file's `output_schema`, a
//! `spawn_agent` argument, `warren run --output-schema`). Bounded in size, depth and
//! what checking an answer may cost ([`super::schema_cost`]), and checked as a JSON
//! Schema when given, so a bad one fails where it is written rather than at the end
//! of an agent's work.

use std::sync::Arc;

use serde_json::Value;

use super::schema_cost::{self, Unbounded};
pub(crate) use super::schema_cost::{MAX_OUTPUT_SCHEMA_BRANCHES, MAX_SCHEMA_CHECK_STEPS};

/// Most bytes of an output schema's compact JSON: it goes into the prompt and the
/// request of every turn of every agent that has it.
pub(crate) const MAX_OUTPUT_SCHEMA_BYTES: usize = 64 * 1024;

/// Deepest nesting of objects and arrays in an output schema (a schema nested
/// deeper describes nothing a model can be asked for, and costs a validator stack).
pub(crate) const MAX_OUTPUT_SCHEMA_DEPTH: usize = 32;

/// Most validation errors an invalid answer's report lists (the rest are counted).
pub(crate) const MAX_REPORTED_ERRORS: usize = 10;

/// A checked JSON Schema and its compiled validator.
#[derive(Clone)]
pub(crate) struct OutputSchema {
    /// The schema as given, sent to the model and shown to the parent.
    schema: Arc<Value>,
    /// Compiled once, shared by every agent that has the schema.
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OutputSchema").field(&self.schema).finish()
    }
}

impl PartialEq for OutputSchema {
    fn eq(&self, other: &OutputSchema) -> bool {
        self.schema == other.schema
    }
}

impl Eq for OutputSchema {}

impl OutputSchema {
    /// `schema` checked: an object, at most [`MAX_OUTPUT_SCHEMA_BYTES`] of JSON and
    /// [`MAX_OUTPUT_SCHEMA_DEPTH`] deep, valid against its meta-schema, with no
    /// reference outside itself. The error says what is wrong, not where (the caller
    /// names the file, key or argument).
    pub(crate) fn new(schema: Value) -> Result<OutputSchema, String> {
        if !schema.is_object() {
            return Err(format!(
                "an output schema must be a JSON object (a JSON Schema), not {}",
                kind(&schema)
            ));
        }
        let depth = depth(&schema);
        if depth > MAX_OUTPUT_SCHEMA_DEPTH {
            return Err(format!(
                "the schema nests {depth} levels deep; an output schema is at most {MAX_OUTPUT_SCHEMA_DEPTH} (MAX_OUTPUT_SCHEMA_DEPTH)"
            ));
        }
        let bytes = serde_json::to_string(&schema).map_or(usize::MAX, |s| s.len());
        if bytes > MAX_OUTPUT_SCHEMA_BYTES {
            return Err(format!(
                "the schema is {bytes} bytes of JSON; an output schema is at most {MAX_OUTPUT_SCHEMA_BYTES} (MAX_OUTPUT_SCHEMA_BYTES)"
            ));
        }
        if let Err(error) = jsonschema::meta::validate(&schema) {
            return Err(format!(
                "not a valid JSON Schema: {error} (at {})",
                pointer(&error.instance_path().to_string())
            ));
        }
        let validator = jsonschema::validator_for(&schema)
            .map_err(|error| format!("not a usable JSON Schema: {error}"))?;
        bounded_cost(&schema)?;
        Ok(OutputSchema {
            schema: Arc::new(schema),
            validator: Arc::new(validator),
        })
    }

    /// A schema from JSON text (a file's, an argument's), bounded before it is parsed.
    pub(crate) fn from_json(text: &str) -> Result<OutputSchema, String> {
        if text.len() > MAX_OUTPUT_SCHEMA_BYTES * 4 {
            return Err(format!(
                "the schema is {} bytes; an output schema is at most {MAX_OUTPUT_SCHEMA_BYTES} bytes of compact JSON (MAX_OUTPUT_SCHEMA_BYTES)",
                text.len()
            ));
        }
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        OutputSchema::new(value)
    }

    /// The schema as given.
    pub(crate) fn value(&self) -> &Value {
        &self.schema
    }

    /// The schema as given, shared.
    pub(crate) fn shared(&self) -> Arc<Value> {
        self.schema.clone()
    }

    /// The schema's compact JSON.
    pub(crate) fn compact(&self) -> String {
        self.schema.to_string()
    }

    /// Why `answer` does not match, one line per error (at most
    /// [`MAX_REPORTED_ERRORS`], the rest counted), each naming where in the answer.
    /// An answer whose check would take more than [`MAX_SCHEMA_CHECK_STEPS`] is not
    /// checked: that is its one error.
    pub(crate) fn check(&self, answer: &Value) -> Result<(), Vec<String>> {
        if let Err(unbounded) = schema_cost::steps(&self.schema, answer, MAX_SCHEMA_CHECK_STEPS) {
            let why = match unbounded {
                Unbounded::Over(limit) => format!(
                    "checking this answer against the schema would take more than {limit} steps (MAX_SCHEMA_CHECK_STEPS), so it was not checked: answer with less data"
                ),
                Unbounded::Cycle(reference) | Unbounded::Reference(reference) => {
                    format!("the answer was not checked: the schema's {reference} cannot be followed")
                }
            };
            return Err(vec![format!("at /: {why}")]);
        }
        let mut errors: Vec<String> = Vec::new();
        let mut more = 0usize;
        for error in self.validator.iter_errors(answer) {
            if errors.len() < MAX_REPORTED_ERRORS {
                errors.push(format!(
                    "at {}: {error}",
                    pointer(&error.instance_path().to_string())
                ));
            } else {
                more += 1;
            }
        }
        if more > 0 {
            errors.push(format!("and {more} more"));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// Whether checking a value against `schema` is bounded: its references point into it
/// by JSON pointer, none of its subschemas sets its own base, none refers to itself
/// without descending into the value, and one value meets at most
/// [`MAX_OUTPUT_SCHEMA_BRANCHES`] of its subschemas.
fn bounded_cost(schema: &Value) -> Result<(), String> {
    if let Some(base) = schema_cost::nested_base(schema) {
        return Err(format!(
            "a subschema sets its own base ({base}); an output schema refers within itself by JSON pointer from its root only"
        ));
    }
    match schema_cost::steps(schema, &Value::Null, MAX_OUTPUT_SCHEMA_BRANCHES) {
        Ok(_) => Ok(()),
        Err(Unbounded::Over(limit)) => Err(format!(
            "the schema applies more than {limit} subschemas to one value (its allOf, anyOf, oneOf, not, if/then/else, dependentSchemas and $refs unfolded), so checking an answer could take for ever; an output schema applies at most {limit} (MAX_OUTPUT_SCHEMA_BRANCHES)"
        )),
        Err(Unbounded::Cycle(reference)) => Err(format!(
            "the schema refers to itself ({reference}) without descending into the value: checking an answer would never end"
        )),
        Err(Unbounded::Reference(reference)) => Err(format!(
            "{reference} does not point into the schema: an output schema refers within itself by JSON pointer only (`#/$defs/NAME`)"
        )),
    }
}

/// A JSON pointer as shown: `/` for the whole document.
fn pointer(path: &str) -> String {
    if path.is_empty() {
        "/".into()
    } else {
        path.to_string()
    }
}

/// How deep `value` nests (a scalar is 0, `{}` is 1), without recursion.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, at)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Object(map) => Box::new(map.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        deepest = deepest.max(at + 1);
        stack.extend(children.map(|child| (child, at + 1)));
    }
    deepest
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_are_checked_and_bounded() {
        let schema = OutputSchema::new(json!({
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"]
        }))
        .unwrap();
        assert!(schema.check(&json!({"count": 3})).is_ok());
        let errors = schema.check(&json!({"count": "three"})).unwrap_err();
        assert!(errors[0].starts_with("at /count: "), "{errors:?}");
        let errors = schema.check(&json!({})).unwrap_err();
        assert!(
            errors[0].contains("\"count\" is a required property"),
            "{errors:?}"
        );
        for (bad, says) in [
            (json!("object"), "must be a JSON object"),
            (json!({"type": "objekt"}), "not a valid JSON Schema"),
            (json!({"minLength": -1}), "not a valid JSON Schema"),
            (
                json!({"$ref": "https://example.com/schema.json"}),
                "not a usable JSON Schema",
            ),
        ] {
            let error = OutputSchema::new(bad.clone()).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
        let mut deep = json!({"type": "string"});
        for _ in 0..20 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let error = OutputSchema::new(deep).unwrap_err();
        assert!(error.contains("MAX_OUTPUT_SCHEMA_DEPTH"), "{error}");
        let wide = json!({"description": "x".repeat(MAX_OUTPUT_SCHEMA_BYTES)});
        let error = OutputSchema::new(wide).unwrap_err();
        assert!(error.contains("MAX_OUTPUT_SCHEMA_BYTES"), "{error}");
        assert!(OutputSchema::from_json("{nope")
            .unwrap_err()
            .starts_with("not JSON"));
    }
}
