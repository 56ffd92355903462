#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this). Installs what it needs first.
#
# Stages: lint (fmt, clippy native and wasm32), the Rust tests of every crate (unit tests,
# the seeded simulation, the end-to-end suites against real lock-server and etcd processes),
# the wasm SDK suites (Node, headless Chromium, the npm package in Node and Deno), the
# fencing examples against real PostgreSQL and Redis (scripts/test-examples.sh), the
# dashboard suites (component tests and the end-to-end browser run), and `run`: the run
# command, scripts/run.sh, as the README gives it, under a PATH without anything only the test
# set-up installs (run mode must ask for what it needs; this stage adds a release build),
# checked in headless Chromium, stopped with SIGINT and restarted clean
# (scripts/test-run.sh). Every stage runs even when an earlier one failed, so one run reports
# everything; the exit code is non-zero if any stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test || exit 1

passed=0
failed=0
failures=()
stage() {
  local name="$1"
  shift
  printf '\n==== stage %s: %s\n' "$name" "$*"
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    printf '==== stage %s passed (%ss)\n' "$name" $((SECONDS - start))
  else
    failed=$((failed + 1))
    failures+=("$name")
    printf '==== stage %s FAILED (%ss)\n' "$name" $((SECONDS - start))
  fi
}

# The crates that compile to wasm32 (the SDK, the dashboard and what they share).
wasm_crates=(-p lock-api -p lock-wasm -p lock-lab -p bench-ui)

stage fmt cargo fmt --all -- --check
stage clippy cargo clippy --workspace --all-targets --locked -- -D warnings
stage clippy-wasm32 cargo clippy --target wasm32-unknown-unknown "${wasm_crates[@]}" --locked -- -D warnings
# The e2e harness spawns the real server binary; build it once up front.
stage build-server cargo build -p lock-server --locked
stage cargo-test cargo test --workspace --locked
[ -x scripts/test-wasm.sh ] && stage wasm-sdk scripts/test-wasm.sh
stage examples scripts/test-examples.sh
[ -x scripts/test-ui.sh ] && stage bench-ui scripts/test-ui.sh
stage run scripts/test-run.sh

printf '\n==== failed stages: %s\n' "${failures[*]:-none}"
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
