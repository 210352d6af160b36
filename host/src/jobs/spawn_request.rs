//! The arguments of one `spawn_agent` call, checked for shape before anything is
//! looked up: what the model asked for, not yet what it may have.

use serde_json::Value;

use crate::config::OutputSchema;

/// Arguments `spawn_agent` accepts.
pub(crate) const SPAWN_ARGUMENTS: [&str; 12] = [
    "task",
    "description",
    "profile",
    "context",
    "constraints",
    "system_prompt",
    "tools",
    "max_turns",
    "max_cost_usd",
    "timeout_s",
    "background",
    "output_schema",
];

/// A well-formed `spawn_agent` call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SpawnRequest {
    /// What the child should do (never empty).
    pub task: String,
    /// A short label for the tree, events and result blocks.
    pub description: Option<String>,
    /// The profile asked for; `None`: the parent's own.
    pub profile: Option<String>,
    /// Only what the child needs to know (a string or an object).
    pub context: Option<Value>,
    /// Rules the child must follow.
    pub constraints: Vec<String>,
    /// Added to the child's system prompt.
    pub system_prompt: Option<String>,
    /// A subset of the profile's tools.
    pub tools: Option<Vec<String>>,
    /// Asked-for turn limit (the profile's may be lower).
    pub max_turns: Option<u32>,
    /// Asked-for cost cap in US dollars.
    pub max_cost_usd: Option<f64>,
    /// Asked-for wall time in seconds.
    pub timeout_s: Option<u64>,
    /// Return at once with the job id (default) or wait for the result.
    pub background: bool,
    /// The JSON Schema the child's answer must match (checked when given).
    pub output_schema: Option<OutputSchema>,
}

impl SpawnRequest {
    /// Checks the shape of `args`; the error is a tool error the model can act on.
    pub(crate) fn parse(args: &Value) -> Result<SpawnRequest, String> {
        let Some(object) = args.as_object() else {
            return Err("arguments must be a JSON object".into());
        };
        if let Some(unknown) = object
            .keys()
            .find(|k| !SPAWN_ARGUMENTS.contains(&k.as_str()))
        {
            return Err(format!(
                "unknown argument `{unknown}` (allowed: {})",
                SPAWN_ARGUMENTS.join(", ")
            ));
        }
        let task = text_arg(args, "task")?.unwrap_or_default();
        if task.trim().is_empty() {
            return Err("`task` is required and must not be empty".into());
        }
        let profile = text_arg(args, "profile")?.filter(|p| !p.trim().is_empty());
        let description = description_arg(args)?;
        let tools = tools_arg(args)?;
        let constraints = match &args["constraints"] {
            Value::Null => Vec::new(),
            value => serde_json::from_value(value.clone())
                .map_err(|_| "`constraints` must be a list of strings".to_string())?,
        };
        let max_turns =
            positive_integer(args, "max_turns")?.map(|n| n.min(u64::from(u32::MAX)) as u32);
        let timeout_s = positive_integer(args, "timeout_s")?;
        let max_cost_usd = match &args["max_cost_usd"] {
            Value::Null => None,
            Value::Number(n) if n.as_f64().is_some_and(|v| v.is_finite() && v >= 0.0) => n.as_f64(),
            other => {
                return Err(format!(
                    "`max_cost_usd` must be a non-negative number, got {other}"
                ))
            }
        };
        let background = match &args["background"] {
            Value::Null => true,
            Value::Bool(b) => *b,
            other => return Err(format!("`background` must be true or false, got {other}")),
        };
        let output_schema = match &args["output_schema"] {
            Value::Null => None,
            schema => Some(
                OutputSchema::new(schema.clone()).map_err(|e| format!("`output_schema`: {e}"))?,
            ),
        };
        Ok(SpawnRequest {
            output_schema,
            task,
            description,
            profile,
            context: match &args["context"] {
                Value::Null => None,
                context => Some(context.clone()),
            },
            constraints,
            system_prompt: text_arg(args, "system_prompt")?,
            tools,
            max_turns,
            max_cost_usd,
            timeout_s,
            background,
        })
    }
}

/// `description` on one line, cut to 80 characters, or `None` when absent or blank.
fn description_arg(args: &Value) -> Result<Option<String>, String> {
    Ok(text_arg(args, "description")?
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .map(|d| {
            if d.chars().count() > 80 {
                d.chars().take(79).chain(['…']).collect()
            } else {
                d
            }
        }))
}

/// `tools`: a list, or one comma-separated string (`"read_file, grep"`).
fn tools_arg(args: &Value) -> Result<Option<Vec<String>>, String> {
    Ok(match &args["tools"] {
        Value::Null => None,
        Value::String(list) => Some(
            list.split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect(),
        ),
        value => Some(serde_json::from_value(value.clone()).map_err(|_| {
            "`tools` must be a list of tool names or a comma-separated string".to_string()
        })?),
    })
}

/// A positive integer argument, or `None` when absent.
fn positive_integer(args: &Value, key: &str) -> Result<Option<u64>, String> {
    match &args[key] {
        Value::Null => Ok(None),
        value => value
            .as_u64()
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(|| format!("`{key}` must be a positive integer")),
    }
}

/// A string argument, or `None` when absent.
pub(crate) fn text_arg(args: &Value, key: &str) -> Result<Option<String>, String> {
    match &args[key] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(format!("`{key}` must be a string, got {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spawn_arguments_are_checked_for_shape() {
        let request = SpawnRequest::parse(
            &json!({"task": "t", "profile": "p", "max_turns": 99_999_999_999u64}),
        )
        .unwrap();
        assert_eq!(request.max_turns, Some(u32::MAX));
        assert!(request.background);
        let shaped = SpawnRequest::parse(
            &json!({"task": "t", "tools": "read_file, grep", "description": "  Check   the docs "}),
        )
        .unwrap();
        assert_eq!(shaped.profile, None);
        assert_eq!(shaped.tools.unwrap(), ["read_file", "grep"]);
        assert_eq!(shaped.description.as_deref(), Some("Check the docs"));
        for (args, error) in [
            (json!([]), "must be a JSON object"),
            (json!({"task": " ", "profile": "p"}), "`task` is required"),
            (
                json!({"task": "t", "profile": "p", "bogus": 1}),
                "unknown argument `bogus`",
            ),
            (
                json!({"task": "t", "profile": "p", "tools": 7}),
                "`tools` must be a list",
            ),
            (
                json!({"task": "t", "profile": "p", "max_turns": 0}),
                "positive integer",
            ),
            (
                json!({"task": "t", "profile": "p", "max_cost_usd": -1}),
                "non-negative",
            ),
            (
                json!({"task": "t", "profile": "p", "background": "no"}),
                "true or false",
            ),
            (
                json!({"task": "t", "output_schema": {"type": 7}}),
                "`output_schema`: not a valid JSON Schema",
            ),
        ] {
            let got = SpawnRequest::parse(&args).unwrap_err();
            assert!(got.contains(error), "{args}: {got}");
        }
    }
}
