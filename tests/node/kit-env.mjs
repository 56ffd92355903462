// The scenarios' environment on the test kit (`lock-wasm/testing`): time is the kit's, moved
// by `kit.advance`, so the scenarios' bounds are simulated milliseconds.
import { createTestKit } from "lock-wasm/testing";

const STEP_MS = 25;

export async function kitEnv(seed = 1) {
  const kit = await createTestKit({ seed });
  let keys = 0;
  return {
    kit,
    async openSession(options, defaults) {
      const client = defaults === undefined ? kit.client : kit.createClient({ defaults });
      return client.openSession(options);
    },
    async until(predicate, boundMs, what) {
      const until = kit.now() + boundMs;
      for (;;) {
        await kit.settle();
        if (await predicate()) return;
        if (kit.now() >= until) throw new Error(`not within ${boundMs} kit ms: ${what}`);
        await kit.advance(STEP_MS);
      }
    },
    partition: (session, cut) => kit.partition(session, cut),
    revoke: async (key) => kit.revoke(key),
    holder: async (key) => kit.holder(key),
    key: (prefix) => `${prefix}/${(keys += 1)}`,
  };
}
