// The client side: send the fencing token and the lock key with the write, and turn the
// service's 409 into a FencedOutError.
import { FencedOutError } from "lock-wasm";

/** PUTs `value` to `url`, fenced by `key`/`fencingToken` (a handle's `key`/`fencingToken`). */
export async function fencedPut(url, key, fencingToken, value) {
  const res = await fetch(url, {
    method: "PUT",
    headers: { "Fencing-Token": String(fencingToken), "Fencing-Key": encodeURIComponent(key) },
    body: value,
  });
  if (res.status === 409) throw new FencedOutError(`${key}: ${(await res.json()).message}`);
  if (!res.ok) throw new Error(`PUT ${url}: HTTP ${res.status} ${await res.text()}`);
}
