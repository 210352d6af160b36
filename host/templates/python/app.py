"""{{name}}: a warren tool plugin. Edit list_tools and call_tool."""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.tool import ToolError_InvalidInput, ToolSpec

# The example tool, named after the plugin so it cannot clash with another plugin's.
GREET = "{{prefix}}_greet"

SCHEMA = json.dumps({
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
    "additionalProperties": False,
})


class Tool(exports.Tool):
    def list_tools(self):
        return [ToolSpec(GREET, "Greet someone by name.", SCHEMA)]

    def call_tool(self, name, arguments):
        args = json.loads(arguments)
        if name != GREET:
            raise Err(ToolError_InvalidInput(f"unknown tool `{name}`"))
        if not isinstance(args.get("name"), str):
            raise Err(ToolError_InvalidInput("`name` must be a string"))
        return f"Hello, {args['name']}!"
