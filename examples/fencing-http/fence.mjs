// The fence of an HTTP service: reads the lock key and fencing token a client sends with a
// write and refuses writes whose token is below the highest accepted for that key. Copy
// this; service.mjs shows it in a handler.
//
//   Fencing-Token: 42               decimal, below 2^53
//   Fencing-Key: jobs%2Fpayout%2F7  the lock key, percent-encoded (encodeURIComponent):
//                                   header values must be Latin-1, lock keys are UTF-8

/** A bad or missing fence header: answer 400 with `body`. */
export class FenceHeaderError extends Error {
  constructor(field, message) {
    super(`${field}: ${message}`);
    this.body = { code: "VALIDATION_FAILED", field, message: this.message };
  }
}

/** `{ key, token }` from Node's lower-cased request headers, or a FenceHeaderError. */
export function readFence(headers) {
  const token = headers["fencing-token"];
  const encodedKey = headers["fencing-key"];
  if (token === undefined) throw new FenceHeaderError("Fencing-Token", "required");
  if (encodedKey === undefined) throw new FenceHeaderError("Fencing-Key", "required");
  if (!/^[0-9]{1,16}$/.test(token) || !Number.isSafeInteger(Number(token))) {
    throw new FenceHeaderError("Fencing-Token", "must be a decimal integer below 2^53");
  }
  let key;
  try {
    key = decodeURIComponent(encodedKey);
  } catch {
    throw new FenceHeaderError("Fencing-Key", "must be percent-encoded UTF-8");
  }
  if (key === "") throw new FenceHeaderError("Fencing-Key", "must not be empty");
  return { key, token: Number(token) };
}

/**
 * Admits a write iff `token` ≥ the highest token accepted for `key`, and records it.
 * `fences`: any store with `get(key)` and `set(key, token)`, such as a `Map`. Returns
 * `undefined` when admitted, else the 409 body. The check is atomic with the write only if
 * nothing else runs between this call and the write: in Node, no `await` in between. A
 * write that must `await` (a database) needs the check inside the database instead, as in
 * examples/fencing-postgres.
 */
export function checkFence(fences, key, token) {
  const highest = fences.get(key);
  if (highest !== undefined && token < highest) {
    return { code: "FENCED_OUT", message: `a higher fencing token (${highest}) was already accepted`, highestToken: highest };
  }
  fences.set(key, token);
  return undefined;
}
