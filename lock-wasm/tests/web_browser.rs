//! The wasm-bindgen-test suite of the SDK's WebAssembly runtime, run in headless Chromium.
//! The server must allow the test page's origin through CORS (`--cors-origin`).
//!
//! `scripts/test-wasm.sh` runs it against a real lock-server; by hand:
//! `LOCK_TEST_URL=http://127.0.0.1:PORT wasm-pack test --mode no-install --headless --chrome
//! --chromedriver /usr/bin/chromedriver` (see `wasm_suite`, and `lock-wasm/README.md`).
#![cfg(target_arch = "wasm32")]

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod wasm_suite;
