// {{name}}: a warren tool plugin. Edit listTools and callTool.

// The example tool, named after the plugin so it cannot clash with another plugin's.
const GREET = "{{prefix}}_greet";

export const tool = {
  listTools() {
    return [
      {
        name: GREET,
        description: "Greet someone by name.",
        inputSchema: JSON.stringify({
          type: "object",
          properties: { name: { type: "string" } },
          required: ["name"],
          additionalProperties: false,
        }),
      },
    ];
  },
  callTool(name, argumentsJson) {
    const args = JSON.parse(argumentsJson);
    if (name !== GREET) throw { tag: "invalid-input", val: `unknown tool \`${name}\`` };
    if (typeof args.name !== "string") throw { tag: "invalid-input", val: "`name` must be a string" };
    return `Hello, ${args.name}!`;
  },
};
