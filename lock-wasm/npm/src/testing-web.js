// `lock-wasm/testing` for Deno, browsers and bundlers: the kit's `--target web` glue,
// initialised once at import time like the main entry's; the clients are the main entry's
// LockClient.
import init, * as raw from "./lock_wasm_testkit.js";
import api from "../../web/index.js";
import { createTestKitApi } from "./testing.js";

const wasmUrl = new URL("./lock_wasm_testkit_bg.wasm", import.meta.url);
if (typeof Deno !== "undefined" && wasmUrl.protocol === "file:") {
  raw.initSync({ module: await Deno.readFile(wasmUrl) });
} else {
  await init({ module_or_path: wasmUrl });
}

const kit = createTestKitApi(raw, api);
export const { createTestKit } = kit;
export default kit;
