// Shared holds on the test kit (`lock-wasm/testing`): shared-scenarios.mjs on the kit's
// simulated service and clock. Needs the simulation's service model with shared holds
// (lock-wasm/src/sim/service.rs): against one without them a second shared holder is
// refused, and these fail.
import { test } from "node:test";
import { sharedScenarios } from "./shared-scenarios.mjs";
import { kitEnv } from "./kit-env.mjs";

for (const [name, scenario] of Object.entries(sharedScenarios)) {
  test(`kit, shared holds: ${name}`, async () => {
    const env = await kitEnv();
    await scenario({ ...env, holders: async (key) => env.kit.holders(key) });
  });
}
