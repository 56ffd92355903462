#!/usr/bin/env bash
# The dashboard's Brooker sweep in a real browser beside the native sweep (a benchmark, not a
# test; scripts/bench.sh runs it after the server parts). In one go:
#   1. builds lock-server, the bench and the dashboard (release);
#   2. runs the dashboard's sweep in headless Chromium over HTTP/2 (lock-server
#      --tls-self-signed; tests/browser/sweep.mjs, N = 10…100 step 30, hold 0 ms as the native
#      sweep holds, 2 seeds), then the same sweep over plain HTTP/1.1 as the control (1 seed);
#   3. `bench dashboard-sweep`: the native sweep at the same N, now, and the section
#      "Backoff strategies: the dashboard over HTTP/2 vs native" of docs/BENCHMARKS.md
#      (ordering of the strategies at every N; full jitter's calls vs native), plus its rows
#      of the Summary;
#   4. tests/browser/wave.mjs: how long a wave of 50 simultaneous L4 calls takes to leave
#      and come back in Chromium and in Node (printed only; the section "A wave of retries
#      in the browser" is written by hand).
#
#   scripts/bench-dashboard.sh [--seeds 2] [--from 10 --to 100 --step 30]   # sweep.mjs flags
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
out="$(mktemp -d /tmp/bench-dashboard.XXXXXX)"
trap 'rm -rf "$out"' EXIT

cargo build -q --release -p lock-server -p bench
bash scripts/build-ui.sh >&2
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
sweep=(node tests/browser/sweep.mjs --server "$CARGO_TARGET_DIR/release/lock-server" --web-root www
  --from 10 --to 100 --step 30 --hold 0 --check no)
echo "== dashboard sweep over HTTP/2 (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${sweep[@]}" --seeds 2 --out "$out/h2.json" "$@" | grep -v '^{"timestamp' >&2
echo "== dashboard sweep over HTTP/1.1, the control (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"${sweep[@]}" --seeds 1 --tls no --out "$out/h1.json" "$@" | grep -v '^{"timestamp' >&2
echo "== native sweep at the same N" >&2
"$CARGO_TARGET_DIR/release/bench" dashboard-sweep --sweep-rounds 2 --log "$out/h2.json" --control "$out/h1.json"
echo "== a wave of 50 L4 calls: Chromium vs Node (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
node tests/browser/wave.mjs --server "$CARGO_TARGET_DIR/release/lock-server" >&2
