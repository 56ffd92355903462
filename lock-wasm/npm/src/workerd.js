// Cloudflare Workers (the `workerd` export condition): Workers refuse to compile wasm from
// bytes at run time, so the module is imported as a compiled `WebAssembly.Module` (wrangler's
// default rule for `.wasm` imports; a workerd config lists it as a `wasm` module) and
// instantiated synchronously at import. No I/O at the top level, no `unref`.
import * as raw from "./lock_wasm.js";
import wasmModule from "./lock_wasm_bg.wasm";
import { createApi } from "./api.js";

raw.initSync({ module: wasmModule });

const api = createApi(raw);
// The named exports are the keys of `createApi()`'s result (the one list, in api.js):
// scripts/build-npm.sh fills them in at the marker (ESM needs them spelled out statically).
export const { /* @api-names */ } = api;
export default api;
