// The test kit's scenarios under Bun (`bun test`): `lock-wasm/testing` from ESM and CommonJS.
import { test, expect } from "bun:test";
import { createTestKit } from "lock-wasm/testing";
import { scenarios } from "./kit-scenarios.mjs";
import { kitEnv } from "./kit-env.mjs";

for (const [name, scenario] of Object.entries(scenarios)) {
  test(`kit (Bun): ${name}`, async () => {
    await scenario(await kitEnv());
  });
}

test("kit (Bun): require('lock-wasm/testing') is the ESM kit", async () => {
  expect(require("lock-wasm/testing").createTestKit).toBe(createTestKit);
  const kit = await createTestKit({ seed: 5 });
  const session = await kit.client.openSession({ ttlMs: 3000 });
  const handle = await session.acquire("jobs/1");
  await kit.advance(10 * 60_000);
  expect(handle.isLost).toBe(false);
  expect(kit.holder("jobs/1").fencingToken).toBe(handle.fencingToken);
});
