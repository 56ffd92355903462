#!/usr/bin/env bash
# Benchmark (not a test): watches and elections (tests/node/bench-watch.mjs) against one
# release-built lock-server on SQLite, each figure beside its baseline from the same run:
#   fanout    L6 release → each of 100 SSE watchers' `released` event, vs the L6 round trip
#             (p50, p99; target ≤ 1.5× at p99);
#   failover  leader SIGSTOP'd → the waiting candidate elected (npm `session.campaign`, one
#             child process per candidate: tests/node/bench-candidate.mjs), vs the session TTL
#             (target ≤ TTL + one heartbeat period, TTL/3);
#   memory    the server's RSS per 1,000 idle SSE watchers vs per 1,000 idle keep-alive
#             connections.
# Prints Markdown tables and a JSON summary; docs/BENCHMARKS.md "Watches and elections"
# records them.
#
#   scripts/bench-watch.sh [fanout] [failover] [memory]     # all three by default
#
# NPM_DIR=<dir>: use the package already built there by scripts/build-npm.sh (no rebuild).
# BENCH_WATCHERS, BENCH_CYCLES, BENCH_TTLS, BENCH_FAILOVERS, BENCH_IDLE: see bench-watch.mjs.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d /tmp/bench-watch.XXXXXX)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

cargo build -q --release -p lock-server
npm_dir="${NPM_DIR:-$work/npm}"
[ -n "${NPM_DIR:-}" ] || bash scripts/build-npm.sh "$npm_dir" >/dev/null
# Each idle watcher and connection is a socket on both sides (3 × BENCH_IDLE at the peak).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
"$CARGO_TARGET_DIR/release/lock-server" --listen 127.0.0.1:0 --data-dir "$work/data" >"$work/server.log" 2>&1 &
pid=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -m1 '"listening"' "$work/server.log" | grep -oE '127\.0\.0\.1:[0-9]+' | sed 's#^#http://#' || true)"
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/server.log"; exit 1; }

mkdir -p "$work/project"
cp tests/node/bench-watch.mjs tests/node/bench-watchers.mjs tests/node/bench-candidate.mjs "$work/project/"
printf '{ "name": "lock-wasm-bench-watch", "private": true, "type": "module" }\n' >"$work/project/package.json"
(cd "$work/project" && npm install --silent --no-audit --no-fund --offline "$npm_dir"/lock-wasm-*.tgz)
echo "lock-server (release, sqlite) at $url, pid $pid; node $(node --version); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
(cd "$work/project" && LOCK_URL="$url" LOCK_PID="$pid" node bench-watch.mjs "$@")
