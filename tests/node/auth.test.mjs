// The package against a lock-server with an auth file (scripts/test-wasm.sh starts it and
// passes its URL, a client's token and that client's key prefix): the `token` option is
// sent as the bearer; 401 and 403 reject with UnauthorizedError / ForbiddenError, never
// retryable.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  LockClient,
  UnauthorizedError,
  ForbiddenError,
  ValidationError,
  ErrorCode,
} from "lock-wasm";

const baseUrl = process.env.LOCK_AUTH_URL;
const token = process.env.LOCK_AUTH_TOKEN;
const prefix = process.env.LOCK_AUTH_PREFIX;
assert.ok(baseUrl && token && prefix, "LOCK_AUTH_URL/TOKEN/PREFIX (scripts/test-wasm.sh sets them)");

const key = (name) => `${prefix}${name}/${process.pid}/${Date.now()}`;

test("the token option authenticates; L7 names the holder by holderId", async () => {
  const session = await new LockClient({ baseUrl, token }).openSession({ owner: "node-auth" });
  const k = key("held");
  const handle = await session.acquire(k);
  assert.ok(handle, "granted");
  const res = await fetch(`${baseUrl}/v1/locks/${encodeURIComponent(k)}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const state = await res.json();
  assert.equal(state.holder.holderId, session.holderId);
  assert.equal(state.holder.owner, "node-auth");
  assert.equal(state.holder.fencingToken, handle.fencingToken);
  assert.ok(!JSON.stringify(state).includes(session.id), "L7 never shows a session id");
  await session.release(handle);
  await session.close();
});

test("a key outside the client's prefixes is FORBIDDEN, not retryable", async () => {
  const session = await new LockClient({ baseUrl, token }).openSession();
  await assert.rejects(
    session.acquire(`elsewhere/${process.pid}`),
    (err) =>
      err instanceof ForbiddenError &&
      err.code === ErrorCode.FORBIDDEN &&
      err.retryable === false,
  );
  await session.close();
});

test("no token or an unknown one is UNAUTHORIZED, not retryable", async () => {
  for (const options of [{ baseUrl }, { baseUrl, token: `${token}x` }]) {
    await assert.rejects(
      new LockClient(options).openSession(),
      (err) =>
        err instanceof UnauthorizedError &&
        err.code === ErrorCode.UNAUTHORIZED &&
        err.retryable === false,
    );
  }
});

test("a token no header can carry is refused before anything is sent", () => {
  assert.throws(
    () => new LockClient({ baseUrl, token: "two words" }),
    (err) => err instanceof ValidationError && err.field === "token",
  );
});
