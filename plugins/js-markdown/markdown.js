// warren plugin in JavaScript: markdown and HTML to plain text, and web pages fetched
// through wasi:http (so capabilities.net decides which hosts are reachable).
// Build: node build.mjs (componentize-js, pinned in package.json / package-lock.json).

import { handle } from "wasi:http/outgoing-handler@0.2.12";
import { Fields, OutgoingRequest } from "wasi:http/types@0.2.12";

const MAX_INPUT = 4 * 1024 * 1024;
/// A fetched page is read up to this many bytes.
const MAX_PAGE = 2 * 1024 * 1024;

/// GETs `url` through wasi:http and returns the body as text.
function fetchPage(url) {
  const match = /^(https?):\/\/([^/?#]+)([^#]*)/.exec(url);
  if (!match) throw { tag: "invalid-input", val: `\`${url}\` is not an http:// or https:// URL` };
  const request = new OutgoingRequest(new Fields());
  request.setScheme({ tag: match[1] === "https" ? "HTTPS" : "HTTP" });
  request.setAuthority(match[2]);
  request.setPathWithQuery(match[3] || "/");
  // `get` gives option<result<result<incoming-response, error-code>>>; an error code can
  // also be thrown by `handle` itself.
  let outcome;
  try {
    const pending = handle(request, undefined);
    pending.subscribe().block();
    outcome = pending.get()?.val;
  } catch (error) {
    outcome = { tag: "err", val: error?.payload ?? error };
  }
  if (!outcome || outcome.tag !== "ok") {
    const code = outcome?.val?.tag ?? String(outcome?.val);
    if (code === "HTTP-request-denied") {
      throw { tag: "failed", val: `denied: ${match[2]} is not in this profile's network allow-list (capabilities.net)` };
    }
    throw { tag: "failed", val: `request to ${match[2]} failed: ${code}` };
  }
  const response = outcome.val;
  const status = response.status();
  const stream = response.consume().stream();
  const chunks = [];
  let size = 0;
  while (size < MAX_PAGE) {
    let chunk;
    try {
      chunk = stream.blockingRead(BigInt(65536));
    } catch {
      break; // closed
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk.subarray(0, Math.min(chunk.length, size - offset)), offset);
    offset += chunk.length;
  }
  if (status >= 400) throw { tag: "failed", val: `${url} answered HTTP ${status}` };
  return new TextDecoder().decode(bytes);
}

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

// Warm-up, run once at build time: componentize-js snapshots the engine after this
// module's top level has run, so the regular expressions above are compiled (and the
// functions' first-run work done) in the snapshot instead of in every fresh instance.
markdownToText("# a **b** _c_ `d` [e](f) ![g](h)\n> i\n- j\n\n\n---\n```\nk\n```");
htmlToText("<head>x</head><p>a&amp;b&#65;<br/></p><li>c</li>");
JSON.parse('{"markdown": "a"}');

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
        name: "fetch_text",
        description: "Fetch a web page (HTTP GET) and return it as plain text.",
        inputSchema: schema("url", "http:// or https:// URL"),
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
      case "fetch_text":
        return htmlToText(fetchPage(argument(argumentsJson, "url")));
      default:
        throw { tag: "invalid-input", val: `unknown tool \`${name}\`` };
    }
  },
};

// The tool entry points too (their first run parses their lazily compiled bodies).
tool.callTool("markdown_to_text", '{"markdown": "# a"}');
tool.listTools();
// componentize-js runs its export glue in a global of its own (its initializer's), and
// SpiderMonkey creates each built-in class of a global on first use. The glue uses
// promises, async functions, strings' methods, typed arrays and DataView on every call,
// so without this every fresh instance would build those classes again. A function
// made by that global's `Function` (reached through a class the glue defines) runs
// there.
Fields.constructor(`
  const bytes = new Uint8Array(8);
  "warm".charCodeAt("warm".length - 1);
  new DataView(bytes.buffer).setUint32(0, 1, true);
  (async () => { await null; })().then(() => {});
`)();
