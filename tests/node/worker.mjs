// One contender process for contention.test.mjs: `node worker.mjs KEY ID ROUNDS`.
import { LockClient } from "lock-wasm";
import { contend } from "./helpers.mjs";

const [key, id, rounds] = process.argv.slice(2);
const session = await new LockClient({ baseUrl: process.env.LOCK_URL }).openSession();
await contend(session, key, id, Number(rounds));
await session.close();
