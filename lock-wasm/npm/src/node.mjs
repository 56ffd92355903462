// Node, ESM: re-exports the CommonJS build so `import` and `require` share one wasm
// instance (no dual-package hazard: an error class from one is the same class in the other).
import api from "./index.cjs";

// The named exports are the keys of `createApi()`'s result (the one list, in api.js):
// scripts/build-npm.sh fills them in at the marker (ESM needs them spelled out statically).
export const { /* @api-names */ } = api;
export default api;
