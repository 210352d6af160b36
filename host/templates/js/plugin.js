// {{name}}: a warren tool plugin. Edit listTools and callTool.

export const tool = {
  listTools() {
    return [
      {
        name: "greet",
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
    if (name !== "greet") throw { tag: "invalid-input", val: `unknown tool \`${name}\`` };
    if (typeof args.name !== "string") throw { tag: "invalid-input", val: "`name` must be a string" };
    return `Hello, ${args.name}!`;
  },
};
