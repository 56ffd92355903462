// `lock-wasm/testing` in Node (and Bun), CommonJS: the kit's `--target nodejs` glue loads its
// own .wasm synchronously from disk; the clients are the main entry's LockClient.
"use strict";
const raw = require("./lock_wasm_testkit.cjs");
const api = require("../../node/index.cjs");
const { createTestKitApi } = require("./testing.cjs");

module.exports = createTestKitApi(raw, api);
