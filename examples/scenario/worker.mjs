// The worker side of the paused-worker scenario (the test side is scenario.mjs): one job that
// takes a lock and writes to a resource through a fenced write, driven by the test over
// stdin/stdout, one JSON object per line. Each example's worker.mjs calls `runWorker` with
// the lock-wasm module it installed and its own fenced write.
//
// Environment: LOCK_URL (lock-server), LOCK_KEY (the key to lock and to write under).
// Messages out: {event: "acquired", fencingToken, isLost} once the lock is held, or
// {event: "notGranted"}; then one answer per command.
// Commands in: {do: "write", value} → {event: "written"} or {event: "fencedOut", code};
// {do: "awaitLoss"} → {event: "loss", lostEvent, isLost}. End of input: release, close, exit.
import { createInterface } from "node:readline";
import { setTimeout as delay } from "node:timers/promises";

// Short leases keep the scenario quick: a frozen holder's lock expires a few seconds after
// its last heartbeat (the session TTL bounds it too; heartbeats go every TTL/3).
const TTL_MS = 3000;
// Patient enough to outwait a frozen holder's lease on a loaded machine: the server holds
// each attempt until the key frees up (waitMs), for up to two minutes in all.
const PATIENT = { waitMs: 10_000, totalBudgetMs: 120_000, maxAttempts: 100 };
// How long `awaitLoss` waits for the `lost` event: a bound against hanging, not a timing
// assertion (the event comes at the first heartbeat tick after the pause).
const LOSS_BOUND_MS = 60_000;

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/**
 * `sdk`: the lock-wasm module (`LockClient`, `FencedOutError`). `write(handle, value)`: the
 * example's fenced write, which rejects with a FencedOutError when the resource refuses it.
 */
export async function runWorker({ LockClient, FencedOutError }, write) {
  const key = process.env.LOCK_KEY;
  const session = await new LockClient({ baseUrl: process.env.LOCK_URL }).openSession({ ttlMs: TTL_MS });
  let handle;
  let markLost;
  const lost = new Promise((resolve) => (markLost = resolve));
  session.onEvent((event) => {
    const mine = handle && event.key === handle.key && event.fencingToken === handle.fencingToken;
    if (event.type === "lost" && mine) markLost(true);
  });

  handle = await session.acquire(key, { ttlMs: TTL_MS, policy: PATIENT });
  if (handle === undefined) {
    send({ event: "notGranted" });
    await session.close();
    return;
  }
  // A careful job checks its lock right before the side effect. The pause this scenario
  // injects falls after that check: only the resource's fence can stop the late write.
  send({ event: "acquired", fencingToken: handle.fencingToken, isLost: handle.isLost });

  for await (const line of createInterface({ input: process.stdin })) {
    const command = JSON.parse(line);
    if (command.do === "write") {
      send(await attempt(() => write(handle, command.value), FencedOutError));
    } else if (command.do === "awaitLoss") {
      // The event first; the handle's state is read only after it (or after the bound).
      const lostEvent = await Promise.race([lost, delay(LOSS_BOUND_MS, false, { ref: false })]);
      send({ event: "loss", lostEvent, isLost: handle.isLost });
    } else {
      throw new Error(`unknown command ${line}`);
    }
  }
  await session.release(handle);
  await session.close();
}

async function attempt(sideEffect, FencedOutError) {
  try {
    await sideEffect();
    return { event: "written" };
  } catch (err) {
    // Fenced out: a newer holder owns the resource now. Stop; never retry the side effect.
    if (err instanceof FencedOutError) return { event: "fencedOut", code: err.code };
    throw err;
  }
}
