// The test kit's scenarios under Deno (`deno test deno-kit.mjs`, scripts/test-wasm.sh).
import { createTestKit } from "lock-wasm/testing";
import assert from "node:assert/strict";
import { scenarios } from "./kit-scenarios.mjs";
import { kitEnv } from "./kit-env.mjs";

for (const [name, scenario] of Object.entries(scenarios)) {
  Deno.test(`kit (Deno): ${name}`, async () => {
    await scenario(await kitEnv());
  });
}

Deno.test("kit (Deno): ten simulated minutes in one advance keep the lock", async () => {
  const kit = await createTestKit({ seed: 7 });
  const session = await kit.client.openSession({ ttlMs: 3000 });
  const handle = await session.acquire("jobs/1", { ttlMs: 5000 });
  await kit.advance(10 * 60_000);
  assert.equal(handle.isLost, false);
  assert.equal(kit.holder("jobs/1").fencingToken, handle.fencingToken);
  await session.close();
});
