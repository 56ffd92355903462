// Node, CommonJS: the `--target nodejs` glue loads the .wasm synchronously from disk.
"use strict";
const raw = require("./lock_wasm.cjs");
const { createApi } = require("./api.cjs");

module.exports = createApi(raw);
