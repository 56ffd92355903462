// FencedOutError as the code guarding a resource throws it (docs/fencing.md, examples/).
import { test } from "node:test";
import assert from "node:assert/strict";
import { FencedOutError, LockError, ErrorCode } from "lock-wasm";

test("new FencedOutError(message) carries FENCED_OUT and is never retryable", () => {
  const err = new FencedOutError("doc-7: fencing token 4 is below the one that wrote last");
  assert.ok(err instanceof LockError && err instanceof Error);
  assert.equal(err.name, "FencedOutError");
  assert.equal(err.code, ErrorCode.FENCED_OUT);
  assert.equal(err.retryable, false);
  assert.equal(err.message, "doc-7: fencing token 4 is below the one that wrote last");
});

test("FencedOutError keeps a cause", () => {
  const cause = new Error("409 from the resource");
  assert.equal(new FencedOutError("refused", { cause }).cause, cause);
});
