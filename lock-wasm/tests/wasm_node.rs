//! The wasm-bindgen-test suite of the SDK's WebAssembly runtime, run in Node.
//!
//! `scripts/test-wasm.sh` runs it against a real lock-server; by hand:
//! `LOCK_TEST_URL=http://127.0.0.1:PORT wasm-pack test --node` (see `wasm_suite`).
#![cfg(target_arch = "wasm32")]

mod wasm_suite;
