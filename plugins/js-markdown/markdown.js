// warren plugin in JavaScript: markdown and HTML to plain text.
// Build: node build.mjs (componentize-js, pinned in package.json / package-lock.json).

const MAX_INPUT = 4 * 1024 * 1024;

const schema = (field, description) =>
  JSON.stringify({
    type: "object",
    properties: { [field]: { type: "string", description } },
    required: [field],
    additionalProperties: false,
  });

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };

function decodeEntities(text) {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, code) => {
    if (code[0] === "#") {
      const n = code[1] === "x" || code[1] === "X" ? parseInt(code.slice(2), 16) : parseInt(code.slice(1), 10);
      return Number.isFinite(n) ? String.fromCodePoint(n) : whole;
    }
    return ENTITIES[code.toLowerCase()] ?? whole;
  });
}

function markdownToText(markdown) {
  return markdown
    .replace(/```[^\n]*\n([\s\S]*?)```/g, "$1")
    .replace(/`([^`]+)`/g, "$1")
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/\[([^\]]+)\]\(([^)]+)\)/g, "$1 ($2)")
    .replace(/^#{1,6}\s+/gm, "")
    .replace(/^\s*>\s?/gm, "")
    .replace(/^\s*[-*+]\s+/gm, "• ")
    .replace(/(\*\*|__)(.+?)\1/g, "$2")
    .replace(/(\*|_)(.+?)\1/g, "$2")
    .replace(/^\s*([-*_]\s*){3,}$/gm, "")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

function htmlToText(html) {
  return decodeEntities(
    html
      .replace(/<(script|style|head)[\s\S]*?<\/\1>/gi, "")
      .replace(/<br\s*\/?>/gi, "\n")
      .replace(/<li[^>]*>/gi, "\n• ")
      .replace(/<\/(p|div|h[1-6]|tr|section|article|ul|ol|table)>/gi, "\n\n")
      .replace(/<[^>]+>/g, "")
  )
    .replace(/[ \t]+/g, " ")
    .replace(/ *\n */g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

function argument(argumentsJson, field) {
  let args;
  try {
    args = JSON.parse(argumentsJson);
  } catch (error) {
    throw { tag: "invalid-input", val: `arguments are not valid JSON: ${error.message}` };
  }
  const value = args === null || typeof args !== "object" ? undefined : args[field];
  if (typeof value !== "string") {
    throw { tag: "invalid-input", val: `\`${field}\` must be a string` };
  }
  if (value.length > MAX_INPUT) {
    throw { tag: "invalid-input", val: `\`${field}\` is longer than ${MAX_INPUT} characters` };
  }
  return value;
}

export const tool = {
  listTools() {
    return [
      {
        name: "markdown_to_text",
        description: "Turn markdown into readable plain text (links kept as 'text (url)').",
        inputSchema: schema("markdown", "Markdown source"),
      },
      {
        name: "html_to_text",
        description: "Turn an HTML page into readable plain text (scripts and styles dropped, entities decoded).",
        inputSchema: schema("html", "HTML source"),
      },
    ];
  },
  callTool(name, argumentsJson) {
    switch (name) {
      case "markdown_to_text":
        return markdownToText(argument(argumentsJson, "markdown"));
      case "html_to_text":
        return htmlToText(argument(argumentsJson, "html"));
      default:
        throw { tag: "invalid-input", val: `unknown tool \`${name}\`` };
    }
  },
};
