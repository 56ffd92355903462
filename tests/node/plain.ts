// Type-checked with a plain `lib` (ES2022 + DOM, no disposable lib): the package's types
// must not demand extra compiler settings from projects that do not use `await using`.
import {
  LockClient,
  ForbiddenError,
  UnauthorizedError,
  ErrorCode,
  isLockError,
  type LockHandle,
  type LockMode,
  type LostReason,
  type Semaphore,
} from "lock-wasm";

const client = new LockClient({ baseUrl: "http://127.0.0.1:7878" });

export async function token(key: string): Promise<number | undefined> {
  const session = await client.openSession();
  const handle: LockHandle | undefined = await session.acquire(key, { ttlMs: 5000 });
  const result = handle?.fencingToken;
  if (handle) await session.release(handle);
  await session.close();
  return result;
}

// A server with an auth file: the `token` option, the public `holderId`, and the classes of
// the two credential refusals.
export async function holderOf(baseUrl: string, bearer: string, key: string): Promise<string> {
  const session = await new LockClient({ baseUrl, token: bearer }).openSession();
  try {
    await session.acquire(key);
    return session.holderId;
  } catch (err) {
    if (err instanceof ForbiddenError || err instanceof UnauthorizedError) {
      const code: "FORBIDDEN" | "UNAUTHORIZED" = err.code === ErrorCode.FORBIDDEN ? "FORBIDDEN" : "UNAUTHORIZED";
      throw new Error(`refused: ${code}`);
    }
    throw err;
  } finally {
    await session.close();
  }
}

// `isLockError` narrows to a union discriminated on `code`: LOCK_LOST makes the error a
// LockLostError (with its `reason`), and NOT_GRANTED one without.
export function lostReason(err: unknown): LostReason | undefined {
  if (!isLockError(err)) return undefined;
  if (err.code === "NOT_GRANTED") {
    // @ts-expect-error a NotGrantedError has no `reason`
    return err.reason;
  }
  return err.code === "LOCK_LOST" ? err.reason : undefined;
}

// Shared holds: the helpers, a semaphore, the handle's mode and limit, and the narrowing of
// the two shared-hold refusals (LIMIT_MISMATCH carries the limit in force).
export async function readers(session: Awaited<ReturnType<LockClient["openSession"]>>, key: string) {
  const reader: LockHandle | undefined = await session.read(key, { ttlMs: 5000 });
  const mode: LockMode | undefined = reader?.mode;
  // @ts-expect-error the helpers set `mode` themselves
  await session.read(key, { mode: "exclusive" });
  const slots: Semaphore = client.semaphore(key, 2);
  const limit: number | undefined = (await slots.acquire({ ttlMs: 5000 }))?.limit;
  const nested: LockHandle | undefined = reader?.nest({ mode: "shared" });
  return { mode, limit, nested, written: await session.write(key), one: await session.acquire(key, { mode: "shared", limit: 3 }) };
}

export function limitInForce(err: unknown): number | null | undefined {
  if (!isLockError(err)) return undefined;
  if (err.code === "UPGRADE_NOT_ALLOWED") {
    // @ts-expect-error an UpgradeNotAllowedError has no `limit`
    return err.limit;
  }
  return err.code === "LIMIT_MISMATCH" ? err.limit : undefined;
}
