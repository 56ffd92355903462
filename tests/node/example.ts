// The TypeScript example: type-checked with `tsc --noEmit` against the packed package's
// .d.ts, then compiled and run by scripts/test-wasm.sh (the emitted code is what
// `await using` becomes on Node 20).
import {
  LockClient,
  LockError,
  ErrorCode,
  type LockEvent,
  type LockHandle,
  type AcquireOptions,
} from "lock-wasm";

declare const process: { env: Record<string, string | undefined> };

const client = new LockClient({
  baseUrl: process.env.LOCK_URL ?? "http://127.0.0.1:7878",
  defaults: { ttlMs: 5000, policy: { baseBackoffMs: 50, maxBackoffMs: 2000, totalBudgetMs: 10_000 } },
  onEvent: (event: LockEvent) => {
    if (event.type === "lost") console.warn(`lost ${event.key} (token ${event.fencingToken})`);
  },
});

async function main(): Promise<void> {
  await using session = await client.openSession({ ttlMs: 15_000, owner: "example" });
  const key = `example/${Date.now()}`;
  const options: AcquireOptions = { ttlMs: 5000, signal: AbortSignal.timeout(30_000) };
  {
    await using handle = await session.acquire(key, options);
    if (handle === undefined) throw new Error("not granted within the budget");
    const token: number = handle.fencingToken;
    const deadline: number = handle.deadline;
    console.log(`holding ${handle.key} with token ${token} until ${new Date(deadline).toISOString()}`);
  }
  const state = await (await fetch(`${process.env.LOCK_URL}/v1/locks/${encodeURIComponent(key)}`)).json();
  if (state.holder !== null) throw new Error("await using did not release the lock");

  const total = await session.using(key, { ttlMs: 2000 }, async (handle: LockHandle, signal: AbortSignal) => {
    signal.throwIfAborted();
    return handle.fencingToken;
  });
  try {
    await session.acquire("", {});
  } catch (err) {
    if (!(err instanceof LockError) || err.code !== ErrorCode.VALIDATION_FAILED) throw err;
  }
  console.log(`example ok: released by await using, using() returned ${total}`);
}

await main();
