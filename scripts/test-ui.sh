#!/usr/bin/env bash
# bench-ui suites, as scripts/test.sh runs them (exit non-zero on any failure):
#   1. component tests: wasm-bindgen-test in headless Chromium (chromedriver), mounting
#      components, interacting and reading the DOM;
#   2. end-to-end: the real lock-server serving the freshly built www/ (--web-root www),
#      headless Chromium driven by playwright-core runs a 10-session experiment over HTTP/1.1
#      with full jitter, then on the server queue, then readers and writers mixed under a
#      semaphore (tests/browser/e2e.mjs; prints where its screenshot went), then Brooker's sweep at
#      N = 50 over HTTP/2 (TLS with a self-signed test certificate), five seeds, and checks
#      the published ordering on their medians (tests/browser/sweep.mjs, which drives
#      Chromium over a bare DevTools pipe: playwright's per-request instrumentation would
#      slow the page it times); then the fault lab over HTTP/2 (tests/browser/lab.mjs, bare
#      DevTools pipe too): a URL restores the lab's form, "gc-pause" and "revoke" fence out
#      the stale write on the fenced side and corrupt the unfenced ledger, "short-pause" does
#      neither, and a fault injected by hand lands on its contender's row.
# Native unit tests of the model and runner run with `cargo test -p bench-ui` (test.sh's
# cargo-test stage).
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
failed=0

echo "== bench-ui: component tests (wasm-bindgen-test, headless Chromium)"
CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}" \
  CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p bench-ui --target wasm32-unknown-unknown --test web --locked || failed=1

echo "== bench-ui: build the dashboard and the server"
scripts/build-ui.sh || exit 1
cargo build -p lock-server --locked || exit 1

echo "== bench-ui: end-to-end (lock-server --web-root www + headless Chromium)"
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --silent) || exit 1
fi
node tests/browser/e2e.mjs \
  --server "$target_dir/debug/lock-server" \
  --web-root "$root/www" \
  --screenshot "$target_dir/bench-ui-e2e.png" || failed=1

echo "== bench-ui: Brooker's sweep over HTTP/2 (lock-server --tls-self-signed + headless Chromium)"
node tests/browser/sweep.mjs --seeds 5 \
  --server "$target_dir/debug/lock-server" \
  --web-root "$root/www" || failed=1

echo "== bench-ui: the fault lab over HTTP/2 (lock-server --tls-self-signed + headless Chromium)"
node tests/browser/lab.mjs \
  --server "$target_dir/debug/lock-server" \
  --web-root "$root/www" || failed=1

[ "$failed" -eq 0 ] && echo "bench-ui suites passed" || echo "bench-ui suites FAILED"
exit "$failed"
