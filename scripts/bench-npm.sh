#!/usr/bin/env bash
# Benchmark (not a test): acquire+release latency through the npm package vs the same L4 +
# L6 requests made with raw `fetch` (with a per-request `AbortSignal.timeout`, and bare; under
# Node also through `node:http`, the client the SDK uses there),
# against one release-built lock-server, in one run (tests/node/bench.mjs): under Node, then
# Bun (npm `bun`, as scripts/test-wasm.sh pins it) and Deno against the same server. Prints
# each runtime's Markdown table and ratios, then a table of all three. Then the same
# acquire+release cycles with OpenTelemetry installed vs without it: without the API, with the
# API alone (no provider registered), with the API and the SDK's tracer provider (no
# exporter); three long-lived child processes taking turns by blocks of 50 cycles
# (tests/node/bench-otel.mjs: 20 warm-up blocks, then 100 measured); then
# the test kit's cost per simulated cycle in Node (tests/node/bench-kit.mjs); then the
# service pattern (tests/node/bench-service.mjs): an in-process node:http server whose
# handler takes `acct/<k>` with `using` and writes the fenced ledger, 20 concurrent requests,
# with 20 keys and with 1, one long-lived session vs a session per request, side by side.
#
#   scripts/bench-npm.sh [CYCLES_PER_BLOCK] [BLOCKS]     # defaults 200 5
#
# NPM_DIR=<dir>: use the package already built there by scripts/build-npm.sh (no rebuild).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d /tmp/lock-wasm-bench.XXXXXX)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

tools="$root/.tools"
bun="$tools/node_modules/.bin/bun"
[ -x "$bun" ] || bash scripts/setup.sh test >&2
command -v deno >/dev/null || python3 -m pip install --quiet deno

cargo build -q --release -p lock-server
npm_dir="${NPM_DIR:-$work/npm}"
[ -n "${NPM_DIR:-}" ] || bash scripts/build-npm.sh "$npm_dir" >/dev/null
"$CARGO_TARGET_DIR/release/lock-server" --listen 127.0.0.1:0 --data-dir "$work/data" >"$work/server.log" 2>&1 &
pid=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -m1 '"listening"' "$work/server.log" | grep -oE '127\.0\.0\.1:[0-9]+' | sed 's#^#http://#' || true)"
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/server.log"; exit 1; }

mkdir -p "$work/project" "$work/project-otel" "$work/project-api"
cp tests/node/bench.mjs tests/node/bench-otel.mjs tests/node/bench-kit.mjs tests/node/bench-stats.mjs \
  tests/node/bench-service.mjs "$work/project/"
for p in project-otel project-api; do cp tests/node/bench-otel.mjs tests/node/bench-stats.mjs "$work/$p/"; done
printf '{ "name": "lock-wasm-bench", "private": true, "type": "module" }\n' >"$work/project/package.json"
cp "$work/project/package.json" "$work/project-otel/"
cp "$work/project/package.json" "$work/project-api/"
(cd "$work/project" && npm install --silent --no-audit --no-fund --offline "$npm_dir"/lock-wasm-*.tgz)
# The versions the tracing suite pins (scripts/test-wasm.sh).
(cd "$work/project-otel" && npm install --silent --no-audit --no-fund --prefer-offline \
  "$npm_dir"/lock-wasm-*.tgz @opentelemetry/api@1.9.1 @opentelemetry/sdk-trace-base@2.12.1 \
  @opentelemetry/context-async-hooks@2.12.1)
(cd "$work/project-api" && npm install --silent --no-audit --no-fund --prefer-offline \
  "$npm_dir"/lock-wasm-*.tgz @opentelemetry/api@1.9.1)
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "lock-server (release, sqlite) at $url; node $(node --version), bun $("$bun" --version), $(deno --version | head -1)"
cycles=("${1:-200}" "${2:-5}")
bench_in() {
  echo "== $1 (load average $(load))"
  (cd "$work/project" && LOCK_URL="$url" "${@:2}" bench.mjs "${cycles[@]}") | tee "$work/$1.log" | grep -v '^{'
}
bench_in node node
bench_in bun "$bun"
bench_in deno deno run --quiet --allow-net=127.0.0.1 --allow-env --allow-read
echo
echo "| runtime | SDK p50 ms | fetch+timeout p50 ms | bare fetch p50 ms | node:http+timeout p50 ms | SDK/(fetch+timeout) p50 | SDK/bare p50 | SDK/(node:http+timeout) p50 | CPU µs/cycle SDK / fetch+timeout |"
echo "|---|---|---|---|---|---|---|---|---|"
for rt in node bun deno; do
  tail -n1 "$work/$rt.log" | node -e '
    const r = JSON.parse(require("fs").readFileSync(0, "utf8")); const f = (x) => x.toFixed(3);
    const c = (x) => (Number.isFinite(x) ? x.toFixed(0) : "–");
    const o = (x, unit = "") => (x == null ? "–" : f(x) + unit);
    console.log(`| ${r.runtime} | ${f(r.p50.sdk)} | ${f(r.p50.timed)} | ${f(r.p50.bare)} | ${o(r.p50.http)} | ${f(r.ratioP50.timed)}x | ${f(r.ratioP50.bare)}x | ${o(r.ratioP50.http, "x")} | ${c(r.cpuMicros.sdk)} / ${c(r.cpuMicros.timed)} |`);'
done
echo
echo "== OpenTelemetry installed vs not, node (load average $(load))"
(cd "$work/project" && LOCK_URL="$url" node bench-otel.mjs "$work/project" "$work/project-otel" "$work/project-api")
echo
echo "== test kit, node (load average $(load))"
(cd "$work/project" && node bench-kit.mjs "${cycles[@]}")
echo
echo "== service pattern, node (load average $(load))"
(cd "$work/project" && LOCK_URL="$url" node bench-service.mjs)
