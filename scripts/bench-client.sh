#!/usr/bin/env bash
# Client-side benchmarks, run by scripts/bench.sh after the server parts (not a
# test: prints and records). Collects, on this machine, in one go:
#   1. the gzipped size of the npm package's .wasm (scripts/build-npm.sh);
#   2. SDK acquire+release vs the same requests with raw fetch (with a per-request timeout,
#      and bare) in Node, Bun and Deno, OpenTelemetry installed vs not, and the test kit's
#      cost per simulated cycle (scripts/bench-npm.sh, interleaved blocks against one
#      release lock-server), 3 runs;
#   3. the dashboard's time to first plot (tests/browser/e2e.mjs against a release
#      lock-server serving the release-built www/, headless Chromium), 3 runs;
# and rewrites the "Client side" section of docs/BENCHMARKS.md through `bench record`.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
out="$(mktemp -d /tmp/bench-client.XXXXXX)"
trap 'rm -rf "$out"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "== wasm size" >&2
bash scripts/build-npm.sh "$out/npm" 2>&1 | tee "$out/size.log" >&2
size="$(grep -m1 '^wasm size:' "$out/size.log" || echo 'wasm size: (not printed)')"

echo "== SDK vs raw fetch (Node, Bun, Deno), OpenTelemetry, test kit" >&2
for run in 1 2 3; do
  echo "run $run (load average $(load))" >>"$out/npm.log"
  bash scripts/bench-npm.sh 200 5 2>&1 | tee -a "$out/npm.log" >&2
done

echo "== dashboard time to first plot" >&2
cargo build -q --release -p lock-server
bash scripts/build-ui.sh >&2
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
for run in 1 2 3; do
  node tests/browser/e2e.mjs --server "$CARGO_TARGET_DIR/release/lock-server" --web-root www \
    2>&1 | tee "$out/ui-$run.log" >&2
  grep -m1 '^timing:' "$out/ui-$run.log" | sed "s/^/run $run: /" >>"$out/ui.log"
done

{
  echo "Command: \`scripts/bench.sh\` (this part alone: \`scripts/bench-client.sh\`). Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), Node $(node --version), $(chromium --version 2>/dev/null | head -1); load average at the end $(load)."
  echo
  echo "**Gzipped .wasm of the npm package** (target ≤ 80 KB): $size"
  echo
  echo "**SDK acquire+release vs raw fetch** (target ≤ 1.1× at p50 against fetch with a"
  echo "per-request \`AbortSignal.timeout\`, in Node; Bun and Deno recorded; OpenTelemetry target"
  echo "≤ 1.05×): 3 runs of \`scripts/bench-npm.sh 200 5\` (5 interleaved blocks of 200 cycles each"
  echo "side, one key per side, release lock-server on SQLite). Each run's tables and ratios:"
  echo
  echo '```'
  grep -E '^(run |==|\||ratio|kit)' "$out/npm.log"
  echo '```'
  echo
  echo "**Dashboard time to first plot**: 3 runs of \`tests/browser/e2e.mjs\` (navigation →"
  echo "dashboard mounted; Run clicked → first hold bar in the timeline; Run → 10 sessions × 2"
  echo "acquisitions finished):"
  echo
  echo '```'
  cat "$out/ui.log"
  echo '```'
} >"$out/section.md"
cat "$out/section.md"
"$CARGO_TARGET_DIR/release/bench" record --title "Client side" --body-file "$out/section.md"
