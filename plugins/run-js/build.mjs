// Builds warren's built-in `run_js` tool with the componentize-js API (jco 1.35's `componentize`
// subcommand is broken). Run with: node plugins/run-js/build.mjs [OUT]
import { componentize } from "@bytecodealliance/componentize-js";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const out = resolve(process.argv[2] ?? `${root}/target/wasm/run-js.wasm`);

const { component } = await componentize({
  sourcePath: resolve(here, "run.js"),
  witPath: resolve(root, "wit"),
  worldName: "warren:plugin/plugin",
  disableFeatures: [],
});
await mkdir(dirname(out), { recursive: true });
await writeFile(out, component);
console.log(`wrote ${out} (${component.length} bytes)`);
