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
# everything (and inside the Rust stage every test binary runs, `--no-fail-fast`); the exit
# code is non-zero if any stage failed.
#
# Time: CI gives the whole run 90 minutes. Each stage runs under a bound of its own (a hung
# test fails its stage instead of the run), and no stage may run past 85 minutes from the
# start, so a run always ends with its report. The bounds are several times what a stage takes
# on a cold two-core machine.
set -uo pipefail
cd "$(dirname "$0")/.."
deadline=$((SECONDS + 85 * 60))
scripts/setup.sh test || exit 1

passed=0
failed=0
failures=()
# stage NAME MINUTES COMMAND...: runs COMMAND, stopped (its whole process group) after
# MINUTES or at the run's deadline, whichever comes first.
stage() {
  local name="$1" bound=$(($2 * 60))
  shift 2
  local left=$((deadline - SECONDS))
  ((left < bound)) && bound=$left
  printf '\n==== stage %s (bound %ss): %s\n' "$name" "$bound" "$*"
  local start=$SECONDS rc=124
  ((bound > 0)) && { timeout --kill-after=30 "$bound" "$@"; rc=$?; }
  if ((rc == 0)); then
    passed=$((passed + 1))
    printf '==== stage %s passed (%ss)\n' "$name" $((SECONDS - start))
  else
    failed=$((failed + 1))
    failures+=("$name")
    local why=""
    ((rc == 124 || rc == 137)) && why=", out of time"
    printf '==== stage %s FAILED (%ss%s)\n' "$name" $((SECONDS - start)) "$why"
  fi
}

# The crates that compile to wasm32 (the SDK, the dashboard and what they share).
wasm_crates=(-p lock-api -p lock-wasm -p lock-lab -p bench-ui)

stage fmt 5 cargo fmt --all -- --check
stage clippy 30 cargo clippy --workspace --all-targets --locked -- -D warnings
# All targets (the wasm test suites too) and the test kit's feature, as the npm build
# compiles it.
stage clippy-wasm32 20 cargo clippy --target wasm32-unknown-unknown "${wasm_crates[@]}" \
  --features lock-wasm/testkit --all-targets --locked -- -D warnings
# Every binary the tests spawn (lock-server; chaos's contender; lockctl), built before the tests
# run: a build from inside a running `cargo test` could rewrite artifacts it is using.
stage build-bins 20 cargo build --locked -p lock-server -p lock-chaos -p lockctl --bins
stage cargo-test 30 cargo test --workspace --locked --no-fail-fast
[ -x scripts/test-wasm.sh ] && stage wasm-sdk 20 scripts/test-wasm.sh
stage examples 15 scripts/test-examples.sh
[ -x scripts/test-ui.sh ] && stage bench-ui 20 scripts/test-ui.sh
stage run 30 scripts/test-run.sh
# The Debian package (scripts/package-deb.sh) from the run stage's release build: its contents,
# the unit (systemd-analyze verify), the unpacked binaries started.
stage package 15 scripts/test-package.sh

printf '\n==== failed stages: %s\n' "${failures[*]:-none}"
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
