// `lock-wasm/testing` in Node (and Bun), ESM: re-exports the CommonJS build, so `import` and
// `require` share one kit module and one main module.
import kit from "./index.cjs";

export const { createTestKit } = kit;
export default kit;
