// `lock-wasm/testing`: an in-process lock service on a manual clock, for testing the code
// that holds a lock (what it does when the lock is lost mid-job, when the budget runs out,
// when two workers race) without a lock-server and without real time.
//
// The service is the simulation's model of lock-server in its own wasm module (`RawKit`,
// lock-wasm/src/wasm/testkit.rs); the clients are this package's own `LockClient` class over
// the kit's raw clients, so the code under test sees the real API and the real errors.
//
// This file is ESM; scripts/build-npm.sh derives the CommonJS copy (`testing.cjs`) from it
// by rewriting the single `export` line, as it does for api.js.

// One macrotask turn: every pending promise chain (microtasks) runs before it ends. The
// kit's requests and timers complete in microtasks, so after this nothing of the SDK's or
// of code awaiting it is left to run until time moves. setImmediate where it exists (Node,
// Bun), else a MessageChannel message (Deno, browsers, Workers): setTimeout(0) would be
// clamped to 4 ms once nested, and a long `advance` nests thousands of them.
function macrotask() {
  if (typeof setImmediate === "function") return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(null);
  });
}

/**
 * Builds the kit's API over its initialised wasm-bindgen module (`raw.RawKit`) and this
 * package's main API (whose hidden `clientOver` makes LockClients over other raw clients).
 */
export function createTestKitApi(raw, api) {
  const clientOver = api[Symbol.for("lock-wasm.clientOver")];
  const { Session, ValidationError } = api;

  function invalid(field, message) {
    return new ValidationError(`${field}: ${message}`, { field });
  }

  function nonNegative(value, field) {
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
      throw invalid(field, "must be a non-negative number of milliseconds");
    }
    return value;
  }

  function keyOf(key) {
    if (typeof key !== "string") throw invalid("key", "must be a string");
    return key;
  }

  /** An in-process lock service with a manual clock, and a client of it. */
  class TestKit {
    #raw;
    // Calls to advance() run one after another, never interleaved.
    #advancing = Promise.resolve();
    constructor(rawKit, clientOptions) {
      this.#raw = rawKit;
      /** A LockClient of this kit (the real API), built with createTestKit's options. */
      this.client = this.createClient(clientOptions);
    }

    /** Another LockClient of this kit: `{ defaults?, onEvent? }` (no baseUrl). */
    createClient(options) {
      return clientOver((rest) => this.#raw.client(rest), options);
    }

    /** The kit's time: milliseconds since createTestKit (handle.deadline is in these terms). */
    now() {
      return this.#raw.nowMs();
    }

    /** Lets every pending promise settle without moving time. */
    async settle() {
      await macrotask();
    }

    /**
     * Moves time forward by `ms`, firing every timer due (heartbeats, lock deadlines, backoff
     * sleeps, server-side expiries) in order. Pending promises settle before time moves and
     * again after each timer, so whatever a timer starts runs before the next one fires.
     */
    advance(ms) {
      nonNegative(ms, "ms");
      const run = this.#advancing.then(() => this.#advance(ms));
      this.#advancing = run.catch(() => {});
      return run;
    }

    async #advance(ms) {
      await this.settle();
      const target = this.#raw.nowMs() + ms;
      while (this.#raw.fireNextTimer(target)) {
        await this.settle();
      }
      this.#raw.advanceTo(target);
      await this.settle();
    }

    /**
     * The live exclusive holder of `key` as the service's L7 shows it: `{ holderId, owner?,
     * fencingToken, remainingMs }`, or `null` when the key is free or held shared.
     */
    holder(key) {
      return this.#raw.holder(keyOf(key));
    }

    /**
     * Every live holder of `key` in either mode, in token order: `[{ holderId, owner?,
     * fencingToken, remainingMs, mode }]`, empty when the key is free.
     */
    holders(key) {
      return this.#raw.holders(keyOf(key));
    }

    /** Cuts (`true`) or restores (`false`) a session's network path: its requests then fail
     * as a refused connection makes them fail. */
    partition(session, cut) {
      if (!(session instanceof Session)) throw invalid("session", "must be a Session of this kit");
      if (typeof cut !== "boolean") throw invalid("cut", "must be a boolean");
      this.#raw.partition(session.id, cut);
    }

    /** Makes the service's store unable to write (`reason`, e.g. `"disk_full"`): every write
     * answers 503 STORE_UNAVAILABLE and is not applied, until `storeUnavailable(null)`. */
    storeUnavailable(reason) {
      if (reason !== null && typeof reason !== "string") throw invalid("reason", "must be a string or null");
      if (!this.#raw.storeUnavailable(reason ?? undefined)) throw invalid("reason", `unknown reason ${reason}`);
    }

    /** Ends `key`'s lock whoever holds it, as an operator's revoke would. Returns the revoked
     * fencing token, or `undefined` when the key was free. */
    revoke(key) {
      return this.#raw.revoke(keyOf(key));
    }
  }

  /**
   * `await createTestKit({ seed, defaults, onEvent })`: a fresh service at time 0. `seed`
   * fixes the backoff jitter, so a run replays exactly; `defaults` and `onEvent` are those of
   * `new LockClient(...)` and shape `kit.client`.
   */
  async function createTestKit(options) {
    if (options !== undefined && (options === null || typeof options !== "object")) {
      throw invalid("options", "must be an object");
    }
    const { seed = 0, ...clientOptions } = options ?? {};
    if (!Number.isSafeInteger(seed) || seed < 0) throw invalid("seed", "must be a non-negative integer");
    return new TestKit(new raw.RawKit(seed), clientOptions);
  }

  return { createTestKit };
}
