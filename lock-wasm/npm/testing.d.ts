// Types of `lock-wasm/testing`: an in-process lock service with a manual clock, for testing
// the code that holds a lock. Its clients are the package's own `LockClient`.
import type { ClientDefaults, LockClient, LockEvent, LockMode, Session, StoreUnavailableReason } from "./index.js";

export interface TestKitOptions {
  /** Fixes the backoff jitter, so a run replays exactly (default 0). A non-negative integer. */
  seed?: number;
  /** `kit.client`'s defaults, as `new LockClient({ defaults })`. */
  defaults?: ClientDefaults;
  /** Receives the events of every session `kit.client` opens. */
  onEvent?: (event: LockEvent) => void;
}

/** The live holder of a key, as the service sees it. */
export interface KitHolder {
  /** The holding session's public name (compare with `session.holderId`); never its id. */
  holderId: string;
  /** The holding session's `owner` label, if it has one. */
  owner?: string;
  fencingToken: number;
  /** Until the lock expires unless renewed, in kit milliseconds. */
  remainingMs: number;
}

/** An in-process lock service on a manual clock, and a client of it. */
export interface TestKit {
  /** A client of this kit: the real `LockClient` API, talking to the kit's service. */
  readonly client: LockClient;
  /** Another client of this kit (no `baseUrl`). */
  createClient(options?: { defaults?: ClientDefaults; onEvent?: (event: LockEvent) => void }): LockClient;
  /** Kit time: milliseconds since `createTestKit` (`handle.deadline` counts in these terms). */
  now(): number;
  /**
   * Moves time forward by `ms`, firing every timer due in order (heartbeats, lock deadlines,
   * backoff sleeps, expiries). Pending promises settle before time moves and after each
   * timer. Ten simulated minutes take milliseconds.
   */
  advance(ms: number): Promise<void>;
  /** Lets pending promises settle without moving time. */
  settle(): Promise<void>;
  /** The live exclusive holder of `key`, or `null` when it is free or held shared. */
  holder(key: string): KitHolder | null;
  /** Every live holder of `key` in either mode, in token order; empty when it is free. */
  holders(key: string): Array<KitHolder & { mode: LockMode }>;
  /** Cuts (`true`) or restores a session's network: its requests fail as a refused connection's do. */
  partition(session: Session, cut: boolean): void;
  /**
   * Makes the service's store unable to write for `reason`: every write (open, heartbeat,
   * close, acquire, release, value) answers 503 `STORE_UNAVAILABLE` and is not applied, until
   * `storeUnavailable(null)`. Acquires ride it out within their budget; heartbeats keep the
   * session until its deadline.
   */
  storeUnavailable(reason: StoreUnavailableReason | null): void;
  /** Ends `key`'s lock whoever holds it, as an operator would; the revoked token, if any. */
  revoke(key: string): number | undefined;
}

/** A fresh kit at time 0. */
export declare function createTestKit(options?: TestKitOptions): Promise<TestKit>;

declare const testing: { createTestKit: typeof createTestKit };
export default testing;
