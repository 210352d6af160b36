// Builds {{name}}.wasm with the componentize-js API. Run with: ./build.sh
import { componentize } from "@bytecodealliance/componentize-js";
import { writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const { component } = await componentize({
  sourcePath: resolve(here, "plugin.js"),
  witPath: resolve(here, "wit"),
  worldName: "warren:plugin/plugin",
});
await writeFile(resolve(here, "{{name}}.wasm"), component);
