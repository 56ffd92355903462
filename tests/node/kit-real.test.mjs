// The test kit's scenarios once against a real lock-server (scripts/test-wasm.sh passes its
// URL and admin token): the invariants the kit's suite checks hold against the server too.
import { test } from "node:test";
import { scenarios } from "./kit-scenarios.mjs";
import { realEnv } from "./real-env.mjs";

for (const [name, scenario] of Object.entries(scenarios)) {
  test(`real lock-server: ${name}`, async () => {
    const env = await realEnv();
    try {
      await scenario(env);
    } finally {
      await env.close();
    }
  });
}
