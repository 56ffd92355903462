// The fenced service (service.mjs on a free loopback port) with a real lock-server
// (LOCK_URL, started by scripts/test-examples.sh).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { FencedOutError } from "lock-wasm";
import { checkFenceRule, pausedWorkerScenario, uniqueKey } from "../scenario/scenario.mjs";
import { createService } from "./service.mjs";
import { fencedPut } from "./client.mjs";

const service = createService();
let base;
before(async () => {
  service.listen(0, "127.0.0.1");
  await once(service, "listening");
  base = `http://127.0.0.1:${service.address().port}`;
});
after(() => service.close());

const url = (key) => `${base}/documents/${encodeURIComponent(key)}`;
const write = (key, token, value) => fencedPut(url(key), key, token, value);

async function read(key) {
  const res = await fetch(url(key));
  return res.status === 404 ? undefined : res.json();
}

function put(headers) {
  return fetch(url("bad-headers"), { method: "PUT", headers, body: "x" });
}

test("the service keeps the write of the highest token", () =>
  checkFenceRule({ write, read, FencedOutError }, uniqueKey("http-rule")));

test("a key outside Latin-1 travels percent-encoded", async () => {
  const key = uniqueKey("http-rule/größe ✓");
  await write(key, 3, "three");
  await assert.rejects(write(key, 2, "two"), FencedOutError);
  assert.deepEqual(await read(key), { value: "three", fencingToken: 3 });
});

test("missing or malformed fence headers are refused with 400", async () => {
  const cases = [
    [{ "Fencing-Key": "k" }, "Fencing-Token"],
    [{ "Fencing-Token": "1" }, "Fencing-Key"],
    [{ "Fencing-Token": "1e3", "Fencing-Key": "k" }, "Fencing-Token"],
    [{ "Fencing-Token": "-1", "Fencing-Key": "k" }, "Fencing-Token"],
    [{ "Fencing-Token": "9007199254740992", "Fencing-Key": "k" }, "Fencing-Token"],
    [{ "Fencing-Token": "1", "Fencing-Key": "%E0%A4%A" }, "Fencing-Key"],
    [{ "Fencing-Token": "1", "Fencing-Key": "" }, "Fencing-Key"],
  ];
  for (const [headers, field] of cases) {
    const res = await put(headers);
    assert.equal(res.status, 400, JSON.stringify(headers));
    assert.equal((await res.json()).field, field, JSON.stringify(headers));
  }
  assert.equal(await read("bad-headers"), undefined, "nothing was written");
});

test("a paused worker's late write is refused; the newer holder's write stands", () =>
  pausedWorkerScenario(
    { worker: new URL("./worker.mjs", import.meta.url), env: { SERVICE_URL: base }, read },
    uniqueKey("http-paused/größe ✓"),
  ));
