// Shared holds against a real lock-server (scripts/test-wasm.sh passes its URL):
// shared-scenarios.mjs, the same invariants the kit's suite checks. Needs a lock-server
// with shared holds (L4 `mode`/`limit`, L7 `holders`): an older one refuses a shared
// acquire, and these fail.
import { test } from "node:test";
import { sharedScenarios } from "./shared-scenarios.mjs";
import { realEnv } from "./real-env.mjs";
import { lockState } from "./helpers.mjs";

// L7's holders, each with the key's mode (L7 names the mode once, for the key).
async function holders(key) {
  const state = await lockState(key);
  return (state.holders ?? []).map((holder) => ({ ...holder, mode: state.mode }));
}

for (const [name, scenario] of Object.entries(sharedScenarios)) {
  test(`real lock-server, shared holds: ${name}`, async () => {
    const env = await realEnv();
    try {
      await scenario({ ...env, holders });
    } finally {
      await env.close();
    }
  });
}
