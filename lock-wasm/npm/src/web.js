// Browsers, bundlers and Deno: the `--target web` glue, initialised once at import time
// (top-level await). Deno reads the .wasm from disk; everyone else fetches it next to this
// module, which bundlers recognise through the `new URL(..., import.meta.url)` pattern.
import init, * as raw from "./lock_wasm.js";
import { createApi } from "./api.js";

const wasmUrl = new URL("./lock_wasm_bg.wasm", import.meta.url);
if (typeof Deno !== "undefined" && wasmUrl.protocol === "file:") {
  raw.initSync({ module: await Deno.readFile(wasmUrl) });
} else {
  await init({ module_or_path: wasmUrl });
}

const api = createApi(raw);
// The named exports are the keys of `createApi()`'s result (the one list, in api.js):
// scripts/build-npm.sh fills them in at the marker (ESM needs them spelled out statically).
export const { /* @api-names */ } = api;
export default api;
