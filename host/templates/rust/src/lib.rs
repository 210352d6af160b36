//! {{name}}: a warren tool plugin. Edit `list_tools` and `call_tool`.

wit_bindgen::generate!({ path: "wit", world: "warren:plugin/plugin", generate_all });

use exports::warren::plugin::tool::{Guest, ToolError, ToolSpec};

/// The example tool, named after the plugin so it cannot clash with another plugin's.
const GREET: &str = "{{prefix}}_greet";

struct Plugin;

impl Guest for Plugin {
    fn list_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: GREET.into(),
            description: "Greet someone by name.".into(),
            input_schema: r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}"#.into(),
        }]
    }

    fn call_tool(name: String, arguments: String) -> Result<String, ToolError> {
        let args: serde_json::Value =
            serde_json::from_str(&arguments).map_err(|e| ToolError::InvalidInput(e.to_string()))?;
        match name.as_str() {
            GREET => match args["name"].as_str() {
                Some(who) => Ok(format!("Hello, {who}!")),
                None => Err(ToolError::InvalidInput("`name` must be a string".into())),
            },
            other => Err(ToolError::InvalidInput(format!("unknown tool `{other}`"))),
        }
    }
}

export!(Plugin);
