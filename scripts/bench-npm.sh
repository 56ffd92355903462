#!/usr/bin/env bash
# Benchmark (not a test): acquire+release latency through the npm package in Node vs the
# same L4 + L6 requests made with raw `fetch`, against one release-built lock-server, in one
# run (tests/node/bench.mjs). Prints a Markdown table and the SDK/raw ratio. Then the same
# acquire+release cycles with OpenTelemetry installed (API + SDK tracer provider, no
# exporter) vs without it, in alternating child processes (tests/node/bench-otel.mjs).
#
#   scripts/bench-npm.sh [CYCLES_PER_BLOCK] [BLOCKS]     # defaults 200 5
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d /tmp/lock-wasm-bench.XXXXXX)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

cargo build -q --release -p lock-server
bash scripts/build-npm.sh "$work/npm" >/dev/null
"$CARGO_TARGET_DIR/release/lock-server" --listen 127.0.0.1:0 --data-dir "$work/data" >"$work/server.log" 2>&1 &
pid=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -m1 '"listening"' "$work/server.log" | grep -oE '127\.0\.0\.1:[0-9]+' | sed 's#^#http://#' || true)"
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/server.log"; exit 1; }

mkdir -p "$work/project" "$work/project-otel"
cp tests/node/bench.mjs tests/node/bench-otel.mjs tests/node/bench-stats.mjs "$work/project/"
cp tests/node/bench-otel.mjs tests/node/bench-stats.mjs "$work/project-otel/"
printf '{ "name": "lock-wasm-bench", "private": true, "type": "module" }\n' >"$work/project/package.json"
cp "$work/project/package.json" "$work/project-otel/"
(cd "$work/project" && npm install --silent --no-audit --no-fund --offline "$work"/npm/lock-wasm-*.tgz)
# The versions the tracing suite pins (scripts/test-wasm.sh).
(cd "$work/project-otel" && npm install --silent --no-audit --no-fund --prefer-offline \
  "$work"/npm/lock-wasm-*.tgz @opentelemetry/api@1.9.1 @opentelemetry/sdk-trace-base@2.12.1 \
  @opentelemetry/context-async-hooks@2.12.1)
echo "lock-server (release, sqlite) at $url; node $(node --version)"
(cd "$work/project" && LOCK_URL="$url" node bench.mjs "${1:-200}" "${2:-5}")
echo
(cd "$work/project" && LOCK_URL="$url" node bench-otel.mjs "$work/project" "$work/project-otel" "${1:-200}" "${2:-5}")
