// Node, ESM: re-exports the CommonJS build so `import` and `require` share one wasm
// instance (no dual-package hazard: an error class from one is the same class in the other).
import api from "./index.cjs";

export const {
  LockClient,
  Session,
  LockHandle,
  LockError,
  ContentionError,
  NotLeaderError,
  ValidationError,
  SessionLostError,
  LockLostError,
  FencedOutError,
  ErrorCode,
} = api;
export default api;
