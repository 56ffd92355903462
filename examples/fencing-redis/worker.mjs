// A job that locks a key and writes the Redis hash of that key through the fenced set; the
// test drives it (../scenario/worker.mjs). Redis at REDIS_URL.
import * as sdk from "lock-wasm";
import Redis from "ioredis";
import { runWorker } from "../scenario/worker.mjs";
import { defineFencedSet, fencedSet } from "./fenced-set.mjs";

const redis = new Redis(process.env.REDIS_URL);
defineFencedSet(redis);
try {
  await runWorker(sdk, (handle, value) => fencedSet(redis, handle.key, handle.fencingToken, value));
} finally {
  redis.disconnect();
}
