// warren's built-in `run_js` tool: runs the JavaScript a model writes (SpiderMonkey,
// through componentize-js). Each call runs in a fresh instance under the calling
// agent's capabilities; files are reached through `fs`, which maps guest paths onto
// the directories the profile grants (wasi:filesystem), and nothing else.
// Build: node build.mjs (componentize-js, pinned in package.json / package-lock.json).

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";
import { getRandomU64 } from "wasi:random/random@0.2.12";

const MAX_STDOUT = 32 * 1024;
const MAX_STDERR = 8 * 1024;
const MAX_VALUE = 8 * 1024;
const MAX_TRACE = 4 * 1024;
const MAX_CODE = 1024 * 1024;
const MAX_STDIN = 1024 * 1024;
const MAX_FILES = 32;
const MAX_FILE_BYTES = 1024 * 1024;
const CODE_NAME = "<code>";

const SCHEMA = JSON.stringify({
  type: "object",
  properties: {
    code: { type: "string", maxLength: MAX_CODE, description: "JavaScript (ES2023) to run as a script. The value of its last expression is returned." },
    stdin: { type: "string", maxLength: MAX_STDIN, description: "Text the code reads as the string `stdin`" },
    files: {
      type: "array",
      items: { type: "string" },
      maxItems: MAX_FILES,
      description: "Guest paths of text files to read before the code runs, given to it as the object `files` (path -> text)",
    },
  },
  required: ["code"],
  additionalProperties: false,
});

const DESCRIPTION =
  "Run JavaScript (ES2023) in a fresh sandbox and return what it printed with console.log / " +
  "console.error, the value of its last expression and any exception with its stack. Files: " +
  "`fs.readFile(path)`, `fs.writeFile(path, text)`, `fs.appendFile(path, text)`, " +
  "`fs.readdir(path)`, `fs.exists(path)` over only the directories this agent is granted, at " +
  "their guest paths (e.g. /project read-only, /scratch writable); no network, no timers that " +
  "outlive the call. Nothing persists between calls.";

/// A text sink keeping at most `cap` characters and counting the rest.
class Capped {
  constructor(cap) {
    this.cap = cap;
    this.parts = [];
    this.kept = 0;
    this.dropped = 0;
  }
  write(text) {
    const room = this.cap - this.kept;
    if (room > 0) {
      this.parts.push(text.length > room ? text.slice(0, room) : text);
      this.kept += Math.min(room, text.length);
    }
    if (text.length > room) this.dropped += text.length - Math.max(room, 0);
  }
  text() {
    const kept = this.parts.join("");
    return this.dropped ? `${kept}\n[... ${this.dropped} more characters cut: output is capped at ${this.cap}]` : kept;
  }
}

function cut(text, cap) {
  return text.length <= cap ? text : `${text.slice(0, cap)} [... ${text.length - cap} more characters cut]`;
}

function show(value) {
  if (typeof value === "string") return value;
  try {
    const json = JSON.stringify(value);
    if (json !== undefined) return json;
  } catch {}
  return String(value);
}

// ---- files: guest paths onto the granted directories --------------------------------

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function normalize(path) {
  if (typeof path !== "string" || !path.startsWith("/")) {
    throw new TypeError(`fs: ${JSON.stringify(path)} is not an absolute guest path (e.g. /project/data.csv)`);
  }
  const parts = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (parts.length === 0) throw new Error(`fs: ${path} leaves the root`);
      parts.pop();
    } else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/// The granted directory holding `path` and the path inside it.
function resolve(path) {
  const full = normalize(path);
  let best = null;
  for (const [descriptor, guest] of getDirectories()) {
    const root = normalize(guest);
    const inside = root === "/" ? full.slice(1) : full === root ? "" : full.startsWith(`${root}/`) ? full.slice(root.length + 1) : null;
    if (inside !== null && (!best || root.length > best.root.length)) best = { descriptor, root, inside };
  }
  if (!best) throw fsError(path, "no-entry", "not in a granted directory (only this agent's granted directories are visible)");
  return best;
}

function fsError(path, code, detail) {
  const error = new Error(`${path}: ${detail ?? code}`);
  error.name = "FsError";
  error.code = code;
  return error;
}

function wasi(path, action) {
  try {
    return action();
  } catch (error) {
    const code = error?.payload ?? error?.message ?? String(error);
    const detail = {
      "no-entry": "no such file or directory",
      "access": "denied by the sandbox",
      "not-permitted": "denied by the sandbox (read-only grant?)",
      "read-only": "read-only grant",
      "is-directory": "is a directory",
      "not-directory": "not a directory",
    }[code];
    throw fsError(path, code, detail);
  }
}

function open(path, openFlags, flags) {
  const { descriptor, inside } = resolve(path);
  if (inside === "") return { file: descriptor, owned: false };
  return { file: wasi(path, () => descriptor.openAt({ symlinkFollow: true }, inside, openFlags, flags)), owned: true };
}

function readBytes(path, limit) {
  const { file } = open(path, {}, { read: true });
  const chunks = [];
  let size = 0;
  for (;;) {
    const [chunk, end] = wasi(path, () => file.read(BigInt(65536), BigInt(size)));
    chunks.push(chunk);
    size += chunk.length;
    if (size > limit) throw fsError(path, "too-large", `larger than ${limit} bytes`);
    if (end || chunk.length === 0) break;
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytes;
}

function writeText(path, text, append) {
  const { file } = open(path, { create: true, truncate: !append }, { write: true });
  const bytes = encoder.encode(String(text));
  let offset = append ? Number(wasi(path, () => file.stat()).size) : 0;
  let written = 0;
  while (written < bytes.length) {
    const n = Number(wasi(path, () => file.write(bytes.subarray(written, written + 65536), BigInt(offset))));
    written += n;
    offset += n;
  }
  return written;
}

const fs = Object.freeze({
  readFile: (path) => decoder.decode(readBytes(path, 64 * 1024 * 1024)),
  writeFile: (path, text) => writeText(path, text, false),
  appendFile: (path, text) => writeText(path, text, true),
  readdir(path) {
    const { file } = open(path, { directory: true }, { read: true });
    const stream = wasi(path, () => file.readDirectory());
    const names = [];
    for (let entry = stream.readDirectoryEntry(); entry; entry = stream.readDirectoryEntry()) names.push(entry.name);
    return names.sort();
  },
  exists(path) {
    try {
      const { descriptor, inside } = resolve(path);
      if (inside !== "") descriptor.statAt({ symlinkFollow: true }, inside);
      return true;
    } catch {
      return false;
    }
  },
});

// ---- running the code ------------------------------------------------------------------

function errorOf(error) {
  if (!(error instanceof Error)) {
    return { type: "thrown value", message: cut(show(error), MAX_TRACE), traceback: "" };
  }
  // SpiderMonkey's frames of eval'd code read `name@<file> line N > eval:L:C`: keep those.
  const frames = String(error.stack ?? "")
    .split("\n")
    .filter((frame) => frame.includes("> eval:") || frame.includes("> Function:"))
    .map((frame) => frame.replace(/@.*> (eval|Function):/, `@${CODE_NAME}:`))
    .reduce((kept, frame) => {
      // Deep recursion: a repeated frame once, with its count.
      const last = kept[kept.length - 1];
      if (last && last.frame === frame) last.count += 1;
      else kept.push({ frame, count: 1 });
      return kept;
    }, [])
    .map(({ frame, count }) => (count > 1 ? `${frame}\n  [previous frame repeated ${count - 1} more times]` : frame));
  let message = String(error.message);
  if (/too much recursion/i.test(message)) message += " (the sandbox bounds the call stack)";
  if (/out of memory/i.test(message)) message += ": the sandbox's memory limit (limits.memory_mb) was reached";
  return { type: error.name || "Error", message: cut(message, MAX_TRACE), traceback: cut(frames.join("\n"), MAX_TRACE) };
}

function asValue(value) {
  try {
    const json = JSON.stringify(value);
    if (json !== undefined && json.length <= MAX_VALUE) return JSON.parse(json);
  } catch {}
  return { repr: cut(String(value), MAX_VALUE) };
}

/// Math.random from a state drawn from the host's random source on first use in this
/// call (xorshift128+): never the snapshot's.
function seedRandom() {
  Math.random = function random() {
    let s0 = getRandomU64() | 1n;
    let s1 = getRandomU64() | 2n;
    const mask = (1n << 64n) - 1n;
    Math.random = function random() {
      let x = s0;
      const y = s1;
      s0 = y;
      x = (x ^ (x << 23n)) & mask;
      s1 = x ^ y ^ (x >> 17n) ^ (y >> 26n);
      return Number((s1 + y) & ((1n << 53n) - 1n)) / 2 ** 53;
    };
    return Math.random();
  };
}

function run(code, stdin, files) {
  const stdout = new Capped(MAX_STDOUT);
  const stderr = new Capped(MAX_STDERR);
  const line = (sink) => (...items) => sink.write(`${items.map(show).join(" ")}\n`);
  const saved = globalThis.console;
  globalThis.console = { log: line(stdout), info: line(stdout), debug: line(stdout), warn: line(stderr), error: line(stderr) };
  globalThis.stdin = stdin;
  globalThis.files = files;
  globalThis.fs = fs;
  seedRandom();
  const result = {};
  try {
    const value = (0, eval)(code);
    if (value !== undefined) result.value = asValue(value);
  } catch (error) {
    result.error = errorOf(error);
  } finally {
    globalThis.console = saved;
  }
  result.stdout = stdout.text();
  result.stderr = stderr.text();
  return result;
}

function invalid(message) {
  return { tag: "invalid-input", val: message };
}

function arguments_(json) {
  let args;
  try {
    args = JSON.parse(json);
  } catch (error) {
    throw invalid(`arguments are not valid JSON: ${error.message}`);
  }
  if (typeof args?.code !== "string" || args.code.length > MAX_CODE) {
    throw invalid(`\`code\` must be a string of JavaScript source of at most ${MAX_CODE} characters`);
  }
  const stdin = args.stdin ?? "";
  if (typeof stdin !== "string" || stdin.length > MAX_STDIN) throw invalid(`\`stdin\` must be a string of at most ${MAX_STDIN} characters`);
  const paths = args.files ?? [];
  if (!Array.isArray(paths) || paths.length > MAX_FILES) throw invalid(`\`files\` must be a list of at most ${MAX_FILES} guest paths`);
  const files = {};
  for (const path of paths) {
    try {
      files[path] = decoder.decode(readBytes(path, MAX_FILE_BYTES));
    } catch (error) {
      throw invalid(`\`files\`: cannot read ${path}: ${error.message}`);
    }
  }
  return { code: args.code, stdin, files };
}

export const tool = {
  listTools() {
    return [{ name: "run_js", description: DESCRIPTION, inputSchema: SCHEMA }];
  },
  callTool(name, argumentsJson) {
    if (name !== "run_js") throw invalid(`unknown tool \`${name}\``);
    const { code, stdin, files } = arguments_(argumentsJson);
    return JSON.stringify(run(code, stdin, files));
  },
};

// Warm-up at build time: the snapshot then holds the parsed entry points and the
// built-in classes a first call would create.
tool.callTool("run_js", JSON.stringify({ code: "const x = [1, 2, 3].map((n) => n * n); console.log(JSON.stringify({ s: x.reduce((a, b) => a + b) })); /\\d+/.exec('a1'); x.length" }));
tool.callTool("run_js", JSON.stringify({ code: "null.x" }));
tool.listTools();
// componentize-js runs its export glue in a global of its own, and SpiderMonkey creates
// each built-in class of a global on first use: the glue uses promises, strings'
// methods, typed arrays and DataView on every call, so without this every fresh
// instance would build them again. A function made by that global's `Function`
// (reached through a function the glue defines) runs there.
getDirectories.constructor(`
  const bytes = new Uint8Array(8);
  "warm".charCodeAt("warm".length - 1);
  new DataView(bytes.buffer).setUint32(0, 1, true);
  new TextEncoder().encode("warm");
  (async () => { await null; })().then(() => {});
`)();
