// The fenced write for Redis: a Lua script that checks the fencing token and writes in one
// step (Redis runs a script to the end before any other command). Copy this.
import { FencedOutError } from "lock-wasm";

// KEYS[1]: a hash holding the value and the fencing token that wrote it last.
// ARGV[1]: the writer's fencing token; ARGV[2]: the value.
// The token lives in the same key as the data, so the script touches one key (fine on
// Redis Cluster too). Tokens stay below 2^53, exact in Lua's numbers.
const FENCED_SET = `
  local last = redis.call('HGET', KEYS[1], 'fencingToken')
  if last and tonumber(ARGV[1]) < tonumber(last) then
    return 0
  end
  redis.call('HSET', KEYS[1], 'fencingToken', ARGV[1], 'value', ARGV[2])
  return 1`;

/** Teaches an ioredis client the `fencedSet` command (EVALSHA, falling back to EVAL). */
export function defineFencedSet(redis) {
  redis.defineCommand("fencedSet", { numberOfKeys: 1, lua: FENCED_SET });
}

/** Writes `value` under `key` with `fencingToken`; a FencedOutError if a higher token wrote. */
export async function fencedSet(redis, key, fencingToken, value) {
  if (!Number.isSafeInteger(fencingToken)) throw new TypeError("fencingToken must be a safe integer");
  if ((await redis.fencedSet(key, fencingToken, value)) === 0) {
    throw new FencedOutError(`${key}: fencing token ${fencingToken} is below the one that wrote last`);
  }
}
