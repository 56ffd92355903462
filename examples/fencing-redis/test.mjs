// The fenced set against a real Redis (REDIS_URL) and a real lock-server (LOCK_URL):
// scripts/test-examples.sh starts both.
import { test, after } from "node:test";
import Redis from "ioredis";
import { FencedOutError } from "lock-wasm";
import { checkFenceRule, pausedWorkerScenario, uniqueKey } from "../scenario/scenario.mjs";
import { defineFencedSet, fencedSet } from "./fenced-set.mjs";

const redis = new Redis(process.env.REDIS_URL);
defineFencedSet(redis);
after(() => redis.disconnect());

async function read(key) {
  const { value, fencingToken } = await redis.hgetall(key);
  return value === undefined ? undefined : { value, fencingToken: Number(fencingToken) };
}

test("the script keeps the write of the highest token", () =>
  checkFenceRule({ write: (key, token, value) => fencedSet(redis, key, token, value), read, FencedOutError }, uniqueKey("redis-rule")));

test("a paused worker's late write is refused; the newer holder's write stands", () =>
  pausedWorkerScenario({ worker: new URL("./worker.mjs", import.meta.url), read }, uniqueKey("redis-paused")));
